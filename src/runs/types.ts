// The contract between the surfaces that start runs (the A2A adapter in src/a2a/, the webhook
// routes) and the run engine (src/runs/). A surface authenticates the caller, then asks the engine
// for a run; the engine computes the effective tool set, enforces budgets and concurrency, runs
// the AI SDK loop, records everything in Postgres, and reports progress to an observer.
import type { ModelMessage } from "ai";
import type { SQL } from "drizzle-orm";
import type { Caller, RunError, RunStatus } from "../db/schema.ts";
import type { RunEvent } from "../domain/run.ts";

/** A write as data: one statement with its values bound, for the engine to send in its transaction. */
export type RunWrite = SQL;

/** The webhook delivery a run starts for (StartRunRequest.delivery). */
export type DeliveryClaim =
  /** A delivery as it arrived: claimed once by its id and its body's digest. */
  | {
      kind: "fire";
      callerName: string;
      deliveryId?: string | undefined;
      event?: string | undefined;
      bodySha256: string;
      bytes: number;
      /** How long a body already seen from this caller counts as a replay. */
      bodyWindowMs?: number | undefined;
    }
  /** The delivery of an earlier run that failed, moved to the new run (`runs retry`). */
  | { kind: "retry"; callerName: string; retryOf: string };

export type StartRunRequest = {
  caller: Caller;
  origin: "a2a" | "webhook";
  /** The conversation so far, ending with the caller's new user message. */
  messages: ModelMessage[];
  /** A2A task and context the run answers; absent for webhooks. */
  a2a?: { taskId: string; contextId: string };
  /**
   * The request's own rows, written with the run row in the transaction that creates it: a pure
   * function from the new run's id to statements with their values bound (it writes nothing
   * itself). They travel with the run's statements and the COMMIT behind them; one that fails
   * rolls the run back. The A2A bridge writes its new task here.
   */
  atStart?: (runId: string) => readonly RunWrite[];
  /**
   * A webhook delivery the run is for, claimed in the transaction that creates the run, so a
   * delivery is claimed exactly when a run exists for it (src/services/runs/delivery-claim.ts).
   * A delivery already taken refuses the start with DeliveryTakenError.
   */
  delivery?: DeliveryClaim;
  /**
   * The request's writes for the run's end: a pure function from that end to statements with
   * their values bound, sent behind the end's own statement in the transaction that records it,
   * so they commit exactly when the end does (a run another instance ended first rolls them
   * back). Used for a terminal end recorded by the segment this request started; not for a park
   * or a wait for input (a resumed run's end comes with the answer's own `atEnd`, or without a
   * request at all). The A2A bridge writes its task's end here.
   */
  atEnd?: (end: RunEnd) => readonly RunWrite[];
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
  /** As for StartRunRequest: the end of the run, once resumed, with the request's writes. */
  atEnd?: StartRunRequest["atEnd"];
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
  /** When a terminal end was recorded (the instant `atEnd` was given). */
  endedAt?: Date;
  /** True when this instance recorded the end with the request's `atEnd` writes beside it. */
  endWritten?: true;
};

/** How a run ended, as its outcome will tell it, and when its end was recorded. */
export type RunEnd = Pick<RunOutcome, "runId" | "status" | "text" | "error"> & { endedAt: Date };

export type RunHandle = {
  runId: string;
  /** The earlier run whose delivery this run took over, when its `delivery` was one retried. */
  retryOf?: string;
  /** Resolves when the run ends or parks; never rejects (failures are an outcome). */
  outcome: Promise<RunOutcome>;
};

/**
 * A run an answer claimed (`answerInput`): it is this caller's and working again, but it goes on
 * only once the request that answered calls `resume` — when whatever records the answer beside
 * the run (the A2A task's history) has done so, so the run's end can never be written before it.
 * A stop (cancel, revocation, deadline, shutdown) lets it go on too, to record why it ended: a
 * request that drops its claim cancels the run.
 */
export type AnsweredRun = RunHandle & { resume(): void };

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
   * The run waits for `resume` (AnsweredRun).
   */
  answerInput(
    request: AnswerRunInputRequest,
    onEvent?: (event: RunEvent) => void,
  ): Promise<AnsweredRun>;
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
