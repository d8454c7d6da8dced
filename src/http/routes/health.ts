// Liveness, readiness and metrics (which may need PEERGATE_METRICS_TOKEN, src/metrics.ts). None
// reveals a secret:
// readiness names which check failed so an operator can act, nothing more.
import { Hono } from "hono";
import type { Metrics } from "../../metrics.ts";
import type { Readiness } from "../../services/check-readiness.ts";

export function healthRoutes(deps: {
  metrics: Metrics;
  checkReadiness: () => Promise<Readiness>;
}): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const readiness = await deps.checkReadiness();
    return c.json(
      { status: readiness.ready ? "ready" : "not-ready", checks: readiness.checks },
      readiness.ready ? 200 : 503,
    );
  });
  app.get("/metrics", async (c) => {
    const admitted = deps.metrics.admit(c.req.header("authorization"));
    if (!admitted.ok)
      return c.json({ status: "refused", detail: admitted.reason }, admitted.status);
    const { contentType, body } = await deps.metrics.render();
    return c.body(body, 200, { "Content-Type": contentType });
  });
  return app;
}
