// The admin API's contract: every /admin/v1 route with its zod request and response schemas. The
// server mounts its handlers from this table (src/http/routes/admin.ts), the OpenAPI document at
// GET /admin/v1/openapi.json is generated from it, and the CLI's request and response types are
// inferred from it (src/cli/admin-client.ts). Request schemas are the services' own, so a field a
// service accepts is documented and typed without being copied here.
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { approvalPolicies, callerKinds, tiers } from "../../domain/caller.ts";
import { runOrigins, runStatuses, toolCallStatuses } from "../../domain/run.ts";
import { ceilingReasons } from "../../policy/reasons.ts";
import { disclosureLevels, riskLevels, toolCategories } from "../../policy/tools.ts";
import { createCallerSchema, updateCallerSchema } from "../../services/caller-input.ts";
import {
  approveRunSchema,
  listRunsQuerySchema,
  rejectRunSchema,
} from "../../services/decide-run.ts";
import { previewCeilingSchema } from "../../services/preview-ceiling.ts";
import { auditQuerySchema } from "../../services/read-audit.ts";
import { restoreCallerSchema } from "../../services/restore-caller.ts";
import { rotateCredentialSchema } from "../../services/rotate-credential.ts";
import { pushHostsSchema } from "../../services/set-push-hosts.ts";

// ------------------------------------------------------------------ response shapes

const iso = z.string().describe("an ISO 8601 time");

export const credentialViewSchema = z.object({
  id: z.string(),
  kind: z.string(),
  prefix: z.string(),
  createdAt: iso,
  expiresAt: iso.nullable(),
  revokedAt: iso.nullable(),
  active: z.boolean(),
});

export const callerViewSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: z.enum(callerKinds),
    tier: z.enum(tiers),
    revoked: z.boolean(),
    allow: z.array(z.string()),
    approvalPolicy: z.enum(approvalPolicies),
    budgets: z.record(z.string(), z.unknown()),
    promptTemplate: z.string().nullable(),
    eventFilter: z.array(z.string()).nullable(),
    jwt: z.record(z.string(), z.unknown()).nullable(),
    version: z.number().int(),
    createdAt: iso,
    updatedAt: iso,
    revokedAt: iso.nullable(),
    credentials: z.array(credentialViewSchema),
  })
  .describe("a caller, without secrets (fields added by later versions may appear)");

export const issuedCredentialSchema = z
  .object({
    id: z.string(),
    kind: z.string(),
    prefix: z.string(),
    secret: z.string().describe("shown once; peergate keeps only its hash"),
    usage: z.string().describe("how to use it, ready to paste"),
    url: z.string().optional().describe("IFTTT: the full URL to paste into the applet"),
  })
  .describe("a new credential");

const ceilingDecisionSchema = z.object({
  tool: z.string(),
  admitted: z.boolean(),
  reason: z.enum(ceilingReasons),
  sentence: z.string(),
});

export const ceilingReportSchema = z.object({
  caller: z.object({
    name: z.string().optional(),
    tier: z.string(),
    allow: z.array(z.string()).readonly(),
  }),
  inventoryVersion: z.string(),
  agentVersion: z.string(),
  admitted: z.array(z.string()),
  decisions: z.array(ceilingDecisionSchema).readonly(),
  unknownAllowEntries: z.array(z.object({ entry: z.string(), note: z.string() })),
  runNames: z.array(
    z.object({
      name: z.string(),
      tool: z.string(),
      kind: z.enum(["tool", "alias", "execute-half"]),
    }),
  ),
});

const toolViewSchema = z.object({
  name: z.string(),
  category: z.enum(toolCategories),
  risk: z.enum(riskLevels),
  disclosure: z.enum(disclosureLevels),
  egress: z.boolean(),
  aliases: z.array(z.string()).readonly(),
  executeHalf: z.string().nullable(),
  needsPerson: z.boolean(),
  persistsOperatorState: z.boolean(),
  description: z.string(),
});

const pendingApprovalSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  argsDigest: z.string(),
  requestedAt: iso,
  calledTool: z.string().optional(),
  risk: z.string().optional(),
  summary: z.string().optional(),
});

