// The admin API's runs: listing them, one in full, and an operator's answer to a parked run
// (approve, reject) or its stop. Served only when the server has a run engine.
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { approvalPolicies } from "../../domain/caller.ts";
import { runOrigins, runStatuses, toolCallStatuses } from "../../domain/run.ts";
import {
  approveRunSchema,
  listRunsQuerySchema,
  rejectRunSchema,
} from "../../services/decide-run.ts";
import {
  admin,
  body,
  iso,
  json,
  problems,
  requiredOperatorHeader,
  runParams,
} from "./admin-api-shared.ts";

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

const toolCallDecisionSchema = z
  .object({
    action: z.enum(["run", "park", "refuse", "decline"]),
    rule: z.string(),
    reason: z.string(),
    risk: z.string().optional(),
    floorReasons: z.array(z.string()).optional(),
    coveredBy: z.string().optional(),
    key: z.string().nullable().optional(),
    urlReason: z.string().optional(),
    classifier: z
      .object({
        model: z.string(),
        verdict: z.string(),
        failure: z.string().optional(),
        reason: z.string(),
        inputTokens: z.number().optional(),
        outputTokens: z.number().optional(),
        costUsd: z.number().optional(),
        latencyMs: z.number(),
      })
      .optional(),
  })
  .describe("how the engine decided the call: rule, reason, floor reasons, coverage, classifier");

export const runDetailSchema = runSummarySchema.extend({
  toolSet: z.array(z.string()),
  pending: pendingApprovalSchema
    .extend({
      args: z.unknown(),
      previewDiff: z.string().optional(),
      reason: z.string().optional().describe("why it asks"),
    })
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
      decision: toolCallDecisionSchema.nullable(),
      createdAt: iso,
      startedAt: iso.nullable(),
      finishedAt: iso.nullable(),
    }),
  ),
});

export const runRoutes = {
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
  retryRun: createRoute({
    method: "post",
    path: "/runs/{id}/retry",
    summary:
      "Start a failed or interrupted webhook run again, with the same prompt (audited as a retry)",
    security: admin,
    request: { params: runParams },
    responses: {
      202: json(
        z.object({ runId: z.string().describe("the new run"), retryOf: z.string() }),
        "the new run started",
      ),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;
