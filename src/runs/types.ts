// The contract between the surfaces that start runs (the A2A adapter in src/a2a/, the webhook
// routes) and the run engine (src/runs/). A surface authenticates the caller, then asks the engine
// for a run; the engine computes the effective tool set, enforces budgets and concurrency, runs
// the AI SDK loop, records everything in Postgres, and reports progress to an observer.
import type { ModelMessage } from "ai";
import type { DbTransaction } from "../db/client.ts";
import type { Caller, RunError, RunStatus } from "../db/schema.ts";
import type { RunEvent } from "../domain/run.ts";

export type StartRunRequest = {
  caller: Caller;
  origin: "a2a" | "webhook";
  /** The conversation so far, ending with the caller's new user message. */
  messages: ModelMessage[];
  /** A2A task and context the run answers; absent for webhooks. */
  a2a?: { taskId: string; contextId: string };
  /**
   * Runs inside the transaction that creates the run row, before the run starts; throwing aborts
   * the start and rolls the row back. Webhooks claim their delivery here, so a delivery is claimed
   * exactly when a run exists for it.
   */
  inCreateTransaction?: (tx: DbTransaction, runId: string) => Promise<void>;
  /**
   * How many statements `inCreateTransaction` sends, when it sends them all without waiting for
   * an answer (one independent write, say): the transaction's COMMIT then follows them in the same
   * round trip (src/db/pipelined-transactions.ts). Leave it out for a hook that reads or decides.
   */
  inCreateTransactionStatements?: number;
  /**
   * Runs inside the transaction that records the run's end (`finishRun`), with that end, right
   * after the end's statement was sent: it sends its own writes without waiting (they travel in
   * the same round trip) and they commit exactly when the end does — a run another instance ended
   * first rolls them back. Returns what to do once the end committed. Not called for a run that
   * parks or waits for input, nor after it resumes (a new request then).
   */
  inFinishTransaction?: (tx: DbTransaction, end: RunEnd) => Promise<(() => void) | undefined>;
  /**
   * False when nobody reads the answer as it is written (a blocking A2A `SendMessage`): the model
   * is then called without streaming, which costs less, and the text arrives in one delta per
   * step. Default true.
   */
  stream?: boolean;
};

/** The caller's answer to the question a run waits on (`input-required`). */
export type AnswerRunInputRequest = {
  /** Must be the caller that started the run; any other reads as no such run. */
  caller: Caller;
  runId: string;
  answer: string;
  /** As for StartRunRequest. */
  stream?: boolean;
};

// The run's events are domain words (src/domain/run.ts): the gate tells them too.
export type { RunEvent };

export type RunOutcome = {
  runId: string;
  /**
   * Terminal, `parked` when the run waits for an operator, or `input-required` when it waits for
   * its caller's answer (then `text` is the question).
   */
  status: RunStatus;
  /** The model's final answer, when it produced one. */
  text?: string;
  error?: RunError;
  /** The full conversation after the run, for multi-turn continuation. */
  messages: ModelMessage[];
};

/** How a run ended, as its outcome will tell it. */
export type RunEnd = Pick<RunOutcome, "runId" | "status" | "text" | "error">;

export type RunHandle = {
  runId: string;
  /** Resolves when the run ends or parks; never rejects (failures are an outcome). */
  outcome: Promise<RunOutcome>;
};

export type RunEngine = {
  /**
   * Creates the run in Postgres and starts it. Throws RateLimitedError (429 + Retry-After) past
   * the caller's concurrent-run or daily limits, before anything is created; also before anything
   * is created: UnauthenticatedError when the caller was revoked meanwhile, ValidationError for
   * no messages or a `system` message (a caller cannot add instructions), UnavailableError while
   * the engine shuts down. With no model configured the run is created failed (`no-model`).
   */
  start(request: StartRunRequest, onEvent?: (event: RunEvent) => void): Promise<RunHandle>;
  /**
   * Resumes a run waiting for its caller's answer, here. Throws NotFoundError for a run that does
   * not exist or is another caller's, ConflictError for one not waiting for input (or closed
   * because its window passed or its caller was revoked), UnavailableError while shutting down.
   */
  answerInput(
    request: AnswerRunInputRequest,
    onEvent?: (event: RunEvent) => void,
  ): Promise<RunHandle>;
  /** Stops a run of this caller (cancel). False when it is not running on any instance. */
  cancel(runId: string, reason: string): Promise<boolean>;
};

/** What one segment of a run did, told when it ends on this instance (a run start or a resume). */
export type SegmentEnded = {
  readonly runId: string;
  readonly callerId: string;
  readonly origin: string;
  /** How the segment left the run: terminal, parked or input-required. */
  readonly status: RunStatus;
  readonly resumed: boolean;
  readonly model: string | undefined;
  /** Spent in this segment (the classifier's spend is the caller's, not the run's). */
  readonly tokens: number;
  readonly costUsd: number;
  readonly durationMs: number;
};

/**
 * The instance's tallies of what its runs do, kept in process (src/core.ts joins them to
 * /metrics): told where the events happen, so a scrape reads memory, not the database.
 */
export type RunMeter = {
  segmentEnded(ended: SegmentEnded): void;
  /** A tool call's record given a status other than running (refused, parked, completed …). */
  toolCallRecorded(status: string, code: string | undefined): void;
};

export const noRunMeter: RunMeter = { segmentEnded() {}, toolCallRecorded() {} };
