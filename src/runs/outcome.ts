// How a segment's end becomes a run's recorded end: pure functions, no database, no clock. A stop
// from outside (cancel, revocation, deadline, shutdown) wins over whatever the loop was doing when
// it came, except a completion or a park that already happened.
import type { ModelMessage } from "ai";
import type { CallerBudgets, Run, RunBudgetLimits, RunError, RunStatus } from "../db/schema.ts";
import type { StopReason } from "./active-runs.ts";
import { describeBudgetExceeded } from "./budgets.ts";
import type { SegmentEnd } from "./run-loop.ts";
import type { RunOutcome } from "./types.ts";

/** A run that settled outside the handle `start()` returned (resumed, expired, recovered …). */
export type SettledRun = {
  readonly runId: string;
  readonly callerId: string;
  readonly origin: Run["origin"];
  readonly a2a?: { readonly taskId: string; readonly contextId: string };
  readonly outcome: RunOutcome;
  /** A re-parked run: the tool it now waits on. */
  readonly pendingTool?: string;
};

export type RecordedEnd = { status: RunStatus; error?: RunError; text?: string };

/** The status, error and answer a finished (not parked) segment is recorded with. */
export function mapSegmentEnd(
  end: Exclude<SegmentEnd, { kind: "parked" | "input-required" }>,
  reason: StopReason | undefined,
  budgets: { limits: RunBudgetLimits; daily: CallerBudgets["daily"] },
): RecordedEnd {
  if (end.kind === "stopped" || (reason && end.kind !== "completed")) return describeStop(reason);
  switch (end.kind) {
    case "completed":
      return { status: "completed", text: end.text };
    case "failed":
      return { status: "failed", error: end.error, ...textOf(end.text) };
    case "budget":
      return {
        status: "failed",
        error: {
          code: "budget-exceeded",
          budget: end.budget,
          message: describeBudgetExceeded(end.budget, budgets.limits, budgets.daily),
        },
        ...textOf(end.text),
      };
  }
}

function textOf(text: string | undefined): { text?: string } {
  return text === undefined ? {} : { text };
}

/** Why a stopped run ended, by who stopped it. */
export function describeStop(reason: StopReason | undefined): {
  status: RunStatus;
  error: RunError;
} {
  switch (reason?.kind) {
    case "cancel":
      return { status: "canceled", error: { code: "canceled", message: reason.message } };
    case "revoked":
      return { status: "revoked", error: { code: "caller-revoked", message: reason.message } };
    case "deadline":
      return {
        status: "failed",
        error: { code: "budget-exceeded", budget: "durationMs", message: reason.message },
      };
    default:
      return {
        status: "interrupted",
        error: {
          code: "shutdown",
          message: reason?.message ?? "the run was stopped when its instance shut down",
        },
      };
  }
}

/** The outcome a stored run reports. */
export function outcomeOf(run: Run): RunOutcome {
  const text = (run.result as { text?: unknown } | null)?.text;
  return {
    runId: run.id,
    status: run.status,
    ...(typeof text === "string" ? { text } : {}),
    ...(run.error ? { error: run.error } : {}),
    messages: run.messages as ModelMessage[],
    ...(run.finishedAt ? { endedAt: run.finishedAt } : {}),
  };
}

export function settledFromRun(run: Run, outcome: RunOutcome, pendingTool?: string): SettledRun {
  return {
    runId: run.id,
    callerId: run.callerId,
    origin: run.origin,
    ...(run.a2aTaskId && run.a2aContextId
      ? { a2a: { taskId: run.a2aTaskId, contextId: run.a2aContextId } }
      : {}),
    outcome,
    ...(pendingTool ? { pendingTool } : {}),
  };
}

export function expiredError(run: Pick<Run, "parkedUntil" | "status">): RunError {
  const what =
    run.status === "input-required" ? "no answer came from the caller" : "no operator answered";
  return {
    code: "expired",
    message: `${what} before ${run.parkedUntil?.toISOString() ?? "the deadline"}`,
  };
}
