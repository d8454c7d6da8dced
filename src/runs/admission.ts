// Whether a caller may start a run now: its messages are acceptable and it is inside its
// concurrency and daily limits. No lock is held across the admission: one statement, in the
// transaction that creates the run, takes with conditional upserts of the caller's own rows a
// concurrency slot (`caller_slots.running < limit`) and the day's share (`daily_usage`: runs below
// the limit, and tokens and dollars spent plus those held by live runs below the limit). A
// refusal throws, rolling back whatever the statement took. Concurrent admissions of one caller
// wait only for each other's row locks until COMMIT, never for a transaction of reads.
//
// Tokens and cost: a run holds a share of the day — its own per-run cap, or without one the daily
// limit divided by the concurrency limit, or without that the whole daily limit — in
// `daily_usage.reserved_*` while it lives, and its daily meter grants it `min(share, what the day
// left when it was admitted)` (src/runs/budgets.ts). Its end gives the share back
// (src/runs/run-state.ts), what it spent having been added to the totals step by step. The grants
// of a day's runs never sum past what the day leaves, so concurrent runs cannot overspend it
// together: the daily total passes its limit only as each single run passes its grant — by the
// step that crosses it (with a provider that honours `maxOutputTokens`, by that step's input) —
// exactly as one run alone may pass its own per-run budget. A caller with a daily token or cost
// limit but neither a per-run cap nor a concurrency limit therefore runs one run at a time.
import type { ModelMessage } from "ai";
import { sql } from "drizzle-orm";
import type { DbTransaction } from "../db/client.ts";
import { prebuilt } from "../db/prebuilt.ts";
import type { Caller, RunBudgetLimits, RunError } from "../db/schema.ts";
import { RateLimitedError, UnauthenticatedError, ValidationError } from "../errors.ts";
import { isCallerRevoked } from "../policy/caller-revoked.ts";
import { formatUtcDay, secondsUntilNextUtcDay } from "./budgets.ts";
import { addDailyUsage, moveSlot, readCaller, readDailyTotals } from "./run-queries.ts";

export function checkMessages(messages: readonly ModelMessage[]): void {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new ValidationError([{ field: "messages", message: "a run needs at least one message" }]);
  }
  // Caller runs get the agent's instructions only: a caller cannot add a system prompt.
  if (messages.some((m) => (m as { role?: unknown }).role === "system")) {
    throw new ValidationError([
      { field: "messages", message: "a caller's messages may not include system messages" },
    ]);
  }
}

export type DailyReserve = NonNullable<RunBudgetLimits["dailyReserve"]>;

type AdmitRow = {
  slot: boolean;
  tokens: string | number | null;
  cost_usd: string | number | null;
  reserved_tokens: string | number | null;
  reserved_cost_usd: string | number | null;
};

const noLimit = null;

type AdmissionParams = {
  day: string;
  concurrent: number | null;
  maxRuns: number | null;
  maxTokens: number | null;
  maxCost: number | null;
  heldTokens: number;
  heldCost: number;
};

/** What one admission statement took: the caller's limits it was judged by, and its row. */
type Taken = { params: AdmissionParams; row: AdmitRow | undefined };

function admissionParams(caller: Caller, at: Date): AdmissionParams {
  const budgets = caller.budgets;
  const concurrent = limitOf(budgets.concurrentRuns);
  const daily = budgets.daily ?? {};
  const maxTokens = limitOf(daily.tokens);
  const maxCost = limitOf(daily.costUsd);
  const share = (dayLimit: number | null, runCap: number | null) =>
    dayLimit === null ? null : (runCap ?? (concurrent !== null ? dayLimit / concurrent : dayLimit));
  const tokenShare = share(maxTokens, limitOf(budgets.tokens));
  const costShare = share(maxCost, limitOf(budgets.costUsd));
  return {
    day: formatUtcDay(at),
    concurrent,
    maxRuns: limitOf(daily.runs),
    maxTokens,
    maxCost,
    heldTokens: tokenShare === null ? 0 : Math.ceil(tokenShare),
    heldCost: costShare === null ? 0 : Math.round(costShare * 1e6) / 1e6,
  };
}

