// Webhook surfaces. GitHub signs the raw body; IFTTT can only carry a secret in the URL path; a
// generic sender uses a bearer token. Each is authenticated before its body means anything, every
// failure is the same 401, and an accepted fire is answered 202 with the run id at once (GitHub
// wants an answer within 10 s; the run goes on in the background).
//
// What can be authenticated without the body is, before a byte of it is read: an IFTTT secret
// or a bearer token that fails is answered at once. A GitHub signature needs the body, so the
// name is looked up first; the body of a name that is no GitHub caller, or from a source over
// its failure limit, is read no further than a small limit (src/http/middleware/limit-body.ts).
// The per-name throttle counts failures only: a request whose credential verifies always passes.

import type { Context } from "hono";
import { Hono } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import type { RunEngine } from "../../runs/types.ts";
import { acceptWebhook, type WebhookAnswer } from "../../services/accept-webhook.ts";
import {
  type AuthDeps,
  type AuthenticatedCaller,
  authenticateIfttt,
  authenticateWebhookToken,
  findGithubSecrets,
  refuse,
  verifyGithubDelivery,
} from "../../services/authenticate-caller.ts";
import { inSpan } from "../../trace.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import {
  githubMaxBodyBytes,
  readBodyUpTo,
  unauthenticatedBodyBytes,
} from "../middleware/limit-body.ts";
import { traceAuthentication } from "../middleware/trace-requests.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth, throttledFor } from "../throttle.ts";

export type WebhookRouteDeps = { auth: AuthDeps; limiter: RateLimiter; runs: RunEngine };

function answer(c: Context, result: WebhookAnswer): Response {
  switch (result.outcome) {
    case "started":
      return c.json(
        {
          status: "accepted",
          runId: result.runId,
          ...(result.retryOf ? { retryOf: result.retryOf } : {}),
        },
        202,
      );
    case "duplicate":
      return c.json({ status: "duplicate", runId: result.runId, reason: result.reason }, 200);
    case "ignored":
      return c.json({ status: "ignored", reason: result.reason }, 200);
    case "refused":
      return c.json({ status: "refused", reason: result.reason }, result.status);
    case "pong":
      return c.json({ status: "pong" }, 200);
  }
}

/** Accepting a fire (claim, prompt, run start) as a span, with how it was answered. */
function traceWebhook(accept: () => Promise<WebhookAnswer>): Promise<WebhookAnswer> {
  return inSpan("peergate.webhook.accept", {}, async (span) => {
    const result = await accept();
    span.setAttribute("peergate.webhook.outcome", result.outcome);
    if (result.outcome === "started" || result.outcome === "duplicate") {
      span.setAttribute("peergate.run.id", result.runId);
    }
    return result;
  });
}

export function webhookRoutes(deps: WebhookRouteDeps): Hono {
  const app = new Hono();
  app.use(refuseBrowserOrigins());
  app.use(refuseQueryCredentials());
  const services = deps.auth.services;
  const keysOf = (source: string, name: string) => [
    `source:${source}`,
    `caller:${name.slice(0, 64)}`,
  ];

  /** IFTTT and generic webhooks: authenticated from the URL and headers, then the body is read. */
  const fire = async (
    c: Context,
    name: string,
    surface: "ifttt" | "webhook",
    authenticate: (source: string) => Promise<AuthenticatedCaller>,
  ) => {
    const source = readSourceAddress(c);
    const { caller } = await traceAuthentication(surface, () =>
      throttleAuth(deps.limiter, keysOf(source, name), () => authenticate(source)),
    );
    const rawBody = new Uint8Array(await c.req.arrayBuffer());
    // A repeat of the same body is a real fire (an applet that fires twice); only a key the
    // sender gives makes a retry of one fire a duplicate.
    const key = c.req.header("idempotency-key");
    const deliveryId =
      key === undefined || key === "" ? undefined : `idempotency:${key.slice(0, 200)}`;
    return answer(
      c,
      await traceWebhook(() =>
        acceptWebhook({ services, runs: deps.runs, fire: { caller, rawBody, deliveryId } }),
      ),
    );
  };

  app.post("/github/:name", async (c) => {
    const name = c.req.param("name");
    const source = readSourceAddress(c);
    const failure = { surface: "github", claimedName: name, source } as const;
    const found = await findGithubSecrets(deps.auth, name);
    // A throttled source's own deliveries still pass if they verify, but it cannot make the
    // server read a large body to find out (a failing name's limit does not apply: that would
    // let anyone hold back a real caller's large deliveries by failing in its name).
    const readable =
      found.known && throttledFor(deps.limiter, [`source:${source}`]) === 0
        ? githubMaxBodyBytes
        : unauthenticatedBodyBytes;
    const rawBody = await readBodyUpTo(c, readable);
    const { caller } = await traceAuthentication("github", () =>
      throttleAuth(deps.limiter, keysOf(source, name), () =>
        rawBody === undefined
          ? refuse(
              services,
              failure,
              found.known ? "body-unread-source-throttled" : "unknown-github-caller",
            )
          : verifyGithubDelivery(
              deps.auth,
              found,
              rawBody,
              c.req.header("x-hub-signature-256"),
              failure,
            ),
      ),
    );
    return answer(
      c,
      await traceWebhook(() =>
        acceptWebhook({
          services,
          runs: deps.runs,
          fire: {
            caller,
            rawBody: rawBody ?? new Uint8Array(0),
            deliveryId: c.req.header("x-github-delivery"),
            event: c.req.header("x-github-event"),
            contentType: c.req.header("content-type"),
          },
        }),
      ),
    );
  });

  app.post("/ifttt/:name/:secret", (c) => {
    const name = c.req.param("name");
    // The secret as sent, not percent-decoded: a secret never needs encoding, so an encoded form
    // is not the secret (and must not become it by decoding).
    const rawSecret = new URL(c.req.url).pathname.split("/").at(-1) ?? "";
    return fire(c, name, "ifttt", (source) =>
      authenticateIfttt(deps.auth, name, rawSecret, {
        surface: "ifttt",
        claimedName: name,
        source,
      }),
    );
  });

  app.post("/:name", (c) => {
    const name = c.req.param("name");
    return fire(c, name, "webhook", (source) =>
      authenticateWebhookToken(deps.auth, name, c.req.header("authorization"), {
        surface: "webhook",
        claimedName: name,
        source,
      }),
    );
  });
  return app;
}
