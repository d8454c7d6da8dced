// The one writer of run state: no other module in src/ inserts or updates `runs` or `tool_calls`
// (test/runs/run-state-writers.test.ts fails the build if one does). Every state change of a run
// commits together with its audit event; every compare-and-set names the state it expects (a run
// another instance already moved on is left alone, never overwritten). A parked run ends without
// resuming in exactly one place, `closeParkedRuns`, whoever closes it (revocation, cancel, expiry,
// the approval claim), so its batch is cleared, its parked calls closed and its end audited alike.
// It is one file over 500 lines on purpose: being the only writer is what makes the writes
// reviewable side by side (reads live in run-queries.ts).

import { and, eq, inArray, isNull, lt, or, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { appendAuditEvent, auditInsertFrom, auditPlaceholderValues } from "../db/audit.ts";
import type { DbOrTx, DbTransaction } from "../db/client.ts";
import { prebuilt, prebuiltInsertReturning, setPlaceholder } from "../db/prebuilt.ts";
import {
  type Caller,
  callers,
  type NewRun,
  type PendingApproval,
  type PendingBatch,
  type PendingInput,
  type Run,
  type RunBudgetLimits,
  type RunBudgetUsed,
  type RunControlsSnapshot,
  type RunError,
  type RunStatus,
  runs,
  type StopKind,
  toolCalls,
} from "../db/schema.ts";
import { storableText, storedJson, toStorableJson } from "../db/storable.ts";
import type { AuditActor } from "../domain/audit.ts";
import { waitingStatuses } from "../domain/run.ts";
import type { CallEnd, OpenedCall, ToolCallRecorder } from "../gate/batch.ts";
import { isCallerRevoked } from "../policy/caller-revoked.ts";
import {
  activeStatuses,
  addDailyUsage,
  lockRun,
  moveSlot,
  readCaller,
  takeSlotWithin,
} from "./run-queries.ts";

/** A stop recorded on a working run's row: who asked (src/domain/run.ts) and why. */
export type RecordedStop = { readonly kind: StopKind; readonly reason: string };

/** The words every run of a revoked caller ends with (status `revoked`). */
export const revokedStopReason = "the caller was revoked";

/** The stop a run row records, if any (a row from before `stop_kind` reads as a cancel). */
function recordedStop(row: {
  cancelRequestedAt: Date | null;
  cancelReason: string | null;
  stopKind: StopKind | null;
}): RecordedStop | undefined {
  if (row.cancelRequestedAt === null) return undefined;
  return row.stopKind === "revoked"
    ? { kind: "revoked", reason: row.cancelReason ?? revokedStopReason }
    : { kind: "cancel", reason: row.cancelReason ?? "canceled" };
}

/** The compare-and-set of a working run's change: still working, and still this instance's. */
function ownedWorking(
  runId: string | SQLWrapper,
  instanceId: string | SQLWrapper,
): SQL | undefined {
  return and(eq(runs.id, runId), eq(runs.status, "working"), eq(runs.ownerInstanceId, instanceId));
}

/** The run's INSERT, built once per set of columns given (src/db/prebuilt.ts). */
const insertRunRow = prebuiltInsertReturning(runs);

export async function insertRun(tx: DbTransaction, values: NewRun): Promise<Run> {
  return insertRunRow(tx, { ...values, messages: storedJson(values.messages) });
}

/** Usage to add to a caller's daily totals in the same transaction as a run's change. */
export type DailyCharge = {
  callerId: string;
  day: string;
  delta: { tokens: number; costUsd: number };
};

/**
 * What a run gives back as it leaves a status: its concurrency slot (leaving `working`), its share
 * of the day (ending), and the usage not yet added to the daily totals. The slot row before the day
 * rows, the order admission locks them in (src/runs/admission.ts), so the two cannot deadlock.
 */
async function settleRun(
  tx: DbTransaction,
  input: {
    callerId: string;
    releaseSlot: boolean;
    reserve?: RunBudgetLimits["dailyReserve"] | undefined;
    daily?: DailyCharge | undefined;
  },
): Promise<void> {
  const { callerId, reserve, daily } = input;
  const work: (() => Promise<void>)[] = [];
  if (input.releaseSlot) work.push(() => moveSlot(tx, callerId, -1));
  const giveBack = reserve
    ? {
        reservedTokens: -(reserve.heldTokens ?? 0),
        reservedCostUsd: -(reserve.heldCostUsd ?? 0),
      }
    : undefined;
  if (daily && giveBack && daily.day === reserve?.day) {
    work.push(() => addDailyUsage(tx, daily.callerId, daily.day, { ...daily.delta, ...giveBack }));
  } else {
    if (daily) work.push(() => addDailyUsage(tx, daily.callerId, daily.day, daily.delta));
    if (giveBack && reserve) work.push(() => addDailyUsage(tx, callerId, reserve.day, giveBack));
  }
  // One after the other: issued together, drizzle does not keep them in order.
  for (const statement of work) await statement();
}

/** Charges one model step: the run's usage, its heartbeat and the caller's daily totals. */
export async function chargeStep(
  db: DbOrTx,
  input: {
    runId: string;
    callerId: string;
    instanceId: string;
    day: string;
    used: RunBudgetUsed;
    delta: { tokens: number; costUsd: number };
    at: Date;
  },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx
      .update(runs)
      .set({ budgetUsed: input.used, heartbeatAt: input.at, updatedAt: input.at })
      .where(and(eq(runs.id, input.runId), eq(runs.ownerInstanceId, input.instanceId)));
    await addDailyUsage(tx, input.callerId, input.day, input.delta);
  });
}

