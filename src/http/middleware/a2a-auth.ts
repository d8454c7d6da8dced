// The guard in front of POST /a2a: a peer's bearer token or JWT (src/services/authenticate-caller.ts),
// throttled per source network like every other login (src/http/throttle.ts). A request it
// refuses never reaches the JSON-RPC handler: the app's error mapper answers 401 with
// WWW-Authenticate (or 429 past the failure limit), never a JSON-RPC 200. The caller it lets in
// is on the context as `caller`.
import type { MiddlewareHandler } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import type { Caller } from "../../domain/caller.ts";
import { type AuthDeps, authenticatePeer } from "../../services/authenticate-caller.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth } from "../throttle.ts";

/** What the A2A routes find on the context once the guard let a request in. */
export type A2aEnv = { Variables: { caller: Caller } };

/**
 * @example
 * app.post("/a2a", requireA2aCaller({ auth, limiter }), (c) => handle(c.get("caller")));
 */
export function requireA2aCaller(deps: {
  readonly auth: AuthDeps;
  readonly limiter: RateLimiter;
}): MiddlewareHandler<A2aEnv> {
  return async function requirePeer(c, next) {
    const source = readSourceAddress(c);
    const { caller } = await throttleAuth(deps.limiter, [`source:${source}`], () =>
      authenticatePeer(deps.auth, c.req.header("authorization"), { surface: "a2a", source }),
    );
    c.set("caller", caller);
    await next();
  };
}
