// The admin API's contract: every /admin/v1 route with its zod request and response schemas. The
// server mounts its handlers from this table (src/http/routes/admin.ts), the OpenAPI document at
// GET /admin/v1/openapi.json is generated from it, and the CLI's request and response types are
// inferred from it (src/cli/admin-client.ts). Request schemas are the services' own, so a field a
// service accepts is documented and typed without being copied here.
// The routes are declared per resource in admin-api-callers.ts, admin-api-audit.ts and
// admin-api-runs.ts, admin-api-operator.ts and admin-api-overview.ts (shared pieces in admin-api-shared.ts); this table joins them, in the order
// the OpenAPI document lists them.
import type { RouteConfig } from "@hono/zod-openapi";
import type { z } from "zod";
import { auditRoutes } from "./admin-api-audit.ts";
import { callerRoutes } from "./admin-api-callers.ts";
import { doctorRoutes } from "./admin-api-doctor.ts";
import { operatorRoutes } from "./admin-api-operator.ts";
import { overviewRoutes } from "./admin-api-overview.ts";
import { runRoutes } from "./admin-api-runs.ts";

export { auditEventSchema, auditVerificationSchema } from "./admin-api-audit.ts";
export {
  callerViewSchema,
  ceilingReportSchema,
  credentialViewSchema,
  issuedCredentialSchema,
} from "./admin-api-callers.ts";
export { runDetailSchema, runSummarySchema } from "./admin-api-runs.ts";
export { problemSchema } from "./admin-api-shared.ts";

export const adminApi = {
  ...callerRoutes,
  ...auditRoutes,
  ...runRoutes,
  ...operatorRoutes,
  ...doctorRoutes,
  ...overviewRoutes,
} as const satisfies Record<string, RouteConfig>;

/** Routes served only when the server has a run engine. */
export const runRouteNames = [
  "listRuns",
  "getRun",
  "approveRun",
  "rejectRun",
  "cancelRun",
  "retryRun",
] as const;

export type AdminOperation = keyof typeof adminApi;
type JsonBodyOf<R> = R extends {
  request: { body: { content: { "application/json": { schema: infer S } } } };
}
  ? S extends z.ZodType
    ? z.input<S>
    : never
  : never;
type SuccessOf<R> = R extends { responses: infer Rs }
  ? {
      [K in keyof Rs]: K extends 200 | 201 | 202
        ? Rs[K] extends { content: { "application/json": { schema: infer S } } }
          ? S extends z.ZodType
            ? z.output<S>
            : never
          : never
        : never;
    }[keyof Rs]
  : never;

/** What a route accepts as its JSON body (the service schema's input side). */
export type AdminRequestBody<O extends AdminOperation> = JsonBodyOf<(typeof adminApi)[O]>;
/** What a route answers with on success. */
export type AdminResponse<O extends AdminOperation> = SuccessOf<(typeof adminApi)[O]>;
