// The Hono application: request ids, access log and metrics, body limits (and closing the
// connection after an answer sent before the body was read), the one error mapper,
// and the routes. It receives everything it needs; it reads no environment and opens nothing.
import { Hono } from "hono";
import { requestId } from "hono/request-id";
import type { Logger } from "../log.ts";
import type { Metrics } from "../metrics.ts";
import type { Readiness } from "../services/check-readiness.ts";
import {
  closeUnreadBodies,
  defaultMaxBodyBytes,
  githubMaxBodyBytes,
  limitBody,
} from "./middleware/limit-body.ts";
import { createInflightTracker, observe } from "./middleware/observe.ts";
import { traceRequests } from "./middleware/trace-requests.ts";
import { createOutageLog } from "./outage-log.ts";
import { createErrorHandler, problemResponse } from "./problem.ts";
import { type AdminRouteDeps, adminRoutes } from "./routes/admin.ts";
import { healthRoutes } from "./routes/health.ts";
import { type WebhookRouteDeps, webhookRoutes } from "./routes/webhooks.ts";

export type AppDeps = {
  logger: Logger;
  metrics: Metrics;
  checkReadiness: () => Promise<Readiness>;
  /** Default body limit for routes that do not set their own. */
  maxBodyBytes?: number;
  admin?: AdminRouteDeps;
  webhooks?: WebhookRouteDeps;
  /** Extra route groups mounted at their prefix (the A2A surface). */
  mount?: readonly { prefix: string; routes: Hono }[];
};

export type App = {
  hono: Hono;
  inflight: ReturnType<typeof createInflightTracker>;
};

export function createApp(deps: AppDeps): App {
  const inflight = createInflightTracker();
  const hono = new Hono();
  const defaultLimit = limitBody(deps.maxBodyBytes ?? defaultMaxBodyBytes);
  const githubLimit = limitBody(githubMaxBodyBytes);
  hono.use(requestId());
  hono.use(traceRequests());
  const outage = createOutageLog(deps.logger);
  hono.use(observe({ logger: deps.logger, metrics: deps.metrics, inflight, outage }));
  hono.use(closeUnreadBodies());
  hono.use((c, next) =>
    c.req.path.startsWith("/webhooks/github/") ? githubLimit(c, next) : defaultLimit(c, next),
  );
  hono.route("/", healthRoutes({ metrics: deps.metrics, checkReadiness: deps.checkReadiness }));
  if (deps.admin) hono.route("/admin/v1", adminRoutes(deps.admin));
  if (deps.webhooks) hono.route("/webhooks", webhookRoutes(deps.webhooks));
  for (const m of deps.mount ?? []) hono.route(m.prefix, m.routes);
  hono.notFound((c) =>
    problemResponse(c, {
      status: 404,
      code: "not-found",
      title: "Not found",
      detail: "no such route",
    }),
  );
  hono.onError(createErrorHandler(deps.logger, outage));
  return { hono, inflight };
}