export async function saveMessages(
  db: DbOrTx,
  runId: string,
  instanceId: string,
  messages: unknown[],
  at: Date,
): Promise<void> {
  await db
    .update(runs)
    .set({ messages: toStorableJson(messages), heartbeatAt: at, updatedAt: at })
    .where(and(eq(runs.id, runId), eq(runs.ownerInstanceId, instanceId)));
}

/** Tool call rows of one run segment, with their audit events. */
export function createToolCallRecorder(input: {
  db: DbOrTx;
  runId: string;
  segment: number;
  actor: AuditActor;
  now: () => Date;
}): ToolCallRecorder {
  const { db, runId, segment, actor, now } = input;
  const subject = `run:${runId}`;
  return {
    async open(rows: readonly OpenedCall[]) {
      if (rows.length === 0) return;
      const at = now();
      await db.transaction(async (tx) => {
        await tx.insert(toolCalls).values(
          rows.map((row) => ({
            runId,
            callId: row.recordId,
            // The name is the model's: it may hold what PostgreSQL cannot store (a NUL).
            tool: storableText(row.tool),
            argsDigest: row.argsDigest,
            status: row.status,
            code: row.code ?? null,
            segment,
            createdAt: at,
            decision: row.decision ?? null,
            ...(row.status === "refused" || row.status === "failed" || row.status === "declined"
              ? { finishedAt: at }
              : {}),
          })),
        );
        for (const row of rows) {
          if (row.status !== "refused" && row.status !== "declined") continue;
          // The name is the model's (untrusted, cut to 128 characters); never the arguments.
          await appendAuditEvent(tx, {
            actor,
            kind: row.status === "refused" ? "tool.refused" : "tool.declined",
            subject,
            data: {
              runId,
              callId: row.recordId,
              tool: row.tool,
              code: row.code ?? row.status,
              ...(row.decision ? { decision: row.decision } : {}),
            },
          });
        }
      });
    },
    async start(recordId) {
      await db
        .update(toolCalls)
        .set({ status: "running", startedAt: now(), segment })
        .where(and(eq(toolCalls.runId, runId), eq(toolCalls.callId, recordId)));
    },
    async finish(recordId: string, end: CallEnd) {
      const at = now();
      await db.transaction(async (tx) => {
        const [row] = await tx
          .update(toolCalls)
          .set({
            status: end.status,
            code: end.code ?? null,
            outputTruncated: end.truncated === true,
            ...(end.decision ? { decision: end.decision } : {}),
            ...(end.status === "parked" ? {} : { finishedAt: at }),
          })
          .where(and(eq(toolCalls.runId, runId), eq(toolCalls.callId, recordId)))
          .returning({
            tool: toolCalls.tool,
            argsDigest: toolCalls.argsDigest,
            decision: toolCalls.decision,
          });
        if (end.status === "parked" || end.status === "not-started") return;
        await appendAuditEvent(tx, {
          actor,
          kind:
            end.status === "refused"
              ? "tool.refused"
              : end.status === "declined"
                ? "tool.declined"
                : "tool.called",
          subject,
          data: {
            runId,
            callId: recordId,
            tool: row?.tool ?? null,
            ...(end.ran ? { ran: end.ran } : {}),
            status: end.status,
            ...(end.code ? { code: end.code } : {}),
            argsDigest: row?.argsDigest ?? null,
            // Rule, reason, floor reasons, coverage and the classifier's verdict.
            ...(row?.decision ? { decision: row.decision } : {}),
          },
        });
      });
    },
    async stage(recordId, event) {
      // One stage of a declared command: allowed or refused (why), started, exited (how).
      await appendAuditEvent(db, {
        actor,
        kind: "tool.stage",
        subject,
        data: { runId, callId: recordId, ...event },
      });
    },
  };
}

