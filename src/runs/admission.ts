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
import { type DbTransaction, selectRows } from "../db/client.ts";
import type { Caller, RunBudgetLimits } from "../db/schema.ts";
import { RateLimitedError, ValidationError } from "../errors.ts";
import { formatUtcDay, secondsUntilNextUtcDay } from "./budgets.ts";
import { readDailyTotals } from "./run-queries.ts";

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
  const budgets = caller.budgets;
  const day = formatUtcDay(at);
  const concurrent = limitOf(budgets.concurrentRuns);
  const daily = budgets.daily ?? {};
  const maxRuns = limitOf(daily.runs);
  const maxTokens = limitOf(daily.tokens);
  const maxCost = limitOf(daily.costUsd);
  const share = (dayLimit: number | null, runCap: number | null) =>
    dayLimit === null ? null : (runCap ?? (concurrent !== null ? dayLimit / concurrent : dayLimit));
  const tokenShare = share(maxTokens, limitOf(budgets.tokens));
  const costShare = share(maxCost, limitOf(budgets.costUsd));

  const heldTokens = tokenShare === null ? 0 : Math.ceil(tokenShare);
  const heldCost = costShare === null ? 0 : Math.round(costShare * 1e6) / 1e6;

  // One statement: the slot row, then the day row (the day's update waits on the slot, so both
  // are locked in the order every other path locks them, src/runs/run-state.ts). The day's
  // condition reads the totals as they are when the row is locked, after any concurrent
  // admission committed.
  const [row] = await selectRows<AdmitRow>(
    tx,
    sql`with slot as (
        insert into caller_slots as s (caller_id, running) values (${caller.id}, 1)
        on conflict (caller_id) do update set running = s.running + 1
        where ${concurrent}::int is null or s.running < ${concurrent}::int
        returning s.running
      ),
      taken as (
        insert into daily_usage as d (caller_id, day, runs, reserved_tokens, reserved_cost_usd)
        select ${caller.id}, ${day}, 1, ${heldTokens}::bigint, ${heldCost}::numeric
        where exists (select 1 from slot)
        on conflict (caller_id, day) do update set
          runs = d.runs + 1,
          reserved_tokens = d.reserved_tokens + ${heldTokens}::bigint,
          reserved_cost_usd = d.reserved_cost_usd + ${heldCost}::numeric
        where (${maxRuns}::int is null or d.runs < ${maxRuns}::int)
          and (${maxTokens}::bigint is null or d.tokens + d.reserved_tokens < ${maxTokens}::bigint)
          and (${maxCost}::numeric is null
            or d.cost_usd + d.reserved_cost_usd < ${maxCost}::numeric)
        returning d.tokens, d.cost_usd, d.reserved_tokens, d.reserved_cost_usd
      )
      select exists (select 1 from slot) as slot, t.tokens, t.cost_usd, t.reserved_tokens,
        t.reserved_cost_usd
      from (select 1) one left join taken t on true`,
  );
  if (!row?.slot) {
    throw new RateLimitedError(
      `caller has ${concurrent} runs in progress; its limit is ${concurrent}`,
      concurrencyRetryAfterSeconds,
    );
  }
  if (row.tokens === null) {
    // Refused: the transaction rolls back; read why (in it, as the totals stand now).
    const totals = await readDailyTotals(tx, caller.id, day);
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
function limitOf(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : noLimit;
}
