// Webhook surfaces. GitHub signs the raw body; IFTTT can only carry a secret in the URL path; a
// generic sender uses a bearer token. Each is authenticated before its body means anything, every
// failure is the same 401, and an accepted fire is answered 202 with the run id at once (GitHub
// wants an answer within 10 s; the run goes on in the background).

import type { Context } from "hono";
import { Hono } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import type { RunEngine } from "../../runs/types.ts";
import { acceptWebhook, type WebhookAnswer } from "../../services/accept-webhook.ts";
import {
  type AuthDeps,
  type AuthenticatedCaller,
  authenticateGithub,
  authenticateIfttt,
  authenticateWebhookToken,
} from "../../services/authenticate-caller.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth } from "../throttle.ts";

export type WebhookRouteDeps = { auth: AuthDeps; limiter: RateLimiter; runs: RunEngine };

function answer(c: Context, result: WebhookAnswer): Response {
  switch (result.outcome) {
    case "started":
      return c.json({ status: "accepted", runId: result.runId }, 202);
    case "duplicate":
      return c.json({ status: "duplicate", runId: result.runId, reason: result.reason }, 200);
    case "ignored":
      return c.json({ status: "ignored", reason: result.reason }, 200);
    case "pong":
      return c.json({ status: "pong" }, 200);
  }
}

export function webhookRoutes(deps: WebhookRouteDeps): Hono {
  const app = new Hono();
  app.use(refuseBrowserOrigins());
  app.use(refuseQueryCredentials());
  const ctx = deps.auth.ctx;

  const fire = async (
    c: Context,
    name: string,
    authenticate: (source: string, rawBody: Uint8Array) => Promise<AuthenticatedCaller>,
    extra: { deliveryId?: string | undefined; event?: string | undefined } = {},
  ) => {
    const source = readSourceAddress(c);
    const rawBody = new Uint8Array(await c.req.arrayBuffer());
    const { caller } = await throttleAuth(
      deps.limiter,
      [`source:${source}`, `caller:${name.slice(0, 64)}`],
      () => authenticate(source, rawBody),
    );
    return answer(
      c,
      await acceptWebhook({ ctx, runs: deps.runs, fire: { caller, rawBody, ...extra } }),
    );
  };

  app.post("/github/:name", (c) => {
    const name = c.req.param("name");
    return fire(
      c,
      name,
      (source, rawBody) =>
        authenticateGithub(deps.auth, name, rawBody, c.req.header("x-hub-signature-256"), {
          surface: "github",
          claimedName: name,
          source,
        }),
      { deliveryId: c.req.header("x-github-delivery"), event: c.req.header("x-github-event") },
    );
  });

  app.post("/ifttt/:name/:secret", (c) => {
    const name = c.req.param("name");
    // The secret as sent, not percent-decoded: a secret never needs encoding, so an encoded form
    // is not the secret (and must not become it by decoding).
    const rawSecret = new URL(c.req.url).pathname.split("/").at(-1) ?? "";
    return fire(c, name, (source) =>
      authenticateIfttt(deps.auth, name, rawSecret, {
        surface: "ifttt",
        claimedName: name,
        source,
      }),
    );
  });

  app.post("/:name", (c) => {
    const name = c.req.param("name");
    return fire(c, name, (source) =>
      authenticateWebhookToken(deps.auth, name, c.req.header("authorization"), {
        surface: "webhook",
        claimedName: name,
        source,
      }),
    );
  });
  return app;
}