/** Records the caller's controls a run started with (once, at its first step). */
export async function saveRunControls(
  db: DbOrTx,
  runId: string,
  controls: RunControlsSnapshot,
): Promise<void> {
  await db
    .update(runs)
    .set({ controls })
    .where(and(eq(runs.id, runId), isNull(runs.controls)));
}

/** Parks a working run on `pending`; false when this instance no longer owns it. */
export async function parkRun(
  db: DbOrTx,
  input: {
    runId: string;
    instanceId: string;
    pending: PendingApproval;
    batch: PendingBatch;
    messages: unknown[];
    used: RunBudgetUsed;
    parkedUntil: Date;
    at: Date;
    daily?: DailyCharge;
  },
): Promise<{ stop: RecordedStop | undefined } | undefined> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .update(runs)
      .set({
        status: "parked",
        pendingApproval: toStorableJson(input.pending),
        pendingBatch: toStorableJson(input.batch),
        messages: toStorableJson(input.messages),
        budgetUsed: input.used,
        parkedUntil: input.parkedUntil,
        ownerInstanceId: null,
        heartbeatAt: null,
        updatedAt: input.at,
      })
      .where(ownedWorking(input.runId, input.instanceId))
      .returning({
        callerId: runs.callerId,
        cancelRequestedAt: runs.cancelRequestedAt,
        cancelReason: runs.cancelReason,
        stopKind: runs.stopKind,
      });
    if (!row) return undefined;
    // A parked run holds no slot; it keeps its share of the day until it ends.
    await settleRun(tx, { callerId: row.callerId, releaseSlot: true, daily: input.daily });
    await appendAuditEvent(tx, {
      actor: `instance:${input.instanceId}`,
      kind: "run.parked",
      subject: `run:${input.runId}`,
      data: {
        runId: input.runId,
        callId: input.pending.callId,
        tool: input.pending.tool,
        argsDigest: input.pending.argsDigest,
        parkedUntil: input.parkedUntil.toISOString(),
      },
    });
    // A stop recorded while the run was parking still ends it (the caller closes it).
    return { stop: recordedStop(row) };
  });
}

/** The values of the finish statement's placeholders (`finishStatement`). */
type FinishValues = {
  runId: string;
  instanceId: string;
  status: RunStatus;
  result: { text: string } | null;
  error: unknown;
  messages: unknown;
  used: RunBudgetUsed;
  at: Date;
  chargeDay: string | null;
  chargeTokens: number;
  chargeCost: string;
} & ReturnType<typeof auditPlaceholderValues>;

/**
 * `finishRun`'s one statement, with placeholders (FinishValues) for everything a call varies;
 * `closeCalls`: also close the run's open tool calls.
 */
