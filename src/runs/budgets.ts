// Budgets while a run works (DESIGN §5). A segment starts with one meter per limit that applies:
// the run's own (what earlier segments left of tokens, cost, steps) and the caller's daily totals
// (what today left, read from Postgres at the segment's start, and no more than the share of the
// day admission reserved for this run, so concurrent runs and instances cannot overspend it).
// Every model step charges every meter; a meter at or below zero stops the run before its next
// step, and a step's output is capped (maxOutputTokens) so one step cannot overshoot by more than
// its input. Wall time is a timer for what is left of `durationMs`, aborting the model call and
// every tool in flight.
import type { CallerBudgets, RunBudgetLimits, RunBudgetUsed } from "../db/schema.ts";
import type { BudgetName } from "../domain/run.ts";
import type { ModelPrice } from "./prices.ts";

type Meter = {
  readonly name: BudgetName;
  readonly measure: "steps" | "tokens" | "costUsd";
  readonly limit: number;
  remaining: number;
};

export type DailyTotals = { tokens: number; costUsd: number; runs: number };

export const zeroUsage: RunBudgetUsed = { tokens: 0, costUsd: 0, durationMs: 0, steps: 0 };

/** The per-run limits a caller's budgets set (daily totals and concurrency are not per run). */
export function readRunLimits(budgets: CallerBudgets): RunBudgetLimits {
  const limits: RunBudgetLimits = {};
  if (isLimit(budgets.tokens)) limits.tokens = budgets.tokens;
  if (isLimit(budgets.costUsd)) limits.costUsd = budgets.costUsd;
  if (isLimit(budgets.durationMs)) limits.durationMs = budgets.durationMs;
  if (isLimit(budgets.steps)) limits.steps = budgets.steps;
  return limits;
}

function isLimit(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}

/** True when the caller has any cost budget, so an unknown price must refuse the run. */
export function hasCostBudget(limits: RunBudgetLimits, budgets: CallerBudgets): boolean {
  return isLimit(limits.costUsd) || isLimit(budgets.daily?.costUsd);
}

export type BudgetMeters = {
  /** The first budget already used up, if any (checked before each model step). */
  exhausted(): BudgetName | undefined;
  /** The first budget a charge took below zero, if any (checked after each step). */
  exceeded(): BudgetName | undefined;
  charge(delta: { steps: number; tokens: number; costUsd: number }): void;
  /** The most output tokens the next step may produce without passing a budget. */
  maxOutputTokens(price: ModelPrice | undefined): number | undefined;
  /** Milliseconds of wall time left, or undefined without a duration budget. */
  readonly remainingMs: number | undefined;
  /** Whether a token or cost budget is being metered (then usage must be known). */
  readonly metersUsage: boolean;
};

export function createBudgetMeters(input: {
  limits: RunBudgetLimits;
  used: RunBudgetUsed;
  daily: CallerBudgets["daily"];
  dailyUsed: DailyTotals;
}): BudgetMeters {
  const { limits, used, daily, dailyUsed } = input;
  const meters: Meter[] = [];
  const add = (name: BudgetName, measure: Meter["measure"], limit: number, spent: number) =>
    meters.push({ name, measure, limit, remaining: limit - spent });
  if (isLimit(limits.steps)) add("steps", "steps", limits.steps, used.steps);
  if (isLimit(limits.tokens)) add("tokens", "tokens", limits.tokens, used.tokens);
  if (isLimit(limits.costUsd)) add("costUsd", "costUsd", limits.costUsd, used.costUsd);
  // A run admitted with a share of the day (src/runs/admission.ts) may spend that share and no
  // more, whatever the totals read at the segment's start still show as left.
  const reserve = limits.dailyReserve;
  const addDaily = (
    name: "daily.tokens" | "daily.costUsd",
    measure: "tokens" | "costUsd",
    limit: number,
  ) => {
    add(name, measure, limit, dailyUsed[measure]);
    const granted = reserve?.[measure];
    const meter = meters.at(-1);
    if (meter && isLimit(granted)) {
      meter.remaining = Math.min(meter.remaining, granted - used[measure]);
    }
  };
  if (isLimit(daily?.tokens)) addDaily("daily.tokens", "tokens", daily.tokens);
  if (isLimit(daily?.costUsd)) addDaily("daily.costUsd", "costUsd", daily.costUsd);
  const remainingMs = isLimit(limits.durationMs) ? limits.durationMs - used.durationMs : undefined;

  return {
    exhausted: () => meters.find((m) => m.remaining <= 0)?.name,
    exceeded: () => meters.find((m) => m.remaining < 0)?.name,
    charge(delta) {
      for (const meter of meters) meter.remaining -= delta[meter.measure];
    },
    maxOutputTokens(price) {
      let cap = Number.POSITIVE_INFINITY;
      for (const meter of meters) {
        if (meter.measure === "tokens") cap = Math.min(cap, meter.remaining);
        if (meter.measure === "costUsd" && price && price.outputUsdPerMillionTokens > 0) {
          cap = Math.min(cap, (meter.remaining * 1_000_000) / price.outputUsdPerMillionTokens);
        }
      }
      return Number.isFinite(cap) ? Math.max(1, Math.floor(cap)) : undefined;
    },
    remainingMs,
    metersUsage: meters.some((m) => m.measure !== "steps"),
  };
}

const describeBudget: Readonly<Record<BudgetName, (limit: number) => string>> = {
  steps: (n) => `steps (${n} model steps per run)`,
  tokens: (n) => `tokens (${n} tokens per run)`,
  costUsd: (n) => `costUsd ($${n} per run)`,
  durationMs: (n) => `durationMs (${n} ms of wall time per run)`,
  "daily.tokens": (n) => `daily.tokens (${n} tokens per day)`,
  "daily.costUsd": (n) => `daily.costUsd ($${n} per day)`,
};

/** The sentence a run that hit `name` ends with. */
export function describeBudgetExceeded(
  name: BudgetName,
  limits: RunBudgetLimits,
  daily: CallerBudgets["daily"],
): string {
  const limit =
    name === "daily.tokens"
      ? daily?.tokens
      : name === "daily.costUsd"
        ? daily?.costUsd
        : limits[name];
  return `budget exceeded: ${describeBudget[name](limit ?? 0)}`;
}

/** Seconds until the next UTC midnight, when daily totals start again (at least 1). */
export function secondsUntilNextUtcDay(now: Date): number {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

/** The UTC day a usage belongs to, as `daily_usage.day` stores it. */
export function formatUtcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}
