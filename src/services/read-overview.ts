// The operator's overview, for the console's pictures: over a bounded window, runs and their cost
// per caller in time buckets, refusals and authentication failures in the same buckets, the runs
// live now, the approvals waiting (oldest first) and each caller's use of today's budget against
// its limits. Read only. Every query is bounded by the window or a limit and served by an index:
// runs by runs_created_at_idx (created_at range), live runs and approvals by
// runs_status_parked_until_idx (status first), audit counts by audit_events_kind_idx
// (kind, created_at), today's use by daily_usage's key (caller_id, day).
import { and, asc, eq, gte, inArray, isNull, lt, sql } from "drizzle-orm";
import { z } from "zod";
import { auditEvents, callerSlots, callers, dailyUsage, runs } from "../db/schema.ts";
import type { PendingApproval } from "../domain/run.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";

export const overviewQuerySchema = z.strictObject({
  hours: z.coerce.number().int().min(1).max(720).default(24),
  buckets: z.coerce.number().int().min(2).max(96).default(48),
});

/** Callers drawn one by one in the per-caller series; the rest are summed as "others". */
export const overviewTopCallers = 8;
/** Approvals listed at most; the count is exact. */
export const overviewApprovalLimit = 50;
/** Callers whose budget use is listed at most (by name). */
export const overviewBudgetLimit = 200;

const liveStatuses = ["submitted", "working", "parked", "input-required"] as const;
const refusalKinds = ["tool.refused", "tool.declined", "webhook.refused"] as const;

export type OverviewView = {
  now: string;
  since: string;
  bucketSeconds: number;
  /** Each bucket's start (ISO 8601, UTC). */
  buckets: string[];
  runs: {
    callerName: string;
    runs: number[];
    tokens: number[];
    costUsd: number[];
    total: { runs: number; tokens: number; costUsd: number };
  }[];
  refusals: { tools: number[]; webhooks: number[]; authFailures: number[] };
  live: { status: string; count: number }[];
  liveByCaller: {
    callerName: string;
    submitted: number;
    working: number;
    parked: number;
    inputRequired: number;
  }[];
  approvals: {
    count: number;
    oldest: {
      runId: string;
      callerName: string;
      tool: string;
      summary: string | null;
      requestedAt: string;
      ageSeconds: number;
      expiresAt: string | null;
    }[];
  };
  budgets: {
    day: string;
    callers: {
      callerName: string;
      tokens: number;
      costUsd: number;
      runs: number;
      running: number;
      limits: {
        tokens: number | null;
        costUsd: number | null;
        runs: number | null;
        concurrentRuns: number | null;
      };
    }[];
  };
};

