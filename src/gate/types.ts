// The shapes the gate works with: a call as the model made it, how a call's row is written, what
// the gate needs from the run (BatchDeps), and what a batch comes back as.
import type { ToolResultPart } from "ai";
import type { QueuedApproval, ToolCallDecisionRecord, ToolCallStatus } from "../db/schema.ts";
import type { HeldCall, RunEvent } from "../domain/run.ts";
import type { Logger } from "../log.ts";
import type { ToolDescriptor } from "../policy/tools.ts";
import type { Redactor } from "../sandbox/redact.ts";
import type { CallOwner, StageEvent, ToolImplementation } from "../tools/types.ts";
import type { RunControlsHolder } from "./controls.ts";
import type { CallDecisionOutcome, DecisionDeps } from "./decide.ts";

/** A tool call as the model made it. `input` is parsed JSON, or the raw text when unparsable. */
export type ModelToolCall = {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly input: unknown;
  readonly unparsable: boolean;
};

/** How a tool call row is opened, moved on and closed (src/runs/run-state.ts writes them). */
export type ToolCallRecorder = {
  open(rows: readonly OpenedCall[]): Promise<void>;
  start(recordId: string): Promise<void>;
  finish(recordId: string, end: CallEnd): Promise<void>;
  /** One stage of a declared command call: its own audit event. */
  stage?(recordId: string, event: StageEvent): Promise<void>;
};

export type OpenedCall = {
  readonly recordId: string;
  /** As the model named it (cut to 128 characters for a refused name). */
  readonly tool: string;
  readonly argsDigest: string;
  readonly status: ToolCallStatus;
  readonly code?: string;
  readonly decision?: ToolCallDecisionRecord;
};

export type CallEnd = {
  readonly status: ToolCallStatus;
  readonly code?: string;
  readonly truncated?: boolean;
  /** The name that actually ran, when it differs from the one called (a hidden half). */
  readonly ran?: string;
  /** Replaces the decision recorded when the call was opened (a redirect out of the grants). */
  readonly decision?: ToolCallDecisionRecord;
};

export type BatchDeps = {
  /** Policy, set, allowlists, overrides, grants: swapped between steps when the caller narrows. */
  readonly controls: RunControlsHolder;
  readonly tools: ReadonlyMap<string, ToolImplementation>;
  /** The classifier and the declared command tools, for deciding each call. */
  readonly decide?: Omit<DecisionDeps, "controls">;
  /** Every secret peergate holds, replaced in what the model reads back. */
  readonly redactor?: Redactor;
  readonly signal: AbortSignal;
  readonly workspace: string;
  /** Whose calls these are: stateful tools (MCP servers) keep state per caller or run by it. */
  readonly owner: CallOwner;
  readonly now: () => Date;
  readonly recorder: ToolCallRecorder;
  readonly emit: (event: RunEvent) => void;
  readonly logger: Logger;
  /** A unique row id for the model's call id (models may reuse ids across steps). */
  readonly takeRecordId: (toolCallId: string) => string;
  readonly maxConcurrency: number;
  readonly defaultTimeoutMs: number;
  /** How long a stopped or timed-out tool gets to settle before it is left behind. */
  readonly stopGraceMs: number;
};

export type IndexedResult = { readonly index: number; readonly part: ToolResultPart };
export type IndexedApproval = QueuedApproval & { readonly index: number };

export type BatchOutcome = {
  readonly results: IndexedResult[];
  /** Calls waiting for an operator, in call order (empty unless the run must park). */
  readonly approvals: IndexedApproval[];
  /** Calls the policy let run, held until every approval of the batch is answered. */
  readonly held: HeldCall[];
  /** The run was stopped: every call has a result, approvals included (not started). */
  readonly stopped: boolean;
};

export type ApprovalDecision =
  | { readonly approved: true }
  | { readonly approved: false; readonly reason?: string };

export type { CallRef } from "./results.ts";

/** One call past its checks, with its decision (src/gate/plan.ts). */
export type CallPlan = {
  index: number;
  call: ModelToolCall;
  recordId: string;
  tool: ToolDescriptor;
  impl: ToolImplementation;
  args: unknown;
  decided: CallDecisionOutcome;
  /**
   * A chain or script call the policy would park: it runs, and each stage outside the allowlist
   * asks on its own (`park`) or is declined (nobody there).
   */
  stages?: { readonly park: boolean };
};

/** `run`: runs now; `propose`: a two-phase tool's first half; `approve`: parks before running. */
export type RunnablePlan = CallPlan & { kind: "run" | "propose" };
export type Planned =
  | { kind: "done"; index: number; part: ToolResultPart }
  | RunnablePlan
  | (CallPlan & { kind: "approve" });
