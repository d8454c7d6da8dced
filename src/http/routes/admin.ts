// The admin API (/admin/v1). Every route needs the admin token; none accepts a browser Origin or a
// credential in the query string. Handlers only translate HTTP to service calls and back.
import { Hono } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import { addCaller } from "../../services/add-caller.ts";
import { verifyAdminToken } from "../../services/admin-credentials.ts";
import type { ServiceContext } from "../../services/context.ts";
import {
  approveParkedRun,
  cancelRunForAdmin,
  getRunForAdmin,
  listRunsForAdmin,
  rejectParkedRun,
} from "../../services/decide-run.ts";
import { explainCallerCeiling, listTools } from "../../services/explain-caller.ts";
import { getCaller, listCallers } from "../../services/find-caller.ts";
import { listAuditEvents, verifyAudit } from "../../services/read-audit.ts";
import { restoreCaller } from "../../services/restore-caller.ts";
import { revokeCaller } from "../../services/revoke-caller.ts";
import { rotateCredential } from "../../services/rotate-credential.ts";
import type { PeergateRunEngine } from "../../services/runs/engine.ts";
import { getPushHosts, setPushHosts } from "../../services/set-push-hosts.ts";
import { updateCaller } from "../../services/update-caller.ts";
import { readJsonBody } from "../json.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth } from "../throttle.ts";

export type AdminRouteDeps = {
  services: ServiceContext;
  limiter: RateLimiter;
  /** The run engine; without it the /runs routes are absent. */
  runs?: PeergateRunEngine;
};

export function adminRoutes(deps: AdminRouteDeps): Hono {
  const ctx = deps.services;
  const actor = "admin" as const;
  const app = new Hono();
  app.use(refuseBrowserOrigins());
  app.use(refuseQueryCredentials());
  app.use(async function requireAdmin(c, next) {
    const source = readSourceAddress(c);
    await throttleAuth(deps.limiter, [`source:${source}`], () =>
      verifyAdminToken(ctx, c.req.header("authorization"), { surface: "admin", source }),
    );
    await next();
  });

  app.post("/callers", async (c) =>
    c.json(await addCaller({ ctx, input: await readJsonBody(c), actor }), 201),
  );
  app.get("/callers", async (c) => c.json({ callers: await listCallers({ ctx }) }));
  app.get("/callers/:name", async (c) =>
    c.json({ caller: await getCaller({ ctx, name: c.req.param("name") }) }),
  );
  app.patch("/callers/:name", async (c) =>
    c.json(
      await updateCaller({ ctx, name: c.req.param("name"), input: await readJsonBody(c), actor }),
    ),
  );
  app.post("/callers/:name/revoke", async (c) => {
    const body = (await readJsonBody(c, { optional: true })) as { reason?: unknown };
    const reason = typeof body.reason === "string" ? body.reason : undefined;
    return c.json(await revokeCaller({ ctx, name: c.req.param("name"), reason, actor }));
  });
  app.post("/callers/:name/restore", async (c) =>
    c.json(
      await restoreCaller({ ctx, name: c.req.param("name"), input: await readJsonBody(c), actor }),
    ),
  );
  app.post("/callers/:name/rotate", async (c) =>
    c.json(
      await rotateCredential({
        ctx,
        name: c.req.param("name"),
        input: await readJsonBody(c, { optional: true }),
        actor,
      }),
    ),
  );
  app.get("/callers/:name/ceiling", async (c) =>
    c.json(await explainCallerCeiling({ ctx, name: c.req.param("name") })),
  );
  app.get("/callers/:name/push-hosts", async (c) =>
    c.json(await getPushHosts({ ctx, name: c.req.param("name") })),
  );
  app.put("/callers/:name/push-hosts", async (c) => {
    const source = readSourceAddress(c);
    const result = await throttleAuth(deps.limiter, [`source:${source}`], async () =>
      setPushHosts({
        ctx,
        name: c.req.param("name"),
        input: await readJsonBody(c),
        actor,
        operatorToken: c.req.header("x-peergate-operator-token"),
        failure: { surface: "operator", source },
      }),
    );
    return c.json(result);
  });
  app.get("/tools", (c) => c.json(listTools({ ctx })));
  app.get("/audit", async (c) => c.json(await listAuditEvents({ ctx, query: c.req.query() })));
  const engine = deps.runs;
  if (engine) {
    app.get("/runs", async (c) =>
      c.json({ runs: await listRunsForAdmin({ ctx, engine, query: c.req.query() }) }),
    );
    app.get("/runs/:id", async (c) =>
      c.json({ run: await getRunForAdmin({ engine, runId: c.req.param("id") }) }),
    );
    app.post("/runs/:id/approve", async (c) => {
      const source = readSourceAddress(c);
      const result = await throttleAuth(deps.limiter, [`source:${source}`], async () =>
        approveParkedRun({
          ctx,
          engine,
          runId: c.req.param("id"),
          input: await readJsonBody(c),
          operatorToken: c.req.header("x-peergate-operator-token"),
          failure: { surface: "operator", source },
        }),
      );
      return c.json(result, 202);
    });
    app.post("/runs/:id/reject", async (c) =>
      c.json(
        await rejectParkedRun({
          engine,
          runId: c.req.param("id"),
          input: await readJsonBody(c, { optional: true }),
        }),
        202,
      ),
    );
    app.post("/runs/:id/cancel", async (c) =>
      c.json(await cancelRunForAdmin({ engine, runId: c.req.param("id") })),
    );
  }
  app.get("/audit/verify", async (c) => {
    const result = await verifyAudit({ ctx });
    return c.json(result, result.ok ? 200 : 409);
  });
  return app;
}