export const runSummarySchema = z.object({
  id: z.string(),
  callerId: z.string(),
  callerName: z.string(),
  origin: z.enum(runOrigins),
  status: z.enum(runStatuses),
  approvalPolicy: z.enum(approvalPolicies),
  a2aTaskId: z.string().nullable(),
  modelId: z.string().nullable(),
  segments: z.number().int(),
  budgetLimits: z.object({
    tokens: z.number().optional(),
    costUsd: z.number().optional(),
    durationMs: z.number().optional(),
    steps: z.number().optional(),
    dailyReserve: z
      .object({
        day: z.string(),
        tokens: z.number().optional(),
        costUsd: z.number().optional(),
        heldTokens: z.number().optional(),
        heldCostUsd: z.number().optional(),
      })
      .optional(),
  }),
  budgetUsed: z.object({
    tokens: z.number(),
    costUsd: z.number(),
    durationMs: z.number(),
    steps: z.number(),
  }),
  pendingApproval: pendingApprovalSchema.nullable(),
  parkedUntil: iso.nullable(),
  error: z
    .object({ code: z.string(), message: z.string(), budget: z.string().optional() })
    .nullable(),
  createdAt: iso,
  startedAt: iso.nullable(),
  finishedAt: iso.nullable(),
  updatedAt: iso,
});

export const runDetailSchema = runSummarySchema.extend({
  toolSet: z.array(z.string()),
  pending: pendingApprovalSchema
    .extend({ args: z.unknown(), previewDiff: z.string().optional() })
    .nullable()
    .describe("the full pending call: what approving runs, with its arguments and preview"),
  text: z.string().nullable(),
  messages: z.array(z.unknown()).describe("the conversation (AI SDK model messages)"),
  toolCalls: z.array(
    z.object({
      callId: z.string(),
      tool: z.string(),
      argsDigest: z.string(),
      status: z.enum(toolCallStatuses),
      code: z.string().nullable(),
      segment: z.number().int(),
      outputTruncated: z.boolean(),
      createdAt: iso,
      startedAt: iso.nullable(),
      finishedAt: iso.nullable(),
    }),
  ),
});

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

export const problemSchema = z
  .object({
    type: z.string().optional(),
    title: z.string().optional(),
    status: z.number().int().optional(),
    code: z.string().optional(),
    detail: z.string().optional(),
    problems: z
      .array(
        z.object({
          field: z.string(),
          message: z.string(),
          expected: z.string().optional(),
          value: z.unknown().optional(),
        }),
      )
      .optional(),
  })
  .describe("an RFC 9457 problem; `problems` names each bad field");

// ------------------------------------------------------------------ routes

const nameParams = z.object({
  name: z.string().describe("the caller's name"),
});
const runParams = z.object({ id: z.string().describe("the run's id") });
const operatorHeader = z.object({
  "x-peergate-operator-token": z
    .string()
    .optional()
    .describe("the operator token; needed when the change widens (docs/authority.md)"),
});
const requiredOperatorHeader = z.object({
  "x-peergate-operator-token": z.string().describe("the operator token"),
});
const revokeBodySchema = z.object({ reason: z.string().optional() });

const json = <S extends z.ZodType>(schema: S, description: string) => ({
  content: { "application/json": { schema } },
  description,
});
const body = <S extends z.ZodType>(schema: S, required = true) => ({
  content: { "application/json": { schema } },
  required,
});
const problems = {
  400: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "invalid request",
  },
  401: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "no valid admin token",
  },
  403: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "refused (a browser Origin, or a widening without the operator token)",
  },
  404: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "no such caller or run",
  },
  409: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "conflict (a stale version, or a run no longer parked)",
  },
} as const;

const admin = [{ adminToken: [] }];

