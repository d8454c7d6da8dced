// The admin API (/admin/v1). Every route needs the admin token; none accepts a browser Origin
// (except the console's own page with the admin token in a header, src/http/middleware/api-guards.ts)
// or a credential in the query string. Handlers only translate HTTP to service calls and back.
// Caller writes pass on the operator token header; the services decide whether the write widens and
// so needs it (src/services/widening.ts). No route creates an operator token.
//
// Every route is declared in src/http/routes/admin-api.ts with its request and response schemas and
// mounted here through `serve`, which registers it in the OpenAPI document as it mounts it: a route
// cannot be served without being documented. The services validate their inputs with the same
// schemas (and phrase the errors), so the handlers read raw bodies and queries.
import { OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { Context, Handler } from "hono";
import type { RateLimiter } from "../../auth/rate-limit.ts";
import { addCaller } from "../../services/add-caller.ts";
import { type OperatorProof, verifyAdminToken } from "../../services/admin-credentials.ts";
import { applyCallers } from "../../services/apply-callers.ts";
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
import { previewCeiling } from "../../services/preview-ceiling.ts";
import { pruneTables } from "../../services/prune-tables.ts";
import { listAuditCheckpoints, listAuditEvents, verifyAudit } from "../../services/read-audit.ts";
import { readOverview } from "../../services/read-overview.ts";
import { restoreCaller } from "../../services/restore-caller.ts";
import { retryRun } from "../../services/retry-run.ts";
import { revokeCaller } from "../../services/revoke-caller.ts";
import { rotateAdminToken } from "../../services/rotate-admin-token.ts";
import { rotateCredential } from "../../services/rotate-credential.ts";
import type { PeergateRunEngine } from "../../services/runs/engine.ts";
import { getPushHosts, setPushHosts } from "../../services/set-push-hosts.ts";
import { updateCaller } from "../../services/update-caller.ts";
import { readJsonBody } from "../json.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import { readSourceAddress } from "../request-info.ts";
import { throttleAuth } from "../throttle.ts";
import { type AdminOperation, type AdminResponse, adminApi } from "./admin-api.ts";
import { type AdminEventsDeps, adminEventsRoute, eventsRouteConfig } from "./admin-events.ts";

export type AdminRouteDeps = {
  services: ServiceContext;
  limiter: RateLimiter;
  /** The run engine; without it the /runs routes are absent. */
  runs?: PeergateRunEngine;
  /** The server's own doctor checks (GET /doctor); without it the route is absent. */
  doctor?: (query: unknown) => Promise<AdminResponse<"getDoctor">>;
  /** How often the event stream looks for changed runs (tests shorten it). */
  events?: AdminEventsDeps["options"];
};

/** The OpenAPI document's fixed parts; `paths` come from the routes as they are mounted. */
const documentInfo = {
  openapi: "3.1.0",
  info: {
    title: "peergate admin API",
    version: "1",
    description:
      "Callers, their ceilings, runs and the audit trail. Every route but this document needs `Authorization: Bearer <admin token>`; widening writes and approvals also need `X-Peergate-Operator-Token`.",
  },
  servers: [{ url: "/admin/v1" }],
};

/** `/callers/{name}` → `/callers/:name`. */
export const honoPath = (openApiPath: string) => openApiPath.replace(/\{(\w+)\}/g, ":$1");

export function adminRoutes(deps: AdminRouteDeps): OpenAPIHono {
  const services = deps.services;
  const actor = "admin" as const;
  const app = new OpenAPIHono();
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "the admin token (`<data dir>/admin-token`)",
  });
  // Public, and before the guards: it describes the API and holds no secret.
  app.get("/openapi.json", (c) => c.json(app.getOpenAPI31Document(documentInfo)));

  app.use(refuseBrowserOrigins({ allowOwnOriginWithAuthorization: true }));
  app.use(refuseQueryCredentials());
  app.use(async function requireAdmin(c, next) {
    const source = readSourceAddress(c);
    await throttleAuth(deps.limiter, [`source:${source}`], () =>
      verifyAdminToken(services, c.req.header("authorization"), { surface: "admin", source }),
    );
    await next();
  });

  const serveRoute = (route: RouteConfig, handler: Handler) => {
    app.openAPIRegistry.registerPath(route);
    app.on(route.method.toUpperCase(), honoPath(route.path), handler);
  };
  const serve = (name: AdminOperation, handler: Handler) => serveRoute(adminApi[name], handler);

  /** A caller write: throttled like a login, since a wrong operator token is a failed one. */
  const write = <T>(c: Context, work: (operator: OperatorProof) => Promise<T>) => {
    const source = readSourceAddress(c);
    return throttleAuth(deps.limiter, [`source:${source}`], () =>
      work({
        token: c.req.header("x-peergate-operator-token"),
        failure: { surface: "operator", source },
      }),
    );
  };

  serve("createCaller", async (c) => {
    const input = await readJsonBody(c);
    return c.json(
      await write(c, (operator) => addCaller({ services, input, actor, operator })),
      201,
    );
  });
  serve("listCallers", async (c) => c.json({ callers: await listCallers({ services }) }));
  serve("getCaller", async (c) =>
    c.json({ caller: await getCaller({ services, name: c.req.param("name") ?? "" }) }),
  );
  serve("updateCaller", async (c) => {
    const input = await readJsonBody(c);
    const name = c.req.param("name") ?? "";
    return c.json(
      await write(c, (operator) => updateCaller({ services, name, input, actor, operator })),
    );
  });
  serve("revokeCaller", async (c) => {
    const body = (await readJsonBody(c, { optional: true })) as { reason?: unknown };
    const reason = typeof body.reason === "string" ? body.reason : undefined;
    return c.json(await revokeCaller({ services, name: c.req.param("name") ?? "", reason, actor }));
  });
  serve("restoreCaller", async (c) => {
    const input = await readJsonBody(c);
    const name = c.req.param("name") ?? "";
    return c.json(
      await write(c, (operator) => restoreCaller({ services, name, input, actor, operator })),
    );
  });
  serve("rotateCredential", async (c) => {
    const input = await readJsonBody(c, { optional: true });
    const name = c.req.param("name") ?? "";
    return c.json(
      await write(c, (operator) => rotateCredential({ services, name, input, actor, operator })),
    );
  });
  serve("rotateAdminToken", async (c) => {
    const input = await readJsonBody(c, { optional: true });
    return c.json(
      await write(c, (operator) => rotateAdminToken({ services, input, actor, operator })),
    );
  });
  serve("getCeiling", async (c) =>
    c.json(
      await explainCallerCeiling({
        services,
        name: c.req.param("name") ?? "",
        command: c.req.query("command"),
      }),
    ),
  );
  serve("previewCeiling", async (c) =>
    c.json(previewCeiling({ services, input: await readJsonBody(c) })),
  );
  serve("getPushHosts", async (c) =>
    c.json(await getPushHosts({ services, name: c.req.param("name") ?? "" })),
  );
  serve("setPushHosts", async (c) => {
    const source = readSourceAddress(c);
    const result = await throttleAuth(deps.limiter, [`source:${source}`], async () =>
      setPushHosts({
        services,
        name: c.req.param("name") ?? "",
        input: await readJsonBody(c),
        actor,
        operatorToken: c.req.header("x-peergate-operator-token"),
        failure: { surface: "operator", source },
      }),
    );
    return c.json(result);
  });
  serve("applyCallers", async (c) => {
    const input = await readJsonBody(c);
    return c.json(await write(c, (operator) => applyCallers({ services, input, actor, operator })));
  });
  serve("listTools", (c) => c.json(listTools({ services })));
  serve("listAudit", async (c) =>
    c.json(await listAuditEvents({ services, query: c.req.query() })),
  );
  const engine = deps.runs;
  if (engine) {
    serve("listRuns", async (c) =>
      c.json({ runs: await listRunsForAdmin({ services, engine, query: c.req.query() }) }),
    );
    serve("getRun", async (c) =>
      c.json({ run: await getRunForAdmin({ engine, runId: c.req.param("id") ?? "" }) }),
    );
    serve("approveRun", async (c) => {
      const source = readSourceAddress(c);
      const result = await throttleAuth(deps.limiter, [`source:${source}`], async () =>
        approveParkedRun({
          services,
          engine,
          runId: c.req.param("id") ?? "",
          input: await readJsonBody(c),
          operatorToken: c.req.header("x-peergate-operator-token"),
          failure: { surface: "operator", source },
        }),
      );
      return c.json(result, 202);
    });
    serve("rejectRun", async (c) =>
      c.json(
        await rejectParkedRun({
          engine,
          runId: c.req.param("id") ?? "",
          input: await readJsonBody(c, { optional: true }),
        }),
        202,
      ),
    );
    serve("cancelRun", async (c) =>
      c.json(await cancelRunForAdmin({ engine, runId: c.req.param("id") ?? "" })),
    );
    serve("retryRun", async (c) =>
      c.json(await retryRun({ services, engine, runId: c.req.param("id") ?? "" }), 202),
    );
    serveRoute(eventsRouteConfig, adminEventsRoute({ engine, options: deps.events }));
  }
  serve("getOverview", async (c) => c.json(await readOverview({ services, query: c.req.query() })));
  serve("listAuditCheckpoints", async (c) => c.json(await listAuditCheckpoints({ services })));
  serve("prune", async (c) => {
    const input = await readJsonBody(c, { optional: true });
    return c.json(await write(c, (operator) => pruneTables({ services, input, actor, operator })));
  });
  const doctor = deps.doctor;
  if (doctor) serve("getDoctor", async (c) => c.json(await doctor(c.req.query())));
  serve("verifyAudit", async (c) => {
    const result = await verifyAudit({ services });
    return c.json(result, result.ok ? 200 : 409);
  });
  return app;
}
