// The guard in front of POST /a2a: a peer's bearer token or JWT (src/services/authenticate-caller.ts),
// throttled per source network like every other login (src/http/throttle.ts). A request it
// refuses never reaches the JSON-RPC handler: the app's error mapper answers 401 with
// WWW-Authenticate (or 429 past the failure limit), never a JSON-RPC 200. The caller it lets in
// is on the context as `caller`. The gRPC binding (src/a2a/grpc-service.ts) authenticates with
// `authenticateA2aCaller`, the same function without hono.
import type { MiddlewareHandler } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import type { Caller } from "../../domain/caller.ts";
import {
  type AuthDeps,
  type AuthenticatedCaller,
  authenticatePeer,
} from "../../services/authenticate-caller.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth } from "../throttle.ts";
import { traceAuthentication } from "./trace-requests.ts";

/** What the A2A routes find on the context once the guard let a request in. */
export type A2aEnv = { Variables: { caller: Caller } };

export type A2aAuthDeps = { readonly auth: AuthDeps; readonly limiter: RateLimiter };

/**
 * A peer's `Authorization` value, from `source` (its address), checked and throttled: the caller,
 * or UnauthenticatedError (RateLimitedError past the failure limit), the refusal audited.
 */
export function authenticateA2aCaller(
  deps: A2aAuthDeps,
  authorization: string | undefined,
  source: string,
): Promise<AuthenticatedCaller> {
  return traceAuthentication("a2a", () =>
    throttleAuth(deps.limiter, [`source:${source}`], () =>
      authenticatePeer(deps.auth, authorization, { surface: "a2a", source }),
    ),
  );
}

/**
 * @example
 * app.post("/a2a", requireA2aCaller({ auth, limiter }), (c) => handle(c.get("caller")));
 */
export function requireA2aCaller(deps: A2aAuthDeps): MiddlewareHandler<A2aEnv> {
  return async function requirePeer(c, next) {
    const { caller } = await authenticateA2aCaller(
      deps,
      c.req.header("authorization"),
      readSourceAddress(c),
    );
    c.set("caller", caller);
    await next();
  };
}
