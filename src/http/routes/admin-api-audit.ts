// The admin API's audit log: a page of events after a sequence number, and the verification of
// the hash chain (with the tail committed but not chained yet).
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { auditQuerySchema } from "../../services/read-audit.ts";
import { admin, iso, json, problems } from "./admin-api-shared.ts";

export const auditEventSchema = z.object({
  seq: z.number().int().nullable().describe("null while the event is not chained yet"),
  createdAt: iso,
  actor: z.string(),
  kind: z.string(),
  subject: z.string().nullable(),
  data: z.unknown(),
  hash: z.string().nullable().describe("null while the event is not chained yet"),
});

const unchainedTailSchema = z
  .object({ count: z.number().int(), oldestAgeMs: z.number().nullable() })
  .describe("events committed but not chained yet");
export const auditVerificationSchema = z.union([
  z.object({
    ok: z.literal(true),
    count: z.number().int(),
    lastHash: z.string(),
    unchained: unchainedTailSchema,
  }),
  z.object({
    ok: z.literal(false),
    seq: z.number().int(),
    reason: z.string(),
    problem: z.string(),
    unchained: unchainedTailSchema,
  }),
]);

export const auditRoutes = {
  listAudit: createRoute({
    method: "get",
    path: "/audit",
    summary: "A page of audit events after a sequence number",
    security: admin,
    request: { query: auditQuerySchema },
    responses: {
      200: json(
        z.object({ events: z.array(auditEventSchema), next: z.number().int().nullable() }),
        "the events",
      ),
      ...problems,
    },
  }),
  verifyAudit: createRoute({
    method: "get",
    path: "/audit/verify",
    summary: "Verify the audit chain",
    security: admin,
    responses: {
      200: json(auditVerificationSchema, "the chain is intact"),
      409: json(auditVerificationSchema, "the chain is broken at `seq`"),
      401: problems[401],
    },
  }),
} as const satisfies Record<string, RouteConfig>;