function finishStatement(db: DbOrTx, closeCalls: boolean): SQL {
  const at = setPlaceholder<Date>("at");
  const update = db
    .update(runs)
    .set({
      status: setPlaceholder<RunStatus>("status"),
      result: setPlaceholder<{ text: string } | null>("result"),
      error: setPlaceholder<RunError | null>("error"),
      messages: setPlaceholder<unknown[]>("messages"),
      budgetUsed: setPlaceholder<RunBudgetUsed>("used"),
      pendingApproval: null,
      pendingBatch: null,
      ownerInstanceId: null,
      heartbeatAt: null,
      finishedAt: at,
      updatedAt: at,
    })
    .where(ownedWorking(sql.placeholder("runId"), sql.placeholder("instanceId")))
    .returning({ callerId: runs.callerId, budgetLimits: runs.budgetLimits });
  const chargeDay = sql.placeholder("chargeDay");
  // Calls still marked running belong to this run's stop: they were interrupted. Calls still
  // waiting for an operator never ran.
  const calls = closeCalls
    ? sql`, calls as ${db
        .update(toolCalls)
        .set({
          status: sql`case when ${toolCalls.status} = 'running' then 'interrupted' else 'not-started' end`,
          code: sql`case when ${toolCalls.status} = 'running' then 'interrupted' else ${toolCalls.code} end`,
          finishedAt: at,
        })
        .where(
          and(
            eq(toolCalls.runId, sql.placeholder("runId")),
            inArray(toolCalls.status, ["running", "parked"]),
            sql`exists (select 1 from done)`,
          ),
        )}`
    : sql``;
  return sql`with done as ${update},
      slot as (
        insert into caller_slots as s (caller_id, running) select caller_id, 0 from done
        on conflict (caller_id) do update set running = greatest(0, s.running - 1)
        returning s.caller_id
      ),
      charge as (
        select x.caller_id, x.day, sum(x.tokens)::bigint as tokens, sum(x.cost)::numeric as cost,
          sum(x.held_tokens)::bigint as held_tokens, sum(x.held_cost)::numeric as held_cost
        from (
          select d.caller_id, ${chargeDay}::date as day, ${sql.placeholder("chargeTokens")}::bigint as tokens,
            ${sql.placeholder("chargeCost")}::numeric as cost, 0::bigint as held_tokens, 0::numeric as held_cost
          from done d where ${chargeDay}::date is not null
          union all
          select d.caller_id, (d.budget_limits->'dailyReserve'->>'day')::date, 0, 0,
            coalesce((d.budget_limits->'dailyReserve'->>'heldTokens')::numeric, 0)::bigint,
            coalesce((d.budget_limits->'dailyReserve'->>'heldCostUsd')::numeric, 0)
          from done d where d.budget_limits->'dailyReserve'->>'day' is not null
        ) x
        group by x.caller_id, x.day
      ),
      day as (
        insert into daily_usage as u
          (caller_id, day, tokens, cost_usd, runs, reserved_tokens, reserved_cost_usd)
        select c.caller_id, c.day, c.tokens, c.cost, 0, 0, 0 from charge c
        where exists (select 1 from slot)
          and (c.tokens <> 0 or c.cost <> 0 or c.held_tokens <> 0 or c.held_cost <> 0)
        on conflict (caller_id, day) do update set
          tokens = u.tokens + excluded.tokens,
          cost_usd = u.cost_usd + excluded.cost_usd,
          reserved_tokens = greatest(0, u.reserved_tokens
            - (select c.held_tokens from charge c where c.day = excluded.day)),
          reserved_cost_usd = greatest(0, u.reserved_cost_usd
            - (select c.held_cost from charge c where c.day = excluded.day))
        returning 1
      )${calls},
      event as (${auditInsertFrom(sql`done`)})
      select count(*)::int as n from done`;
}

// Built once each (src/db/prebuilt.ts): every run's end sends one of them.
const finishAlone = prebuilt<FinishValues, { n: unknown }>((db) => finishStatement(db, false));
const finishClosingCalls = prebuilt<FinishValues, { n: unknown }>((db) =>
  finishStatement(db, true),
);

