// The admin API's audit log: a page of events after a sequence number, and the verification of
// the hash chain (with the tail committed but not chained yet).
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { retentionFamilies } from "../../domain/retention.ts";
import { pruneInputSchema } from "../../services/prune-tables.ts";
import { auditQuerySchema } from "../../services/read-audit.ts";
import { admin, body, iso, json, operatorHeader, problems } from "./admin-api-shared.ts";

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
    checkpoint: z
      .object({ seq: z.number().int(), hash: z.string(), createdAt: iso })
      .optional()
      .describe("once a prefix was pruned: the latest signed checkpoint the chain starts from"),
  }),
  z.object({
    ok: z.literal(false),
    seq: z.number().int(),
    reason: z.string(),
    problem: z.string(),
    unchained: unchainedTailSchema,
  }),
]);

const pruneReportSchema = z.object({
  applied: z.boolean(),
  families: z.array(
    z.object({
      family: z.enum(retentionFamilies),
      days: z.number().int().nullable().describe("null: never pruned"),
      rows: z.number().int().describe("rows deleted (applied) or that would be (dry run)"),
      cutoff: iso.nullable(),
    }),
  ),
  checkpoint: z.object({ seq: z.number().int(), hash: z.string() }).nullable(),
  durationMs: z.number().int(),
});

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
  listAuditCheckpoints: createRoute({
    method: "get",
    path: "/audit/checkpoints",
    summary: "The signed checkpoints over pruned prefixes of the audit chain",
    security: admin,
    responses: {
      200: json(
        z.object({
          checkpoints: z.array(
            z.object({
              seq: z.number().int(),
              hash: z.string(),
              count: z.number().int(),
              createdAt: iso,
              keyId: z.string(),
              signature: z.string().describe("Ed25519 over signedText, base64url"),
              signedText: z.string(),
            }),
          ),
          publicKey: z.record(z.string(), z.unknown()).describe("the checking key, as a JWK"),
        }),
        "the checkpoints",
      ),
      401: problems[401],
    },
  }),
  prune: createRoute({
    method: "post",
    path: "/prune",
    summary: "Count (or, with apply and the operator token, delete) rows past their retention",
    security: admin,
    request: { body: body(pruneInputSchema, false), headers: operatorHeader },
    responses: {
      200: json(pruneReportSchema, "what was (or would be) pruned, per family"),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;
