// Whether a caller may start a run now: its messages are acceptable and it is inside its
// concurrency and daily limits. Checked under the caller's run lock (src/runs/run-state.ts
// `lockCallerRuns`) in the transaction that creates the run, so two instances cannot both admit
// the last slot. Throws before anything is created.
import type { ModelMessage } from "ai";
import type { DbTransaction } from "../db/client.ts";
import type { Caller } from "../db/schema.ts";
import { RateLimitedError, ValidationError } from "../errors.ts";
import { formatUtcDay, secondsUntilNextUtcDay } from "./budgets.ts";
import { countActiveRuns, readDailyTotals } from "./run-queries.ts";

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

/** Concurrency and daily limits; throws RateLimitedError before anything is created. */
export async function checkLimits(
  tx: DbTransaction,
  caller: Caller,
  at: Date,
  concurrencyRetryAfterSeconds: number,
): Promise<void> {
  const budgets = caller.budgets;
  const concurrent = budgets.concurrentRuns;
  if (typeof concurrent === "number" && concurrent >= 0) {
    const running = await countActiveRuns(tx, caller.id);
    if (running >= concurrent) {
      throw new RateLimitedError(
        `caller has ${running} runs in progress; its limit is ${concurrent}`,
        concurrencyRetryAfterSeconds,
      );
    }
  }
  const daily = budgets.daily;
  if (!daily) return;
  const totals = await readDailyTotals(tx, caller.id, formatUtcDay(at));
  const retryAfter = secondsUntilNextUtcDay(at);
  if (typeof daily.runs === "number" && totals.runs >= daily.runs) {
    throw new RateLimitedError(`caller used its ${daily.runs} runs for today (UTC)`, retryAfter);
  }
  if (typeof daily.tokens === "number" && totals.tokens >= daily.tokens) {
    throw new RateLimitedError(
      `caller used its ${daily.tokens} tokens for today (UTC)`,
      retryAfter,
    );
  }
  if (typeof daily.costUsd === "number" && totals.costUsd >= daily.costUsd) {
    throw new RateLimitedError(`caller used its $${daily.costUsd} for today (UTC)`, retryAfter);
  }
}