/**
 * Ends a working run this instance owns; false when another instance already moved it on.
 *
 * One statement: the compare-and-set of the run, then from its returned row the slot given back,
 * the daily usage and the share given back (one upsert per day), the open tool calls closed and
 * the audit event — each only when the compare-and-set matched. The day's upsert reads the slot's
 * result, so the slot row is locked before the day row, as everywhere (see `settleRun`). It runs
 * in a transaction although it is atomic alone: a statement sent to a server that freezes runs
 * when the server wakes, after its deadline told the request it failed; in a transaction, the
 * deadline's ROLLBACK follows it (src/db/statement-deadline.ts), so a late finish never commits.
 */
export async function finishRun(
  db: DbOrTx,
  input: {
    runId: string;
    instanceId: string;
    status: RunStatus;
    text?: string | undefined;
    error?: RunError | undefined;
    messages: unknown[];
    used: RunBudgetUsed;
    at: Date;
    /** Usage not yet added to the caller's daily totals. */
    daily?: DailyCharge;
    /** False when the segment recorded no tool call (nothing to close). */
    toolCallsOpen?: boolean;
    /**
     * Writes that must commit with the end and only with it, sent right behind its statement
     * (StartRunRequest.atEnd).
     */
    alongside?: readonly SQL[];
  },
): Promise<boolean> {
  const daily = input.daily;
  const values: FinishValues = {
    runId: input.runId,
    instanceId: input.instanceId,
    status: input.status,
    result: input.text === undefined ? null : { text: storableText(input.text) },
    error: storedJson(input.error ?? null),
    messages: storedJson(input.messages),
    used: input.used,
    at: input.at,
    chargeDay: daily ? daily.day : null,
    chargeTokens: Math.round(daily?.delta.tokens ?? 0),
    chargeCost: (daily?.delta.costUsd ?? 0).toFixed(6),
    ...auditPlaceholderValues({
      actor: `instance:${input.instanceId}`,
      kind: `run.${input.status}`,
      subject: `run:${input.runId}`,
      data: {
        runId: input.runId,
        status: input.status,
        used: input.used,
        ...(input.error ? { error: { code: input.error.code, budget: input.error.budget } } : {}),
      },
    }),
  };
  const statement = input.toolCallsOpen === false ? finishAlone : finishClosingCalls;
  const alongside = input.alongside ?? [];
  if (alongside.length === 0) {
    return db.transaction(async (tx) => {
      const rows = await statement(tx, values);
      return Number(rows[0]?.n ?? 0) > 0;
    });
  }
  const notOurs = new Error("another instance ended the run first");
  try {
    await db.transaction(async (tx) => {
      const [rows] = await Promise.all([
        statement(tx, values),
        ...alongside.map((write) => tx.execute(write)),
      ]);
      // Nothing of the end was written: what was sent alongside must not commit either.
      if (Number(rows[0]?.n ?? 0) === 0) throw notOurs;
    });
    return true;
  } catch (error) {
    if (error === notOurs) return false;
    throw error;
  }
}

/**
 * Moves a waiting run (locked by the caller) back to working, owned by this instance: a parked run
 * an operator approved, or an input-required run its caller answered. Clears what it waited on.
 */
export async function claimWaitingRun(
  tx: DbTransaction,
  input: {
    run: Run;
    instanceId: string;
    at: Date;
    from: "parked" | "input-required";
    /**
     * The caller's concurrency limit, when the resume must respect it (a caller's answer: else
     * runs asking questions would let a caller run more at once than its limit). Undefined: the
     * slot is taken whatever the count (an operator's approval is not refused for concurrency).
     */
    slotLimit?: number | null;
  },
): Promise<Run | "no-slot" | undefined> {
  const { run, at, from } = input;
  if (input.slotLimit !== undefined && !(await takeSlotWithin(tx, run.callerId, input.slotLimit))) {
    return "no-slot";
  }
  const [claimed] = await tx
    .update(runs)
    .set({
      status: "working",
      ownerInstanceId: input.instanceId,
      heartbeatAt: at,
      segments: run.segments + 1,
      segmentStartedAt: at,
      parkedUntil: null,
      ...(from === "parked" ? { pendingApproval: null } : { pendingInput: null }),
      updatedAt: at,
    })
    .where(and(eq(runs.id, run.id), eq(runs.status, from)))
    .returning();
  // The slot taken above stays taken only with the claim: the caller's transaction rolls back.
  if (claimed && input.slotLimit === undefined) await moveSlot(tx, claimed.callerId, 1);
  return claimed;
}