/**
 * The one admission statement: the slot row, then the day row (the day's update waits on the slot,
 * so both are locked in the order every other path locks them, src/runs/run-state.ts). The day's
 * condition reads the totals as they are when the row is locked, after any concurrent admission
 * committed. Built once (src/db/prebuilt.ts): every run's start sends it.
 */
const admission = prebuilt<AdmissionParams & { callerId: string }, AdmitRow>(() => {
  const p = (name: keyof AdmissionParams | "callerId") => sql.placeholder(name);
  return sql`with slot as (
      insert into caller_slots as s (caller_id, running) values (${p("callerId")}, 1)
      on conflict (caller_id) do update set running = s.running + 1
      where ${p("concurrent")}::int is null or s.running < ${p("concurrent")}::int
      returning s.running
    ),
    taken as (
      insert into daily_usage as d (caller_id, day, runs, reserved_tokens, reserved_cost_usd)
      select ${p("callerId")}, ${p("day")}, 1, ${p("heldTokens")}::bigint,
        ${p("heldCost")}::numeric
      where exists (select 1 from slot)
      on conflict (caller_id, day) do update set
        runs = d.runs + 1,
        reserved_tokens = d.reserved_tokens + ${p("heldTokens")}::bigint,
        reserved_cost_usd = d.reserved_cost_usd + ${p("heldCost")}::numeric
      where (${p("maxRuns")}::int is null or d.runs < ${p("maxRuns")}::int)
        and (${p("maxTokens")}::bigint is null or d.tokens + d.reserved_tokens < ${p("maxTokens")}::bigint)
        and (${p("maxCost")}::numeric is null
          or d.cost_usd + d.reserved_cost_usd < ${p("maxCost")}::numeric)
      returning d.tokens, d.cost_usd, d.reserved_tokens, d.reserved_cost_usd
    )
    select exists (select 1 from slot) as slot, t.tokens, t.cost_usd, t.reserved_tokens,
      t.reserved_cost_usd
    from (select 1) one left join taken t on true`;
});

/** Takes what the limits allow for one run of `caller` and says what it took. */
async function takeAdmission(tx: DbTransaction, callerId: string, at: Date, caller: Caller) {
  const params = admissionParams(caller, at);
  const [row] = await admission(tx, { ...params, callerId });
  return { params, row } satisfies Taken;
}

/** Gives back what `takeAdmission` took (the caller it was judged by had changed meanwhile). */
async function undoAdmission(tx: DbTransaction, callerId: string, taken: Taken): Promise<void> {
  if (!taken.row?.slot) return;
  await moveSlot(tx, callerId, -1);
  if (taken.row.tokens === null) return;
  await addDailyUsage(tx, callerId, taken.params.day, {
    runs: -1,
    reservedTokens: -taken.params.heldTokens,
    reservedCostUsd: -taken.params.heldCost,
  });
}

