// Reads of run state, and the rows beside it the run mechanics keep (callers read, daily totals
// added to, instances registered). Nothing here writes `runs` or `tool_calls`: that is
// src/runs/run-state.ts alone.
import { and, eq, inArray, lt, sql } from "drizzle-orm";
import type { DbOrTx, DbTransaction } from "../db/client.ts";
import { prebuilt, tableRowMapper } from "../db/prebuilt.ts";
import {
  type Caller,
  callerSlots,
  callers,
  dailyUsage,
  instances,
  type Run,
  type RunStatus,
  runs,
  toolCalls,
} from "../db/schema.ts";
import { isUuid, waitingStatuses } from "../domain/run.ts";
import type { DailyTotals } from "./budgets.ts";

/** Statuses that hold a concurrency slot. */
export const activeStatuses: readonly RunStatus[] = ["submitted", "working"];

/** A caller's row by id, built once (src/db/prebuilt.ts): every run's start reads it. */
const selectCaller = prebuilt<{ id: string }>((db) =>
  db
    .select()
    .from(callers)
    .where(eq(callers.id, sql.placeholder("id")))
    .limit(1),
);
const callerRow = tableRowMapper(callers);

export async function readCaller(db: DbOrTx, callerId: string): Promise<Caller | undefined> {
  const [row] = await selectCaller(db, { id: callerId });
  return row ? callerRow(row) : undefined;
}

export async function readDailyTotals(
  db: DbOrTx,
  callerId: string,
  day: string,
): Promise<DailyTotals> {
  const [row] = await db
    .select()
    .from(dailyUsage)
    .where(and(eq(dailyUsage.callerId, callerId), eq(dailyUsage.day, day)))
    .limit(1);
  return {
    tokens: Number(row?.tokens ?? 0),
    costUsd: Number(row?.costUsd ?? 0),
    runs: Number(row?.runs ?? 0),
  };
}

/**
 * Adds usage to a caller's totals of `day`; negative `reserved*` give back what admission reserved
 * (src/runs/admission.ts). Reservations never go below zero.
 */
export async function addDailyUsage(
  db: DbOrTx,
  callerId: string,
  day: string,
  delta: {
    tokens?: number;
    costUsd?: number;
    runs?: number;
    reservedTokens?: number;
    reservedCostUsd?: number;
  },
): Promise<void> {
  const tokens = Math.round(delta.tokens ?? 0);
  const costUsd = delta.costUsd ?? 0;
  const runCount = delta.runs ?? 0;
  const reservedTokens = Math.round(delta.reservedTokens ?? 0);
  const reservedCostUsd = delta.reservedCostUsd ?? 0;
  if (
    tokens === 0 &&
    costUsd === 0 &&
    runCount === 0 &&
    reservedTokens === 0 &&
    reservedCostUsd === 0
  ) {
    return;
  }
  await db
    .insert(dailyUsage)
    .values({
      callerId,
      day,
      tokens,
      costUsd,
      runs: runCount,
      reservedTokens: Math.max(0, reservedTokens),
      reservedCostUsd: Math.max(0, reservedCostUsd),
    })
    .onConflictDoUpdate({
      target: [dailyUsage.callerId, dailyUsage.day],
      set: {
        tokens: sql`${dailyUsage.tokens} + ${tokens}`,
        costUsd: sql`${dailyUsage.costUsd} + ${costUsd.toFixed(6)}::numeric`,
        runs: sql`${dailyUsage.runs} + ${runCount}`,
        reservedTokens: sql`greatest(0, ${dailyUsage.reservedTokens} + ${reservedTokens})`,
        reservedCostUsd: sql`greatest(0, ${dailyUsage.reservedCostUsd} + ${reservedCostUsd.toFixed(6)}::numeric)`,
      },
    });
}

/**
 * Gives a run's concurrency slot back (it left `submitted`/`working`), or takes one without the
 * limit check (a parked run an operator resumed: the approval is not refused for concurrency).
 */
export async function moveSlot(db: DbOrTx, callerId: string, by: 1 | -1): Promise<void> {
  await db
    .insert(callerSlots)
    .values({ callerId, running: Math.max(0, by) })
    .onConflictDoUpdate({
      target: callerSlots.callerId,
      set: { running: sql`greatest(0, ${callerSlots.running} + ${by})` },
    });
}

/**
 * Takes one concurrency slot if the caller has fewer than `limit` runs in progress (any number
 * when `limit` is null); false when it has not.
 */
export async function takeSlotWithin(
  db: DbOrTx,
  callerId: string,
  limit: number | null,
): Promise<boolean> {
  const taken = await db
    .insert(callerSlots)
    .values({ callerId, running: 1 })
    .onConflictDoUpdate({
      target: callerSlots.callerId,
      set: { running: sql`${callerSlots.running} + 1` },
      setWhere: sql`${limit}::int is null or ${callerSlots.running} < ${limit}::int`,
    })
    .returning({ running: callerSlots.running });
  return taken.length === 1;
}

/** A caller's slots in use (tests and diagnostics). */
export async function readRunningSlots(db: DbOrTx, callerId: string): Promise<number> {
  const [row] = await db
    .select({ running: callerSlots.running })
    .from(callerSlots)
    .where(eq(callerSlots.callerId, callerId))
    .limit(1);
  return row?.running ?? 0;
}

export async function readRun(db: DbOrTx, runId: string): Promise<Run | undefined> {
  if (!isUuid(runId)) return undefined;
  const [row] = await db.select().from(runs).where(eq(runs.id, runId)).limit(1);
  return row;
}

export async function lockRun(tx: DbTransaction, runId: string): Promise<Run | undefined> {
  if (!isUuid(runId)) return undefined;
  const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).limit(1).for("update");
  return row;
}

/** Run ids are uuids (the test lives with the domain's words, where the CLI reads it too). */
export { isUuid };

/** Every tool call row the run has, for unique row ids across segments. */
export async function listCallIds(db: DbOrTx, runId: string): Promise<string[]> {
  const rows = await db
    .select({ callId: toolCalls.callId })
    .from(toolCalls)
    .where(eq(toolCalls.runId, runId));
  return rows.map((r) => r.callId);
}

/** Registers (or re-registers) this instance. */
export async function registerInstance(
  db: DbOrTx,
  input: { id: string; hostname: string; pid: number; at: Date },
): Promise<void> {
  await db
    .insert(instances)
    .values({
      id: input.id,
      hostname: input.hostname,
      pid: input.pid,
      startedAt: input.at,
      heartbeatAt: input.at,
    })
    .onConflictDoUpdate({
      target: instances.id,
      set: { hostname: input.hostname, pid: input.pid, startedAt: input.at, heartbeatAt: input.at },
    });
}

/**
 * Marks this instance alive in its row (`instances.heartbeat_at`, for operators: orphaned runs are
 * found by the runs' own heartbeats, not this).
 */
export async function beatInstance(db: DbOrTx, input: { id: string; at: Date }): Promise<void> {
  await db.update(instances).set({ heartbeatAt: input.at }).where(eq(instances.id, input.id));
}

export async function removeInstance(db: DbOrTx, id: string): Promise<void> {
  await db.delete(instances).where(eq(instances.id, id));
}

/** Waiting runs (parked or input-required) whose window closed. */
export async function listExpiredParkedRuns(db: DbOrTx, at: Date): Promise<Run[]> {
  return db
    .select()
    .from(runs)
    .where(and(inArray(runs.status, [...waitingStatuses]), lt(runs.parkedUntil, at)))
    .limit(500);
}
