// The admin API's overview: what the console draws. Read only, over a bounded window (at most 30
// days, at most 96 buckets), with per-caller series capped and approvals and budgets limited
// (src/services/read-overview.ts says which index serves each query).
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { overviewQuerySchema } from "../../services/read-overview.ts";
import { admin, iso, json, problems } from "./admin-api-shared.ts";

const perBucket = z.array(z.number()).describe("one value per bucket, oldest first");
const limitOrNull = z.number().nullable().describe("the caller's limit; null: none set");

export const overviewSchema = z.object({
  now: iso,
  since: iso.describe("the first bucket's start"),
  bucketSeconds: z.number().int(),
  buckets: z.array(iso).describe("each bucket's start"),
  runs: z
    .array(
      z.object({
        callerName: z.string(),
        runs: perBucket,
        tokens: perBucket,
        costUsd: perBucket,
        total: z.object({ runs: z.number(), tokens: z.number(), costUsd: z.number() }),
      }),
    )
    .describe("runs started and their cost per caller (the busiest 8; the rest summed as others)"),
  refusals: z.object({
    tools: perBucket.describe("tool calls refused or declined"),
    webhooks: perBucket.describe("webhook deliveries refused"),
    authFailures: perBucket.describe("failed authentications (from the trail's summaries)"),
  }),
  live: z.array(z.object({ status: z.string(), count: z.number().int() })),
  liveByCaller: z.array(
    z.object({
      callerName: z.string(),
      submitted: z.number().int(),
      working: z.number().int(),
      parked: z.number().int(),
      inputRequired: z.number().int(),
    }),
  ),
  approvals: z.object({
    count: z.number().int(),
    oldest: z
      .array(
        z.object({
          runId: z.string(),
          callerName: z.string(),
          tool: z.string(),
          summary: z.string().nullable(),
          requestedAt: iso,
          ageSeconds: z.number().int(),
          expiresAt: iso.nullable(),
        }),
      )
      .describe("at most 50, oldest first"),
  }),
  budgets: z.object({
    day: z.string().describe("the UTC day daily limits count"),
    callers: z.array(
      z.object({
        callerName: z.string(),
        tokens: z.number(),
        costUsd: z.number(),
        runs: z.number().int(),
        running: z.number().int(),
        limits: z.object({
          tokens: limitOrNull,
          costUsd: limitOrNull,
          runs: limitOrNull,
          concurrentRuns: limitOrNull,
        }),
      }),
    ),
  }),
});

export const overviewRoutes = {
  getOverview: createRoute({
    method: "get",
    path: "/overview",
    summary:
      "Runs and cost per caller over time, refusals and auth failures, live runs, waiting approvals, today's budget use",
    security: admin,
    request: { query: overviewQuerySchema },
    responses: { 200: json(overviewSchema, "the overview"), ...problems },
  }),
} as const satisfies Record<string, RouteConfig>;