export const adminApi = {
  createCaller: createRoute({
    method: "post",
    path: "/callers",
    summary: "Add a caller; its credential is in the answer, once",
    security: admin,
    request: { body: body(createCallerSchema), headers: operatorHeader },
    responses: {
      201: json(
        z.object({
          caller: callerViewSchema,
          credential: issuedCredentialSchema,
          unknownAllowEntries: z.array(z.string()),
        }),
        "the caller and its credential",
      ),
      ...problems,
    },
  }),
  listCallers: createRoute({
    method: "get",
    path: "/callers",
    summary: "Every caller",
    security: admin,
    responses: {
      200: json(z.object({ callers: z.array(callerViewSchema) }), "the callers"),
      ...problems,
    },
  }),
  getCaller: createRoute({
    method: "get",
    path: "/callers/{name}",
    summary: "One caller",
    security: admin,
    request: { params: nameParams },
    responses: { 200: json(z.object({ caller: callerViewSchema }), "the caller"), ...problems },
  }),
  updateCaller: createRoute({
    method: "patch",
    path: "/callers/{name}",
    summary: "Change a caller (widening needs the operator token)",
    security: admin,
    request: { params: nameParams, body: body(updateCallerSchema), headers: operatorHeader },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          changed: z.array(z.string()),
          unknownAllowEntries: z.array(z.string()),
        }),
        "the changed caller",
      ),
      ...problems,
    },
  }),
  revokeCaller: createRoute({
    method: "post",
    path: "/callers/{name}/revoke",
    summary: "Revoke a caller: its credentials stop working and its parked runs are rejected",
    security: admin,
    request: { params: nameParams, body: body(revokeBodySchema, false) },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          credentialsRevoked: z.number().int(),
          parkedRunsRejected: z.number().int(),
        }),
        "the revoked caller",
      ),
      ...problems,
    },
  }),
  restoreCaller: createRoute({
    method: "post",
    path: "/callers/{name}/restore",
    summary: "Restore a revoked caller at a tier, with a new credential (needs the operator token)",
    security: admin,
    request: {
      params: nameParams,
      body: body(restoreCallerSchema),
      headers: requiredOperatorHeader,
    },
    responses: {
      200: json(
        z.object({ caller: callerViewSchema, credential: issuedCredentialSchema }),
        "the restored caller and its new credential",
      ),
      ...problems,
    },
  }),
  rotateCredential: createRoute({
    method: "post",
    path: "/callers/{name}/rotate",
    summary: "Issue a new credential; the old ones expire after graceSeconds",
    security: admin,
    request: {
      params: nameParams,
      body: body(rotateCredentialSchema, false),
      headers: operatorHeader,
    },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          credential: issuedCredentialSchema,
          oldCredentialsExpireAt: iso,
        }),
        "the new credential",
      ),
      ...problems,
    },
  }),
  getCeiling: createRoute({
    method: "get",
    path: "/callers/{name}/ceiling",
    summary: "A caller's ceiling, tool by tool, with the reason for each",
    security: admin,
    request: { params: nameParams },
    responses: {
      200: json(
        ceilingReportSchema.extend({ revoked: z.boolean(), version: z.number().int() }),
        "the ceiling",
      ),
      ...problems,
    },
  }),
  previewCeiling: createRoute({
    method: "post",
    path: "/ceiling/preview",
    summary: "What-if: the ceiling a caller with this tier and allow list would have",
    security: admin,
    request: { body: body(previewCeilingSchema) },
    responses: { 200: json(ceilingReportSchema, "the hypothetical ceiling"), ...problems },
  }),
  getPushHosts: createRoute({
    method: "get",
    path: "/callers/{name}/push-hosts",
    summary: "Where a caller may have A2A push notifications sent",
    security: admin,
    request: { params: nameParams },
    responses: {
      200: json(z.object({ hosts: z.array(z.string()) }), "the push grants"),
      ...problems,
    },
  }),
  setPushHosts: createRoute({
    method: "put",
    path: "/callers/{name}/push-hosts",
    summary: "Replace a caller's push grants (adding one widens: the operator token too)",
    security: admin,
    request: { params: nameParams, body: body(pushHostsSchema) },
    responses: {
      200: json(z.object({ hosts: z.array(z.string()) }), "the push grants now"),
      ...problems,
    },
  }),
  listTools: createRoute({
    method: "get",
    path: "/tools",
    summary: "The tool inventory ceilings are computed from",
    security: admin,
    responses: {
      200: json(
        z.object({ inventoryVersion: z.string(), tools: z.array(toolViewSchema) }),
        "the inventory",
      ),
      ...problems,
    },
  }),
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
  listRuns: createRoute({
    method: "get",
    path: "/runs",
    summary: "Runs, newest first",
    security: admin,
    request: { query: listRunsQuerySchema },
    responses: {
      200: json(z.object({ runs: z.array(runSummarySchema) }), "the runs"),
      ...problems,
    },
  }),
  getRun: createRoute({
    method: "get",
    path: "/runs/{id}",
    summary: "One run in full",
    security: admin,
    request: { params: runParams },
    responses: { 200: json(z.object({ run: runDetailSchema }), "the run"), ...problems },
  }),
  approveRun: createRoute({
    method: "post",
    path: "/runs/{id}/approve",
    summary:
      "Approve a parked run's pending call (needs the operator token); the first answer wins",
    security: admin,
    request: { params: runParams, body: body(approveRunSchema), headers: requiredOperatorHeader },
    responses: {
      202: json(z.object({ runId: z.string(), status: z.literal("resumed") }), "the run resumes"),
      ...problems,
    },
  }),
  rejectRun: createRoute({
    method: "post",
    path: "/runs/{id}/reject",
    summary: "Reject a parked run's pending call, with a reason the run reads",
    security: admin,
    request: { params: runParams, body: body(rejectRunSchema, false) },
    responses: {
      202: json(z.object({ runId: z.string(), status: z.literal("resumed") }), "the run resumes"),
      ...problems,
    },
  }),
  cancelRun: createRoute({
    method: "post",
    path: "/runs/{id}/cancel",
    summary: "Stop a run",
    security: admin,
    request: { params: runParams },
    responses: {
      200: json(z.object({ runId: z.string(), stopped: z.boolean() }), "whether it was stopped"),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;

/** Routes served only when the server has a run engine. */
export const runRouteNames = [
  "listRuns",
  "getRun",
  "approveRun",
  "rejectRun",
  "cancelRun",
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