/**
 * Ends a working run's segment on a question for its caller (`input-required`): like parking, the
 * run gives back its slot and instance, keeps its share of the day and its usage so far, and waits
 * until `waitUntil`. False when this instance no longer owns it.
 */
export async function awaitCallerInput(
  db: DbOrTx,
  input: {
    runId: string;
    instanceId: string;
    pending: PendingInput;
    messages: unknown[];
    used: RunBudgetUsed;
    waitUntil: Date;
    at: Date;
    daily?: DailyCharge;
  },
): Promise<{ stop: RecordedStop | undefined } | undefined> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .update(runs)
      .set({
        status: "input-required",
        pendingInput: toStorableJson(input.pending),
        messages: toStorableJson(input.messages),
        budgetUsed: input.used,
        parkedUntil: input.waitUntil,
        ownerInstanceId: null,
        heartbeatAt: null,
        updatedAt: input.at,
      })
      .where(ownedWorking(input.runId, input.instanceId))
      .returning({
        callerId: runs.callerId,
        cancelRequestedAt: runs.cancelRequestedAt,
        cancelReason: runs.cancelReason,
        stopKind: runs.stopKind,
      });
    if (!row) return undefined;
    await settleRun(tx, { callerId: row.callerId, releaseSlot: true, daily: input.daily });
    await appendAuditEvent(tx, {
      actor: `instance:${input.instanceId}`,
      kind: "run.input-required",
      subject: `run:${input.runId}`,
      data: {
        runId: input.runId,
        callId: input.pending.callId,
        // The model's words for the caller: bounded, they are the caller's to read anyway.
        question: input.pending.question.slice(0, 500),
        waitUntil: input.waitUntil.toISOString(),
      },
    });
    return { stop: recordedStop(row) };
  });
}

/** How a parked run ends without resuming. */
export type ParkedRunEnd = {
  readonly status: "canceled" | "expired" | "rejected" | "revoked";
  readonly error: RunError;
  readonly actor: AuditActor;
  readonly at: Date;
};

/** Locks the waiting runs (parked or input-required) of one caller (a revocation closes them all). */
export async function lockParkedRunsOfCaller(tx: DbTransaction, callerId: string): Promise<Run[]> {
  return tx
    .select()
    .from(runs)
    .where(and(eq(runs.callerId, callerId), inArray(runs.status, [...waitingStatuses])))
    .for("update");
}

/**
 * Ends waiting runs, parked or input-required (locked by the caller's transaction), without
 * resuming them: status and error
 * set, pending approval and batch cleared, the calls still waiting marked `not-started`, and one
 * `run.<status>` audit event per run. Returns the ids it closed (a run no longer parked is left).
 */
export async function closeParkedRuns(
  tx: DbTransaction,
  input: ParkedRunEnd & { readonly runs: readonly Run[] },
): Promise<string[]> {
  const { at } = input;
  const closed: string[] = [];
  for (const run of input.runs) {
    const [row] = await tx
      .update(runs)
      .set({
        status: input.status,
        error: input.error,
        pendingApproval: null,
        pendingBatch: null,
        pendingInput: null,
        parkedUntil: null,
        finishedAt: at,
        updatedAt: at,
      })
      .where(and(eq(runs.id, run.id), inArray(runs.status, [...waitingStatuses])))
      .returning({ callerId: runs.callerId, budgetLimits: runs.budgetLimits });
    if (!row) continue;
    await settleRun(tx, {
      callerId: row.callerId,
      releaseSlot: false,
      reserve: row.budgetLimits.dailyReserve,
    });
    await tx
      .update(toolCalls)
      .set({ status: "not-started", finishedAt: at })
      .where(and(eq(toolCalls.runId, run.id), eq(toolCalls.status, "parked")));
    await appendAuditEvent(tx, {
      actor: input.actor,
      kind: `run.${input.status}`,
      subject: `run:${run.id}`,
      data: {
        runId: run.id,
        status: input.status,
        error: { code: input.error.code },
        callId: run.pendingApproval?.callId ?? null,
      },
    });
    closed.push(run.id);
  }
  return closed;
}

