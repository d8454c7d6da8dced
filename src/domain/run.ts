// A run, in the project's own words: where it came from, the states it moves through, what it
// may spend, and what a parked run waits on. src/db/schema.ts types the `runs` and `tool_calls`
// columns with these; nothing here has a side effect.

export const runOrigins = ["a2a", "webhook"] as const;
export type RunOrigin = (typeof runOrigins)[number];

export const runStatuses = [
  "submitted",
  "working",
  "parked",
  "input-required",
  "completed",
  "failed",
  "canceled",
  "rejected",
  "expired",
  "interrupted",
  "revoked",
] as const;
export type RunStatus = (typeof runStatuses)[number];

/**
 * The two states in which a run holds no instance and waits for someone: `parked` waits for an
 * operator to answer a pending call, `input-required` for its caller to answer the question the
 * model asked with `ask_caller`. Both end without resuming the same ways (cancel, revocation,
 * expiry at `parkedUntil`); only the caller who started the run can answer `input-required`, only
 * an operator `parked`.
 *
 *   working → input-required   the model called ask_caller alone in a step (src/runs/run-loop.ts)
 *   input-required → working   the caller answered (src/services/runs/answer-run-input.ts)
 *   input-required → canceled | rejected | expired | revoked   as for a parked run
 *
 * `revoked` is how every run of a revoked caller ends, whatever state it was in: a working run
 * stops (within one heartbeat, on whichever instance runs it), a waiting one is closed by the
 * revocation itself (src/services/revoke-caller.ts).
 */
export const waitingStatuses = ["parked", "input-required"] as const satisfies readonly RunStatus[];
export type WaitingStatus = (typeof waitingStatuses)[number];

export function isWaitingStatus(status: RunStatus): status is WaitingStatus {
  return (waitingStatuses as readonly RunStatus[]).includes(status);
}

/** The question an `input-required` run waits on, and the model's call it answers. */
export type PendingInput = {
  /** The tool call row (unique within the run). */
  callId: string;
  /** The model's id and name for the call, for the tool result the model reads. */
  toolCallId: string;
  toolName: string;
  question: string;
  askedAt: string;
};

/**
 * `running` is the in-flight state; a crash leaves it there for recovery to mark `interrupted`.
 * `parked`: waits for an operator (it has not run); `rejected`: an operator turned it down.
 * `refused`: the executor's gate refused it (outside the run's set, a hidden half).
 */
export const toolCallStatuses = [
  "running",
  "completed",
  "interrupted",
  "not-started",
  "refused",
  "failed",
  "parked",
  "rejected",
  "declined",
] as const;
export type ToolCallStatus = (typeof toolCallStatuses)[number];

export type RunBudgetLimits = {
  tokens?: number;
  costUsd?: number;
  durationMs?: number;
  steps?: number;
  /**
   * What admission reserved of the caller's daily token and cost totals for this run (on `day`,
   * UTC): the run's daily meter never grants more, and its end returns the reservation.
   */
  dailyReserve?: {
    day: string;
    tokens?: number;
    costUsd?: number;
    /** What the day's `reserved_*` hold for the run (given back at its end). */
    heldTokens?: number;
    heldCostUsd?: number;
  };
};

export type RunBudgetUsed = { tokens: number; costUsd: number; durationMs: number; steps: number };

/** A budget a run is metered against: its own limits, and the caller's daily totals. */
export type BudgetName =
  | "steps"
  | "tokens"
  | "costUsd"
  | "durationMs"
  | "daily.tokens"
  | "daily.costUsd";

/** The one call a parked run waits on; approving must name `callId` and `argsDigest`. */
export type PendingApproval = {
  callId: string;
  /** The name that runs once approved: a plain tool, or the hidden half of a two-phase tool. */
  tool: string;
  /** SHA-256 of the canonical JSON of `args`: what approving binds to. */
  argsDigest: string;
  args: unknown;
  requestedAt: string;
  /** The tool the model called (canonical name), its risk, and what the tool said it would do. */
  calledTool?: string;
  risk?: string;
  summary?: string;
  previewDiff?: string;
  /** Why it asks: the decision's reason (a floor reason, a prompt override, the policy). */
  reason?: string;
  /**
   * A declared chain or script call stopped before one stage outside the caller's allowlist: the
   * approval is for that stage alone (its fingerprint), and the call carries on from `checkpoint`.
   */
  stage?: PendingStage;
};

/** One stage waiting for an operator (argv with declared secrets masked). */
export type PendingStage = {
  fingerprint: string;
  argv: string[];
  executable: string;
  executableSha256: string;
  /** Stages of this call approved before this one. */
  approved: string[];
  /** Where the tool stops and carries on: opaque to the engine. */
  checkpoint: { item: number; state: Record<string, unknown> };
};

/**
 * A call of a parked run's tool batch waiting for an operator (the first is `pendingApproval`).
 * `toolCallId` and `toolName` are the model's, for the result the model reads.
 */
export type QueuedApproval = PendingApproval & {
  toolCallId: string;
  toolName: string;
  runs: "tool" | "execute-half";
};

/**
 * The unfinished tool batch of a parked run: the results of the batch's other calls (AI SDK
 * tool-result parts, in call order) and the calls still waiting for an operator, first one first.
 */
export type PendingBatch = {
  results: { index: number; part: Record<string, unknown> }[];
  approvals: (QueuedApproval & { index: number })[];
  /**
   * Calls of the batch allowed to run (by the policy, or by an operator's answer) that wait until
   * no call of their batch waits for a person: a batch parks whole (src/gate/batch.ts).
   */
  held?: HeldCall[];
};

/** A call of a parked batch that runs once every approval of its batch is answered. */
export type HeldCall = QueuedApproval & {
  index: number;
  /** Who let it run: the policy when the batch was planned, or an operator's answer. */
  heldBy: "policy" | "operator";
  /** A fetch under the URL grants: every redirect hop is checked against them. */
  checkRedirects?: boolean;
  /** A chain or script call whose stages outside the allowlist ask on their own. */
  stages?: { park: boolean };
};

/**
 * Who asked a working run to stop, recorded on its row with the request (`cancel_requested_at`):
 * its caller or an operator (`cancel`), or the caller's revocation (`revoked`). The instance
 * executing the run reads it at every heartbeat and between steps.
 */
export const stopKinds = ["cancel", "revoked"] as const;
export type StopKind = (typeof stopKinds)[number];

/** Why a run ended badly; `budget` names the budget a `budget-exceeded` run hit. */
export type RunError = { code: string; message: string; budget?: string };

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Run ids are uuids; anything else names no run (and must not reach a uuid column). */
export function isUuid(text: string): boolean {
  return typeof text === "string" && uuidPattern.test(text);
}

/** Progress a surface may relay (A2A streams it as status and artifact updates). */
export type RunEvent =
  | { type: "status"; status: RunStatus; message?: string }
  /** A tool call the caller may see: only tools in its effective set are ever named. */
  | {
      type: "tool-call";
      callId: string;
      tool: string;
      state: "started" | "completed" | "failed" | "refused" | "parked";
    }
  | { type: "text-delta"; delta: string }
  /** Bounded, sanitized live output of a `stream: sanitized` declared tool. */
  | { type: "tool-progress"; callId: string; text: string };
