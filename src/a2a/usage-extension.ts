// The usage extension (issue 25): a caller that activates `https://peergate.dev/ext/usage/v1`
// with the `A2A-Extensions` request header gets, in the metadata of every task it is answered
// (under the extension's URI), what the task's run spent — tokens, cost, steps, time — and what
// is left of its own daily budgets, counting the runs that have ended (settled). The answer's
// `A2A-Extensions` header names the extension back, as A2A's extension rules ask.
//
// Only ever the caller's own: the run is read by its id AND the caller's id, the day by the
// caller's id, and the limits from the caller row the request authenticated as. A task of another
// caller never gets this far (it is "not found" before), and nothing here names another caller.
import type { ServerCallContext } from "@a2a-js/sdk/server";
import { and, eq } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { dailyUsage, runs } from "../db/schema.ts";
import type { Caller } from "../domain/caller.ts";

export const usageExtensionUri = "https://peergate.dev/ext/usage/v1";

/** The card's entry (capabilities.extensions). */
export const usageExtensionCard = {
  uri: usageExtensionUri,
  description:
    "Usage of the caller's own task: tokens, cost, steps and time of its run, and what is left of the caller's daily budgets. Activate with the A2A-Extensions request header; the task's metadata carries it under this URI.",
  required: false,
  params: undefined,
};

/** The extension's object in a task's metadata. */
export type TaskUsage = {
  /** The run's model tokens (input and output together, as peergate meters them). */
  tokens: number;
  costUsd: number;
  steps: number;
  /** Wall time the run's segments took, in milliseconds. */
  durationMs: number;
  /** The run's status when read (`completed`, `working`, `parked` …). */
  runStatus: string;
  /** The caller's own day (UTC), settled: what ended runs spent. */
  day: {
    date: string;
    used: { tokens: number; costUsd: number; runs: number };
    /** What the caller's daily limits leave; a limit the caller does not have is absent. */
    remaining: { tokens?: number; costUsd?: number; runs?: number };
  };
};

/** Activates the extension on `context` when `header` (A2A-Extensions, as sent) names it. */
export function activateUsageExtension(
  context: ServerCallContext,
  header: string | undefined,
): void {
  const requested = (header ?? "")
    .split(",")
    .map((uri) => uri.trim())
    .filter((uri) => uri !== "");
  if (requested.includes(usageExtensionUri)) context.addActivatedExtension(usageExtensionUri);
}

export function isUsageActive(context: ServerCallContext): boolean {
  return (context.activatedExtensions ?? []).includes(usageExtensionUri);
}

export type UsageReader = (caller: Caller, runId: string) => Promise<TaskUsage | undefined>;

export function createUsageReader(db: Db, now: () => Date = () => new Date()): UsageReader {
  return async (caller, runId) => {
    const date = now().toISOString().slice(0, 10);
    const [runRows, dayRows] = await Promise.all([
      db
        .select({ used: runs.budgetUsed, status: runs.status })
        .from(runs)
        .where(and(eq(runs.id, runId), eq(runs.callerId, caller.id)))
        .limit(1),
      db
        .select({ tokens: dailyUsage.tokens, costUsd: dailyUsage.costUsd, runs: dailyUsage.runs })
        .from(dailyUsage)
        .where(and(eq(dailyUsage.callerId, caller.id), eq(dailyUsage.day, date)))
        .limit(1),
    ]);
    const run = runRows[0];
    if (!run) return undefined;
    const day = dayRows[0];
    const used = {
      tokens: Number(day?.tokens ?? 0),
      costUsd: Number(day?.costUsd ?? 0),
      runs: Number(day?.runs ?? 0),
    };
    const limits = caller.budgets.daily ?? {};
    const remaining: TaskUsage["day"]["remaining"] = {};
    if (typeof limits.tokens === "number")
      remaining.tokens = Math.max(0, limits.tokens - used.tokens);
    if (typeof limits.costUsd === "number") {
      remaining.costUsd = Math.max(0, round6(limits.costUsd - used.costUsd));
    }
    if (typeof limits.runs === "number") remaining.runs = Math.max(0, limits.runs - used.runs);
    return {
      tokens: run.used.tokens,
      costUsd: round6(run.used.costUsd),
      steps: run.used.steps,
      durationMs: run.used.durationMs,
      runStatus: run.status,
      day: { date, used, remaining },
    };
  };
}

function round6(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}