/** Throws RateLimitedError for a refusal; otherwise the reservation to record on the run. */
async function judgeAdmission(
  tx: DbTransaction,
  callerId: string,
  at: Date,
  concurrencyRetryAfterSeconds: number,
  { params, row }: Taken,
): Promise<DailyReserve | undefined> {
  const { day, concurrent, maxRuns, maxTokens, maxCost, heldTokens, heldCost } = params;
  if (!row?.slot) {
    throw new RateLimitedError(
      `caller has ${concurrent} runs in progress; its limit is ${concurrent}`,
      concurrencyRetryAfterSeconds,
    );
  }
  if (row.tokens === null) {
    // Refused: the transaction rolls back; read why (in it, as the totals stand now).
    const totals = await readDailyTotals(tx, callerId, day);
    const retryAfter = secondsUntilNextUtcDay(at);
    if (maxRuns !== null && totals.runs >= maxRuns) {
      throw new RateLimitedError(`caller used its ${maxRuns} runs for today (UTC)`, retryAfter);
    }
    if (maxTokens !== null && totals.tokens >= maxTokens) {
      throw new RateLimitedError(`caller used its ${maxTokens} tokens for today (UTC)`, retryAfter);
    }
    if (maxCost !== null && totals.costUsd >= maxCost) {
      throw new RateLimitedError(`caller used its $${maxCost} for today (UTC)`, retryAfter);
    }
    // What is left of the day is held by runs still in progress.
    throw new RateLimitedError(
      "caller's runs in progress hold what is left of its daily budget",
      concurrencyRetryAfterSeconds,
    );
  }
  if (maxTokens === null && maxCost === null) return undefined;
  // The row now holds this run's share too; what the day left before it is the run's at most.
  const left = (limit: number, spent: number, reservedNow: number, held: number) =>
    Math.max(0, Math.min(held, limit - spent - (reservedNow - held)));
  return {
    day,
    ...(maxTokens !== null
      ? {
          tokens: left(maxTokens, Number(row.tokens), Number(row.reserved_tokens), heldTokens),
          heldTokens,
        }
      : {}),
    ...(maxCost !== null
      ? {
          costUsd: left(maxCost, Number(row.cost_usd), Number(row.reserved_cost_usd), heldCost),
          heldCostUsd: heldCost,
        }
      : {}),
  };
}

/**
 * Takes a concurrency slot and the day's share for one run of `caller`, in the transaction that
 * creates it; throws RateLimitedError (rolling both back) when a limit is reached. Returns the
 * reservation to record on the run (undefined without a daily token or cost limit).
 */
export async function admitRun(
  tx: DbTransaction,
  caller: Caller,
  at: Date,
  concurrencyRetryAfterSeconds: number,
): Promise<DailyReserve | undefined> {
  const taken = await takeAdmission(tx, caller.id, at, caller);
  return judgeAdmission(tx, caller.id, at, concurrencyRetryAfterSeconds, taken);
}

export type CallerAdmission = {
  /** The caller as it stands in this transaction. */
  caller: Caller;
  /** Why the run cannot start at all (it is recorded as failed, and nothing was admitted). */
  failure?: RunError;
  reserve?: DailyReserve;
};

/**
 * Re-reads the caller in the run's transaction (revoked or deleted since it authenticated:
 * UnauthenticatedError) and admits its run, in one round trip: the admission is taken for the
 * caller as it authenticated (`expected`), pipelined with the re-read. When the re-read shows the
 * caller changed meanwhile (another version), or its run cannot start, what was taken is given
 * back in the same transaction and the caller as re-read decides, as if read first.
 */
export async function readCallerAndAdmit(
  tx: DbTransaction,
  input: {
    expected: Caller;
    at: Date;
    checkStartable: (caller: Caller) => { error: RunError } | object;
    concurrencyRetryAfterSeconds: number;
  },
): Promise<CallerAdmission> {
  const { expected, at } = input;
  const speculate = !isCallerRevoked(expected) && !("error" in input.checkStartable(expected));
  const reading = readCaller(tx, expected.id);
  const taking = speculate ? takeAdmission(tx, expected.id, at, expected) : undefined;
  const [caller, taken] = await Promise.all([reading, taking]);
  if (!caller || isCallerRevoked(caller)) {
    throw new UnauthenticatedError("the caller is unknown or revoked");
  }
  const startable = input.checkStartable(caller);
  const failure = "error" in startable ? startable.error : undefined;
  if (taken && !failure && caller.version === expected.version) {
    const reserve = await judgeAdmission(
      tx,
      caller.id,
      at,
      input.concurrencyRetryAfterSeconds,
      taken,
    );
    return { caller, ...(reserve ? { reserve } : {}) };
  }
  if (taken) await undoAdmission(tx, caller.id, taken);
  if (failure) return { caller, failure };
  const reserve = await admitRun(tx, caller, at, input.concurrencyRetryAfterSeconds);
  return { caller, ...(reserve ? { reserve } : {}) };
}

function limitOf(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : noLimit;
}