/**
 * Records a cancel for a run that is still working (or about to). False when the run is not
 * active. A second cancel keeps the first one's time and reason.
 */
export async function requestCancel(
  tx: DbTransaction,
  input: { runId: string; reason: string; at: Date },
): Promise<boolean> {
  const [row] = await tx
    .update(runs)
    .set({
      cancelRequestedAt: sql`coalesce(${runs.cancelRequestedAt}, ${input.at.toISOString()}::timestamptz)`,
      cancelReason: sql`coalesce(${runs.cancelReason}, ${storableText(input.reason)})`,
      stopKind: sql`coalesce(${runs.stopKind}, 'cancel')`,
      updatedAt: input.at,
    })
    .where(and(eq(runs.id, input.runId), inArray(runs.status, [...activeStatuses])))
    .returning({ id: runs.id });
  return row !== undefined;
}

/**
 * Records the revocation of a caller on every one of its runs that is working (or about to), in
 * the revocation's transaction: the same record as a cancel, so the instance executing the run
 * reads it at its next heartbeat or step whether or not the notification reaches it. A revocation
 * outranks a cancel recorded before it (the run ends `revoked`), keeping the first request's time.
 * Returns the runs it marked.
 */
export async function recordRevocationStops(
  tx: DbTransaction,
  input: { callerId: string; at: Date },
): Promise<string[]> {
  const rows = await tx
    .update(runs)
    .set({
      cancelRequestedAt: sql`coalesce(${runs.cancelRequestedAt}, ${input.at.toISOString()}::timestamptz)`,
      cancelReason: revokedStopReason,
      stopKind: "revoked",
      updatedAt: input.at,
    })
    .where(and(eq(runs.callerId, input.callerId), inArray(runs.status, [...activeStatuses])))
    .returning({ id: runs.id });
  return rows.map((r) => r.id);
}

/**
 * What the between-steps check reads before a step's tools run: a stop recorded for the run and
 * whether its caller is revoked. Both also travel by notification; this read is what makes them
 * hold when a notification is lost.
 */
export async function readStopRequest(
  db: DbOrTx,
  input: { runId: string; callerId: string },
): Promise<{ stop: RecordedStop | undefined; caller: Caller | undefined }> {
  const [run] = await db
    .select({
      cancelRequestedAt: runs.cancelRequestedAt,
      cancelReason: runs.cancelReason,
      stopKind: runs.stopKind,
    })
    .from(runs)
    .where(eq(runs.id, input.runId))
    .limit(1);
  const caller = await readCaller(db, input.callerId);
  return { stop: run ? recordedStop(run) : undefined, caller };
}

/**
 * Heartbeats the runs this instance is executing (one statement; none when there are none);
 * returns those of them that must stop: a stop recorded on the run (a cancel, a revocation), or a
 * caller revoked (a run admitted while its caller's revocation committed carries no record of
 * it). So a stop whose notification was lost reaches even a run busy in a long tool call or model
 * stream, within one heartbeat. The instance's own row is beaten apart (`beatInstance`), rarely.
 */