export async function readOverview({
  services,
  query,
}: {
  services: ServiceContext;
  query: unknown;
}): Promise<OverviewView> {
  const q = parseInput(overviewQuerySchema, query);
  const now = services.now();
  const bucketMs = Math.ceil((q.hours * 3_600_000) / q.buckets / 60_000) * 60_000;
  // Buckets are aligned to the bucket size, so a refreshed picture does not shift under the eye.
  const end = Math.floor(now.getTime() / bucketMs) * bucketMs + bucketMs;
  const since = new Date(end - q.buckets * bucketMs);
  const until = new Date(end);
  const bucketSeconds = bucketMs / 1000;
  // The same expression in SELECT and GROUP BY must be the same text, so its two numbers are
  // written in, not bound (they are integers computed here, never the request's text).
  const sinceSeconds = sql.raw(String(Math.trunc(since.getTime() / 1000)));
  const bucketSize = sql.raw(String(Math.trunc(bucketSeconds)));
  const bucketOf = (column: unknown) =>
    sql<number>`floor((extract(epoch from ${column}) - ${sinceSeconds}) / ${bucketSize})::int`;
  const empty = () => Array.from({ length: q.buckets }, () => 0);
  const db = services.db;

  const names = new Map(
    (await db.select({ id: callers.id, name: callers.name }).from(callers)).map((c) => [
      c.id,
      c.name,
    ]),
  );
  const nameOf = (id: string) => names.get(id) ?? id;

  const runBucket = bucketOf(runs.createdAt);
  const runRows = await db
    .select({
      callerId: runs.callerId,
      bucket: runBucket,
      runs: sql<number>`count(*)::int`,
      tokens: sql<string>`coalesce(sum((${runs.budgetUsed}->>'tokens')::numeric), 0)`,
      costUsd: sql<string>`coalesce(sum((${runs.budgetUsed}->>'costUsd')::numeric), 0)`,
    })
    .from(runs)
    .where(and(gte(runs.createdAt, since), lt(runs.createdAt, until)))
    .groupBy(runs.callerId, runBucket);
  const perCaller = new Map<string, OverviewView["runs"][number]>();
  for (const row of runRows) {
    const b = Number(row.bucket);
    if (b < 0 || b >= q.buckets) continue;
    let series = perCaller.get(row.callerId);
    if (!series) {
      series = {
        callerName: nameOf(row.callerId),
        runs: empty(),
        tokens: empty(),
        costUsd: empty(),
        total: { runs: 0, tokens: 0, costUsd: 0 },
      };
      perCaller.set(row.callerId, series);
    }
    const tokens = Number(row.tokens);
    const cost = Number(row.costUsd);
    series.runs[b] = (series.runs[b] ?? 0) + Number(row.runs);
    series.tokens[b] = (series.tokens[b] ?? 0) + tokens;
    series.costUsd[b] = (series.costUsd[b] ?? 0) + cost;
    series.total.runs += Number(row.runs);
    series.total.tokens += tokens;
    series.total.costUsd += cost;
  }
  const ranked = [...perCaller.values()].sort(
    (a, b) => b.total.runs - a.total.runs || a.callerName.localeCompare(b.callerName),
  );
  const runSeries = ranked.slice(0, overviewTopCallers);
  const rest = ranked.slice(overviewTopCallers);
  if (rest.length) {
    const others = {
      callerName: `${rest.length} others`,
      runs: empty(),
      tokens: empty(),
      costUsd: empty(),
      total: { runs: 0, tokens: 0, costUsd: 0 },
    };
    for (const s of rest) {
      for (let i = 0; i < q.buckets; i++) {
        others.runs[i] = (others.runs[i] ?? 0) + (s.runs[i] ?? 0);
        others.tokens[i] = (others.tokens[i] ?? 0) + (s.tokens[i] ?? 0);
        others.costUsd[i] = (others.costUsd[i] ?? 0) + (s.costUsd[i] ?? 0);
      }
      others.total.runs += s.total.runs;
      others.total.tokens += s.total.tokens;
      others.total.costUsd += s.total.costUsd;
    }
    runSeries.push(others);
  }

  const auditBucket = bucketOf(auditEvents.createdAt);
  const auditRows = await db
    .select({
      kind: auditEvents.kind,
      bucket: auditBucket,
      // An auth.failed event summarises a window of failures from one network: its count.
      count: sql<string>`sum(coalesce((${auditEvents.data}->>'count')::int, 1))`,
    })
    .from(auditEvents)
    .where(
      and(
        inArray(auditEvents.kind, ["auth.failed", ...refusalKinds]),
        gte(auditEvents.createdAt, since),
        lt(auditEvents.createdAt, until),
      ),
    )
    .groupBy(auditEvents.kind, auditBucket);
  const refusals = { tools: empty(), webhooks: empty(), authFailures: empty() };
  for (const row of auditRows) {
    const b = Number(row.bucket);
    if (b < 0 || b >= q.buckets) continue;
    const list =
      row.kind === "auth.failed"
        ? refusals.authFailures
        : row.kind === "webhook.refused"
          ? refusals.webhooks
          : refusals.tools;
    list[b] = (list[b] ?? 0) + Number(row.count);
  }

  const liveRows = await db
    .select({ callerId: runs.callerId, status: runs.status, count: sql<number>`count(*)::int` })
    .from(runs)
    .where(inArray(runs.status, [...liveStatuses]))
    .groupBy(runs.callerId, runs.status);
  const live = liveStatuses.map((status) => ({
    status,
    count: liveRows.filter((r) => r.status === status).reduce((n, r) => n + Number(r.count), 0),
  }));
  const byCaller = new Map<string, OverviewView["liveByCaller"][number]>();
  for (const row of liveRows) {
    const entry = byCaller.get(row.callerId) ?? {
      callerName: nameOf(row.callerId),
      submitted: 0,
      working: 0,
      parked: 0,
      inputRequired: 0,
    };
    const key = row.status === "input-required" ? "inputRequired" : row.status;
    if (key in entry) (entry as Record<string, number | string>)[key] = Number(row.count);
    byCaller.set(row.callerId, entry);
  }

  const parked = await db
    .select({
      id: runs.id,
      callerId: runs.callerId,
      pending: runs.pendingApproval,
      parkedUntil: runs.parkedUntil,
    })
    .from(runs)
    .where(eq(runs.status, "parked"))
    .orderBy(asc(runs.parkedUntil))
    .limit(overviewApprovalLimit);
  const parkedCount = live.find((l) => l.status === "parked")?.count ?? 0;
  const oldest = parked
    .map((r) => {
      const p = r.pending as PendingApproval | null;
      const requestedAt = p?.requestedAt ? new Date(p.requestedAt) : now;
      return {
        runId: r.id,
        callerName: nameOf(r.callerId),
        tool: p?.calledTool ?? p?.tool ?? "",
        summary: p?.summary ?? null,
        requestedAt: requestedAt.toISOString(),
        ageSeconds: Math.max(0, Math.round((now.getTime() - requestedAt.getTime()) / 1000)),
        expiresAt: r.parkedUntil ? r.parkedUntil.toISOString() : null,
      };
    })
    .sort((a, b) => b.ageSeconds - a.ageSeconds);

  const day = now.toISOString().slice(0, 10);
  const budgetRows = await db
    .select({
      name: callers.name,
      budgets: callers.budgets,
      tokens: dailyUsage.tokens,
      costUsd: dailyUsage.costUsd,
      runs: dailyUsage.runs,
      running: callerSlots.running,
    })
    .from(callers)
    .leftJoin(dailyUsage, and(eq(dailyUsage.callerId, callers.id), eq(dailyUsage.day, day)))
    .leftJoin(callerSlots, eq(callerSlots.callerId, callers.id))
    .where(isNull(callers.revokedAt))
    .orderBy(asc(callers.name))
    .limit(overviewBudgetLimit);

  return {
    now: now.toISOString(),
    since: since.toISOString(),
    bucketSeconds,
    buckets: Array.from({ length: q.buckets }, (_, i) =>
      new Date(since.getTime() + i * bucketMs).toISOString(),
    ),
    runs: runSeries,
    refusals,
    live,
    liveByCaller: [...byCaller.values()].sort((a, b) => a.callerName.localeCompare(b.callerName)),
    approvals: { count: parkedCount, oldest },
    budgets: {
      day,
      callers: budgetRows.map((r) => ({
        callerName: r.name,
        tokens: Number(r.tokens ?? 0),
        costUsd: Number(r.costUsd ?? 0),
        runs: Number(r.runs ?? 0),
        running: Number(r.running ?? 0),
        limits: {
          tokens: r.budgets?.daily?.tokens ?? null,
          costUsd: r.budgets?.daily?.costUsd ?? null,
          runs: r.budgets?.daily?.runs ?? null,
          concurrentRuns: r.budgets?.concurrentRuns ?? null,
        },
      })),
    },
  };
}