export async function heartbeat(
  db: DbOrTx,
  input: { instanceId: string; runIds: readonly string[]; at: Date },
): Promise<({ runId: string } & RecordedStop)[]> {
  if (input.runIds.length === 0) return [];
  const rows = await db
    .update(runs)
    .set({ heartbeatAt: input.at })
    .from(callers)
    .where(
      and(
        eq(callers.id, runs.callerId),
        inArray(runs.id, [...input.runIds]),
        eq(runs.ownerInstanceId, input.instanceId),
        inArray(runs.status, [...activeStatuses]),
      ),
    )
    .returning({
      runId: runs.id,
      cancelRequestedAt: runs.cancelRequestedAt,
      cancelReason: runs.cancelReason,
      stopKind: runs.stopKind,
      revokedAt: callers.revokedAt,
      tier: callers.tier,
    });
  const stops: ({ runId: string } & RecordedStop)[] = [];
  for (const row of rows) {
    const stop: RecordedStop | undefined = isCallerRevoked(row)
      ? { kind: "revoked", reason: revokedStopReason }
      : recordedStop(row);
    if (stop) stops.push({ runId: row.runId, ...stop });
  }
  return stops;
}

/**
 * Marks runs `interrupted` whose owner stopped heartbeating (or is this instance, restarted, and
 * does not hold them): their running tool calls are interrupted, their wall time up to the last
 * heartbeat is charged, and each gets an audit event. Returns the runs it marked.
 */
export async function recoverOrphanedRuns(
  db: DbOrTx,
  input: {
    instanceId: string;
    staleBefore: Date;
    /**
     * Whether a run executes here, asked once its row is locked: a run is registered before its
     * row exists, so a row this finds was registered by then. A list taken before the query
     * would miss a run that started while the query waited, and mark it interrupted.
     */
    isLocal: (runId: string) => boolean;
    at: Date;
  },
): Promise<Run[]> {
  const candidates = await db
    .select()
    .from(runs)
    .where(
      and(
        inArray(runs.status, [...activeStatuses]),
        or(
          lt(runs.heartbeatAt, input.staleBefore),
          and(isNull(runs.heartbeatAt), lt(runs.updatedAt, input.staleBefore)),
          eq(runs.ownerInstanceId, input.instanceId),
        ),
      ),
    )
    .limit(500);
  const recovered: Run[] = [];
  for (const candidate of candidates) {
    if (input.isLocal(candidate.id)) continue;
    const row = await db.transaction(async (tx) => {
      const run = await lockRun(tx, candidate.id);
      if (!run || !activeStatuses.includes(run.status) || input.isLocal(run.id)) return undefined;
      const stale =
        run.ownerInstanceId === input.instanceId ||
        (run.heartbeatAt ?? run.updatedAt).getTime() < input.staleBefore.getTime();
      if (!stale) return undefined;
      const lastSeen = run.heartbeatAt ?? run.updatedAt;
      const segmentStart = run.segmentStartedAt ?? run.startedAt ?? run.createdAt;
      const wall = Math.max(0, lastSeen.getTime() - segmentStart.getTime());
      const used: RunBudgetUsed = {
        ...run.budgetUsed,
        durationMs: run.budgetUsed.durationMs + wall,
      };
      const error: RunError = {
        code: "interrupted",
        message: "the instance running this run stopped before it finished",
      };
      const [updated] = await tx
        .update(runs)
        .set({
          status: "interrupted",
          error,
          budgetUsed: used,
          ownerInstanceId: null,
          heartbeatAt: null,
          finishedAt: input.at,
          updatedAt: input.at,
        })
        .where(eq(runs.id, run.id))
        .returning();
      await settleRun(tx, {
        callerId: run.callerId,
        releaseSlot: true,
        reserve: run.budgetLimits.dailyReserve,
      });
      const interrupted = await tx
        .update(toolCalls)
        .set({ status: "interrupted", code: "interrupted", finishedAt: input.at })
        .where(and(eq(toolCalls.runId, run.id), eq(toolCalls.status, "running")))
        .returning({ callId: toolCalls.callId });
      await appendAuditEvent(tx, {
        actor: `instance:${input.instanceId}`,
        kind: "run.interrupted",
        subject: `run:${run.id}`,
        data: {
          runId: run.id,
          previousOwner: run.ownerInstanceId,
          lastHeartbeat: lastSeen.toISOString(),
          used,
          interruptedCalls: interrupted.map((c) => c.callId),
        },
      });
      return updated;
    });
    if (row) recovered.push(row);
  }
  return recovered;
}
