// The executor (DESIGN §4-5) for the tool calls of one model step, a "batch".
//
// 1. Every call is checked against the run's effective set before anything else is asked
//    (checkToolCall). A name outside the set, a hidden execute half and a name nothing implements
//    all get the same words and run nothing; the row says `refused` and the audit says why.
// 2. Arguments are validated with the tool's own schema; bad ones are a failed result.
// 3. A plain tool above the approval policy never starts: the executor raises the request itself.
//    A two-phase tool proposes first (changing nothing); its approval request is honoured only
//    when the tool is registered to make it (checkApprovalRequest). Under `auto` the hidden half
//    runs at once; otherwise the request waits for an operator.
// 4. The rest run concurrently (bounded), each with its own timeout and the run's AbortSignal.
//    A timeout is a failed result and the run goes on; a stopped run records each call as
//    completed, interrupted (it was running) or not started.
//
// Approval requests are gathered for the whole batch before the run parks, so parking never
// waits on a half-done operation; the run then parks on them one at a time, first one first.
//
// One file over 500 lines on purpose: the four steps are one guarded path through which every
// tool call passes, and reading the gate whole is how a reviewer checks nothing slips around it.
import { createHash } from "node:crypto";
import type { ToolResultPart } from "ai";
import type { z } from "zod";
import type { QueuedApproval, ToolCallDecisionRecord, ToolCallStatus } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { checkApprovalRequest, checkToolCall } from "../policy/check-tool-call.ts";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import type { ToolDescriptor } from "../policy/tools.ts";
import { digestArgs } from "../runs/args-digest.ts";
import type { RunEvent } from "../runs/types.ts";
import type { Redactor } from "../sandbox/redact.ts";
import {
  type CommandGate,
  isApprovalRequest,
  isStageParking,
  outsideUrlGrantCode,
  type StageEvent,
  type StageParking,
  type ToolCallContext,
  type ToolFailure,
  type ToolImplementation,
  type ToolResult,
  type ToolSuccess,
} from "../tools/types.ts";
import type { RunControlsHolder } from "./controls.ts";
import {
  type CallDecisionOutcome,
  type DecisionDeps,
  decideRedirect,
  decideToolCall,
  isDenied,
} from "./decide.ts";
import type { SettledCall } from "./resolve.ts";
import {
  describeToolResult,
  errorResult,
  interruptedText,
  notStartedText,
  rejectedText,
} from "./results.ts";

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
  /** The run was stopped: every call has a result, approvals included (not started). */
  readonly stopped: boolean;
};

const emptySet: EffectiveToolSet = { offered: [], names: new Map() };

/** The words for a tool the run cannot use, identical to a name that exists nowhere. */
function unavailableMessage(name: string): string {
  const check = checkToolCall(emptySet, name, "model");
  return check.allowed ? "" : check.message;
}

type CallPlan = {
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
type RunnablePlan = CallPlan & { kind: "run" | "propose" };
type Planned =
  | { kind: "done"; index: number; part: ToolResultPart }
  | RunnablePlan
  | (CallPlan & { kind: "approve" });

/** Runs the executor over one step's tool calls. Never throws for anything a tool does. */
export async function executeToolBatch(
  deps: BatchDeps,
  calls: readonly ModelToolCall[],
): Promise<BatchOutcome> {
  const planned: Planned[] = [];
  const rows: OpenedCall[] = [];
  for (const [index, call] of calls.entries()) {
    const recordId = deps.takeRecordId(call.toolCallId);
    const plan = await planCall(deps, call, index, recordId, rows);
    planned.push(plan);
  }
  await deps.recorder.open(rows);

  const results: IndexedResult[] = [];
  const approvals: IndexedApproval[] = [];
  const running: RunnablePlan[] = [];
  for (const plan of planned) {
    if (plan.kind === "done") results.push({ index: plan.index, part: plan.part });
    else if (plan.kind === "approve") approvals.push(plainApproval(deps, plan));
    else running.push(plan);
  }

  await runBounded(running, deps.maxConcurrency, async (plan) => {
    const outcome = await runPlanned(deps, plan);
    if ("approval" in outcome) approvals.push(outcome.approval);
    else results.push({ index: plan.index, part: outcome.part });
  });
  approvals.sort((a, b) => a.index - b.index);

  if (deps.signal.aborted) {
    // Nothing waits for an operator once the run is stopped: those calls never started.
    for (const approval of approvals) {
      await deps.recorder.finish(approval.callId, { status: "not-started" });
      results.push({ index: approval.index, part: errorResult(approval, notStartedText) });
    }
    return { results: sortResults(results), approvals: [], stopped: true };
  }
  for (const approval of approvals) {
    deps.emit({
      type: "tool-call",
      callId: approval.callId,
      tool: approval.calledTool ?? approval.tool,
      state: "parked",
    });
  }
  return { results: sortResults(results), approvals, stopped: false };
}

function sortResults(results: IndexedResult[]): IndexedResult[] {
  return results.sort((a, b) => a.index - b.index);
}

async function planCall(
  deps: BatchDeps,
  call: ModelToolCall,
  index: number,
  recordId: string,
  rows: OpenedCall[],
): Promise<Planned> {
  const controls = deps.controls.current;
  const ref = { toolCallId: call.toolCallId, toolName: call.toolName };
  const argsDigest = digestArgs(call.input);
  const refuse = (code: string, message: string): Planned => {
    rows.push({
      recordId,
      tool: String(call.toolName).slice(0, 128),
      argsDigest,
      status: "refused",
      code,
    });
    return { kind: "done", index, part: errorResult(ref, message) };
  };

  const check = checkToolCall(controls.set, call.toolName, "model");
  if (!check.allowed) return refuse(check.code, check.message);
  const tool = check.tool;
  // A deny override: to the model, exactly a tool that does not exist.
  if (isDenied(controls, tool.name))
    return refuse("tool-unavailable", unavailableMessage(call.toolName));
  const impl = deps.tools.get(tool.name);
  // In the set but not implemented in this process: to the model, it does not exist.
  if (impl === undefined) return refuse("not-implemented", unavailableMessage(call.toolName));

  const fail = (message: string): Planned => {
    rows.push({ recordId, tool: tool.name, argsDigest, status: "failed", code: "invalid-input" });
    return { kind: "done", index, part: errorResult(ref, message) };
  };
  if (call.unparsable) {
    return fail(`The arguments for ${tool.name} are not valid JSON; nothing was run.`);
  }
  const parsed = impl.inputSchema.safeParse(call.input);
  if (!parsed.success) {
    return fail(
      `Invalid arguments for ${tool.name}: ${describeIssues(parsed.error)}. Nothing was run.`,
    );
  }

  const twoPhase = tool.executeHalf !== undefined && impl.executeHalf !== undefined;
  const decided = await decideToolCall({ ...deps.decide, controls }, tool, parsed.data);
  const decision = decided.record;
  const plan: CallPlan = { index, call, recordId, tool, impl, args: parsed.data, decided };
  const settled = decided.settled;
  const mode = deps.decide?.commandTools?.get(tool.name)?.mode;
  if (
    (mode === "chain" || mode === "script") &&
    decided.record.rule === "policy-parks" &&
    (settled.action === "park" || settled.action === "decline")
  ) {
    // Per stage, not per call: covered stages run, each other one asks when it is reached.
    const record: ToolCallDecisionRecord = {
      ...decision,
      action: "run",
      rule: "stages",
      reason:
        `each stage outside the command allowlist asks on its own (${settled.action === "park" ? "parks" : "declined: nobody there"}): ${settled.reason}`.slice(
          0,
          2_000,
        ),
    };
    rows.push({ recordId, tool: tool.name, argsDigest, status: "not-started", decision: record });
    return {
      ...plan,
      decided: { ...decided, record },
      stages: { park: settled.action === "park" },
      kind: "run",
    };
  }
  if (settled.action === "refuse") {
    rows.push({
      recordId,
      tool: tool.name,
      argsDigest,
      status: "refused",
      code: "tool-unavailable",
      decision,
    });
    return { kind: "done", index, part: errorResult(ref, unavailableMessage(call.toolName)) };
  }
  if (settled.action === "decline") {
    rows.push({
      recordId,
      tool: tool.name,
      argsDigest,
      status: "declined",
      code: settled.rule,
      decision,
    });
    deps.emit({ type: "tool-call", callId: recordId, tool: tool.name, state: "failed" });
    return { kind: "done", index, part: errorResult(ref, settled.modelMessage) };
  }
  if (!twoPhase && settled.action === "park") {
    rows.push({ recordId, tool: tool.name, argsDigest, status: "parked", decision });
    return { ...plan, kind: "approve" };
  }
  rows.push({ recordId, tool: tool.name, argsDigest, status: "not-started", decision });
  return { ...plan, kind: twoPhase ? "propose" : "run" };
}

/** Why the call asks, for the operator (floor reasons included). */
function reasonOf(settled: SettledCall): string {
  return settled.reason.slice(0, 2_000);
}

function describeIssues(error: z.ZodError): string {
  const text = error.issues
    .slice(0, 5)
    .map((issue) => {
      const at = issue.path.length > 0 ? issue.path.map(String).join(".") : "(arguments)";
      return `${quoteUntrusted(at, 64)}: ${issue.message}`;
    })
    .join("; ");
  return text.length > 1_000 ? `${text.slice(0, 1_000)}…` : text;
}

/**
 * The arguments an approval stores and shows: a declared tool's stdin as its length and SHA-256,
 * never its text (the text stays in the conversation, where the resumed call finds it again).
 */
export function approvalArgs(args: unknown): unknown {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return args;
  const stdin = (args as { stdin?: unknown }).stdin;
  if (typeof stdin !== "string") return args;
  const bytes = Buffer.from(stdin, "utf8");
  return {
    ...args,
    stdin: { bytes: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") },
  };
}

/** A plain tool above the policy: the executor raises the request on its behalf. */
function plainApproval(deps: BatchDeps, plan: CallPlan): IndexedApproval {
  return {
    index: plan.index,
    callId: plan.recordId,
    toolCallId: plan.call.toolCallId,
    toolName: plan.call.toolName,
    tool: plan.tool.name,
    runs: "tool",
    args: approvalArgs(plan.args),
    argsDigest: digestArgs(approvalArgs(plan.args)),
    requestedAt: deps.now().toISOString(),
    calledTool: plan.tool.name,
    risk: plan.decided.record.risk ?? plan.tool.risk,
    summary: `Run ${plan.tool.name} (risk: ${plan.decided.record.risk ?? plan.tool.risk}) with the arguments shown.`,
    reason: reasonOf(plan.decided.settled),
  };
}

type RunOutcome = { part: ToolResultPart } | { approval: IndexedApproval };

async function runPlanned(deps: BatchDeps, plan: RunnablePlan): Promise<RunOutcome> {
  const ref = { toolCallId: plan.call.toolCallId, toolName: plan.call.toolName };
  if (deps.signal.aborted) {
    await deps.recorder.finish(plan.recordId, { status: "not-started" });
    return { part: errorResult(ref, notStartedText) };
  }
  await deps.recorder.start(plan.recordId);
  deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "started" });

  const first = await invokeTool(deps, plan.impl, plan.args, plan.recordId, plan.impl.timeoutMs, {
    checkRedirects: plan.decided.checkRedirects,
    ...(plan.stages === undefined
      ? {}
      : { commands: { entries: deps.controls.current.commands, park: plan.stages.park } }),
  });
  if (first.end === "returned" && isStageParking(first.result) && plan.stages?.park === true) {
    await deps.recorder.finish(plan.recordId, { status: "parked" });
    return {
      approval: {
        ...stageApproval(
          deps,
          plan.recordId,
          plan.call,
          plan.tool.name,
          plan.args,
          first.result,
          [],
        ),
        index: plan.index,
      },
    };
  }
  const left = leftTheGrants(first);
  if (left !== undefined) return redirectOutOfGrants(deps, plan, ref, left);
  if (first.end !== "returned" || !isApprovalRequest(first.result)) {
    return { part: await closeCall(deps, plan.recordId, plan.tool, ref, first) };
  }

  // An approval request: honoured only from the tool registered to make it.
  const request = first.result;
  const bound = checkApprovalRequest(
    deps.controls.current.set,
    plan.tool.name,
    request.executeToolName,
  );
  if (!bound.allowed || plan.kind !== "propose") {
    const message = bound.allowed
      ? `Tool ${quoteUntrusted(plan.tool.name)} returned an approval request it is not registered to make; nothing was run.`
      : bound.message;
    await deps.recorder.finish(plan.recordId, { status: "failed", code: "approval-not-bound" });
    deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "failed" });
    return { part: errorResult(ref, message) };
  }
  const executeArgs = request.executeArgs;
  if (plan.decided.settled.action === "run") {
    return { part: await runExecuteHalf(deps, plan, ref, request.executeToolName, executeArgs) };
  }
  await deps.recorder.finish(plan.recordId, { status: "parked" });
  return {
    approval: {
      index: plan.index,
      callId: plan.recordId,
      toolCallId: plan.call.toolCallId,
      toolName: plan.call.toolName,
      tool: request.executeToolName,
      runs: "execute-half",
      args: executeArgs,
      argsDigest: digestArgs(executeArgs),
      requestedAt: deps.now().toISOString(),
      calledTool: plan.tool.name,
      risk: plan.decided.record.risk ?? plan.tool.risk,
      summary: String(request.summary ?? "").slice(0, 2_000),
      reason: reasonOf(plan.decided.settled),
      ...(typeof request.previewDiff === "string"
        ? { previewDiff: request.previewDiff.slice(0, 64 * 1024) }
        : {}),
    },
  };
}

/** One stage waiting for an operator: the approval names the stage's fingerprint, not the call's. */
function stageApproval(
  deps: BatchDeps,
  recordId: string,
  call: { toolCallId: string; toolName: string },
  tool: string,
  args: unknown,
  parking: StageParking,
  approvedBefore: readonly string[],
): QueuedApproval {
  const { stage, checkpoint } = parking;
  return {
    callId: recordId,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    tool,
    runs: "tool",
    args,
    argsDigest: digestArgs({ args, stage: stage.fingerprint }),
    requestedAt: deps.now().toISOString(),
    calledTool: tool,
    risk: "unknown",
    summary: `Run the stage ${quoteUntrusted(stage.argv.join(" "), 500)} of ${tool} (${stage.executable}, SHA-256 ${stage.executableSha256}); this approval is for this stage only.`,
    reason: stage.reason.slice(0, 2_000),
    stage: {
      fingerprint: stage.fingerprint,
      argv: [...stage.argv],
      executable: stage.executable,
      executableSha256: stage.executableSha256,
      approved: [...approvedBefore],
      checkpoint: { item: checkpoint.item, state: checkpoint.state },
    },
  };
}

/** Auto-approved second phase: the hidden half, through the approval path's own gate. */
async function runExecuteHalf(
  deps: BatchDeps,
  plan: { recordId: string; tool: ToolDescriptor; impl: ToolImplementation },
  ref: { toolCallId: string; toolName: string },
  executeToolName: string,
  executeArgs: unknown,
): Promise<ToolResultPart> {
  const gate = checkToolCall(deps.controls.current.set, executeToolName, "approval");
  const half = plan.impl.executeHalf;
  if (!gate.allowed || gate.kind !== "execute-half" || half === undefined) {
    await deps.recorder.finish(plan.recordId, { status: "refused", code: "tool-unavailable" });
    deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "failed" });
    return errorResult(ref, unavailableMessage(executeToolName));
  }
  const parsed = half.inputSchema.safeParse(executeArgs);
  if (!parsed.success) {
    await deps.recorder.finish(plan.recordId, { status: "failed", code: "invalid-input" });
    deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "failed" });
    return errorResult(ref, `The approved call to ${plan.tool.name} had invalid arguments.`);
  }
  const outcome = await invokeTool(
    deps,
    half,
    parsed.data,
    plan.recordId,
    half.timeoutMs ?? plan.impl.timeoutMs,
  );
  return closeCall(deps, plan.recordId, plan.tool, ref, outcome, executeToolName);
}

export type ApprovalDecision =
  | { readonly approved: true }
  | { readonly approved: false; readonly reason?: string };

/**
 * Runs (or turns down) the call a parked run waited on, on whichever instance resumed it. The
 * set is the resumed run's (recomputed ceiling ∩ the set it started with), so a call the ceiling
 * no longer admits gets the same refusal as any other call outside the set.
 */
export async function answerApproval(
  deps: BatchDeps,
  approval: QueuedApproval,
  decision: ApprovalDecision,
  /** The model's own input for a call (from the conversation): a stdin the approval kept only the digest of. */
  inputOf?: (toolCallId: string) => unknown,
): Promise<{ part: ToolResultPart; stopped: boolean } | { approval: QueuedApproval }> {
  const ref = { toolCallId: approval.toolCallId, toolName: approval.toolName };
  const shown = approval.calledTool ?? approval.tool;
  if (!decision.approved && approval.stage === undefined) {
    await deps.recorder.finish(approval.callId, { status: "rejected", code: "rejected" });
    deps.emit({ type: "tool-call", callId: approval.callId, tool: shown, state: "failed" });
    return { part: errorResult(ref, rejectedText(decision.reason)), stopped: false };
  }
  if (deps.signal.aborted) {
    await deps.recorder.finish(approval.callId, { status: "not-started" });
    return { part: errorResult(ref, notStartedText), stopped: true };
  }
  const gate = checkToolCall(deps.controls.current.set, approval.tool, "approval");
  // A deny override set while the run was parked holds: the call is refused like an unknown tool.
  const denied = gate.allowed && isDenied(deps.controls.current, gate.tool.name);
  if (denied) {
    await deps.recorder.finish(approval.callId, { status: "refused", code: "tool-unavailable" });
    return { part: errorResult(ref, unavailableMessage(approval.toolName)), stopped: false };
  }
  const wanted = approval.runs === "execute-half" ? "execute-half" : "tool";
  const impl = gate.allowed ? deps.tools.get(gate.tool.name) : undefined;
  const target = approval.runs === "execute-half" ? impl?.executeHalf : impl;
  if (!gate.allowed || gate.kind !== wanted || impl === undefined || target === undefined) {
    await deps.recorder.finish(approval.callId, {
      status: "refused",
      code: gate.allowed ? "not-implemented" : gate.code,
    });
    return { part: errorResult(ref, unavailableMessage(approval.toolName)), stopped: false };
  }
  const parsed = parseApproved(target, approval, inputOf);
  if (!parsed.success) {
    await deps.recorder.finish(approval.callId, { status: "failed", code: "invalid-input" });
    return {
      part: errorResult(ref, `The approved call to ${shown} had invalid arguments.`),
      stopped: false,
    };
  }
  const stage = approval.stage;
  // A stage answered: the call carries on from where it stopped, the approved stages known by
  // fingerprint (a rejected one is refused there, and what ran before it is reported).
  const commands: CommandGate | undefined =
    stage === undefined
      ? undefined
      : {
          entries: deps.controls.current.commands,
          park: decision.approved,
          approved: decision.approved ? [...stage.approved, stage.fingerprint] : stage.approved,
          resume: stage.checkpoint,
        };
  await deps.recorder.start(approval.callId);
  deps.emit({ type: "tool-call", callId: approval.callId, tool: gate.tool.name, state: "started" });
  const outcome = await invokeTool(
    deps,
    target,
    parsed.data,
    approval.callId,
    target.timeoutMs ?? impl.timeoutMs,
    commands === undefined ? {} : { commands },
  );
  if (!decision.approved) {
    const rest =
      outcome.end === "returned" && !isApprovalRequest(outcome.result) && !outcome.result.ok
        ? ` ${outcome.result.error}`
        : "";
    await deps.recorder.finish(approval.callId, { status: "rejected", code: "rejected" });
    deps.emit({ type: "tool-call", callId: approval.callId, tool: shown, state: "failed" });
    const text = `${rejectedText(decision.reason)}${rest}`;
    return {
      part: errorResult(ref, deps.redactor === undefined ? text : deps.redactor.redact(text)),
      stopped: false,
    };
  }
  if (stage !== undefined && outcome.end === "returned" && isStageParking(outcome.result)) {
    // Another stage further on is outside the allowlist: the run parks again, on that one.
    await deps.recorder.finish(approval.callId, { status: "parked" });
    return {
      approval: stageApproval(
        deps,
        approval.callId,
        ref,
        approval.tool,
        approval.args,
        outcome.result,
        [...stage.approved, stage.fingerprint],
      ),
    };
  }
  if (outcome.end === "returned" && isApprovalRequest(outcome.result)) {
    // An approved plain tool asking again (or a half asking at all) is not honoured.
    await deps.recorder.finish(approval.callId, { status: "failed", code: "approval-not-bound" });
    deps.emit({ type: "tool-call", callId: approval.callId, tool: shown, state: "failed" });
    return {
      part: errorResult(
        ref,
        `Tool ${quoteUntrusted(shown)} returned an approval request it is not registered to make; nothing was run.`,
      ),
      stopped: false,
    };
  }
  const part = await closeCall(
    deps,
    approval.callId,
    gate.tool,
    ref,
    outcome,
    approval.runs === "execute-half" ? approval.tool : undefined,
  );
  return { part, stopped: outcome.end === "stopped" };
}

/**
 * The arguments an approved call runs with. When the approval kept only stdin's digest, the
 * model's input is read back from the conversation and must give exactly the approved arguments.
 */
function parseApproved(
  target: { inputSchema: z.ZodType },
  approval: QueuedApproval,
  inputOf: ((toolCallId: string) => unknown) | undefined,
): { success: true; data: unknown } | { success: false } {
  const args = approval.args as { stdin?: unknown } | null;
  const digestOnly = typeof args === "object" && args !== null && typeof args.stdin === "object";
  if (!digestOnly) return target.inputSchema.safeParse(approval.args);
  const original = target.inputSchema.safeParse(inputOf?.(approval.toolCallId));
  if (!original.success) return { success: false };
  return digestArgs(approvalArgs(original.data)) === digestArgs(approval.args)
    ? original
    : { success: false };
}

type Invocation =
  | { end: "returned"; result: ToolResult }
  | { end: "timeout"; timeoutMs: number; result?: ToolSuccess | ToolFailure }
  | { end: "stopped"; result?: ToolSuccess | ToolFailure }
  | { end: "threw"; error: unknown };

type Executable = { execute(args: unknown, ctx: ToolCallContext): Promise<ToolResult> };

/**
 * Calls a tool with the run's signal and its own timeout. When either fires, the tool gets
 * `stopGraceMs` to wind down (a command's SIGTERM, then SIGKILL after 3 s) before it is left.
 */
async function invokeTool(
  deps: BatchDeps,
  tool: Executable,
  args: unknown,
  callId: string,
  timeoutMs: number | undefined,
  options: { checkRedirects?: boolean; commands?: CommandGate } = {},
): Promise<Invocation> {
  const limitMs = timeoutMs ?? deps.defaultTimeoutMs;
  const own = new AbortController();
  const signal = AbortSignal.any([deps.signal, own.signal]);
  const grants = options.checkRedirects === true ? deps.controls.current.urlGrants : undefined;
  // Stage events are written in the order the tool reports them, before the call's own end.
  let stages: Promise<void> = Promise.resolve();
  const onStage = (event: StageEvent) => {
    stages = stages
      .then(() => deps.recorder.stage?.(callId, event))
      .catch((error: unknown) =>
        deps.logger.error("a stage audit event was not written", { callId, error }),
      );
  };
  const ctx: ToolCallContext = {
    signal,
    workspace: deps.workspace,
    callId,
    now: deps.now,
    ...(grants === undefined ? {} : { urlGrants: grants }),
    ...(options.commands === undefined ? {} : { commands: options.commands }),
    onStage,
    progress: (text) => deps.emit({ type: "tool-progress", callId, text }),
  };
  const work: Promise<Invocation> = Promise.resolve()
    .then(() => tool.execute(args, ctx))
    .then(
      (result): Invocation => ({ end: "returned", result }),
      (error: unknown): Invocation => ({ end: "threw", error }),
    )
    .then(async (end) => {
      await stages;
      return end;
    });
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<"stopped">((resolve) => {
    onAbort = () => resolve("stopped");
    if (signal.aborted) resolve("stopped");
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  const timer = setTimeout(() => own.abort(new Error(`timed out after ${limitMs} ms`)), limitMs);
  try {
    const first = await Promise.race([work, stopped]);
    if (first !== "stopped") return first;
    let grace: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      work,
      new Promise<undefined>((resolve) => {
        grace = setTimeout(() => resolve(undefined), deps.stopGraceMs);
      }),
    ]);
    clearTimeout(grace);
    if (late === undefined) {
      deps.logger.warn("a tool did not stop within its grace period; leaving it behind", {
        callId,
      });
    }
    const settled =
      late?.end === "returned" && !isApprovalRequest(late.result) ? late.result : undefined;
    if (deps.signal.aborted) return { end: "stopped", result: settled };
    return { end: "timeout", timeoutMs: limitMs, result: settled };
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

/** Records how a call ended, tells the observer, and gives the model its result. */
async function closeCall(
  deps: BatchDeps,
  recordId: string,
  tool: ToolDescriptor,
  ref: { toolCallId: string; toolName: string },
  outcome: Invocation,
  ran?: string,
): Promise<ToolResultPart> {
  const extra = ran === undefined ? {} : { ran };
  const emit = (state: "completed" | "failed") =>
    deps.emit({ type: "tool-call", callId: recordId, tool: tool.name, state });
  switch (outcome.end) {
    case "returned": {
      const result = outcome.result;
      if (isApprovalRequest(result)) throw new Error("unreachable: approval handled by caller");
      await deps.recorder.finish(recordId, {
        status: result.ok ? "completed" : "failed",
        ...(result.ok ? {} : { code: String(result.code).slice(0, 64) }),
        truncated: result.truncated === true,
        ...extra,
      });
      emit(result.ok ? "completed" : "failed");
      return describeToolResult(ref, result, deps.redactor);
    }
    case "threw": {
      deps.logger.error("a tool threw instead of returning a failure", {
        tool: tool.name,
        callId: recordId,
        error: outcome.error,
      });
      await deps.recorder.finish(recordId, { status: "failed", code: "failed", ...extra });
      emit("failed");
      return errorResult(ref, `${tool.name} failed unexpectedly; nothing more is known.`);
    }
    case "timeout": {
      if (outcome.result?.ok === true) {
        await deps.recorder.finish(recordId, {
          status: "completed",
          truncated: outcome.result.truncated === true,
          ...extra,
        });
        emit("completed");
        return describeToolResult(ref, outcome.result, deps.redactor);
      }
      await deps.recorder.finish(recordId, { status: "failed", code: "timeout", ...extra });
      emit("failed");
      return errorResult(
        ref,
        `${tool.name} did not finish within ${outcome.timeoutMs} ms and was stopped.`,
      );
    }
    case "stopped": {
      if (outcome.result?.ok === true) {
        await deps.recorder.finish(recordId, {
          status: "completed",
          truncated: outcome.result.truncated === true,
          ...extra,
        });
        emit("completed");
        return describeToolResult(ref, outcome.result, deps.redactor);
      }
      await deps.recorder.finish(recordId, {
        status: "interrupted",
        code: "interrupted",
        ...extra,
      });
      emit("failed");
      return errorResult(ref, interruptedText);
    }
  }
}

/** The reason a fetch under a URL grant stopped at a redirect outside them, if it did. */
function leftTheGrants(outcome: Invocation): string | undefined {
  if (outcome.end !== "returned") return undefined;
  const result = outcome.result;
  if (isApprovalRequest(result) || result.ok || result.code !== outsideUrlGrantCode)
    return undefined;
  return result.error;
}

/** A redirect out of the grants: the fetch asks (parks or is declined) naming the hop. */
async function redirectOutOfGrants(
  deps: BatchDeps,
  plan: RunnablePlan,
  ref: { toolCallId: string; toolName: string },
  reason: string,
): Promise<RunOutcome> {
  const decided = decideRedirect(deps.controls.current, plan.tool, reason);
  const settled = decided.settled;
  if (settled.action === "decline") {
    await deps.recorder.finish(plan.recordId, {
      status: "declined",
      code: settled.rule,
      decision: decided.record,
    });
    deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "failed" });
    return { part: errorResult(ref, settled.modelMessage) };
  }
  await deps.recorder.finish(plan.recordId, { status: "parked", decision: decided.record });
  return {
    approval: {
      index: plan.index,
      callId: plan.recordId,
      toolCallId: plan.call.toolCallId,
      toolName: plan.call.toolName,
      tool: plan.tool.name,
      runs: "tool",
      args: plan.args,
      argsDigest: digestArgs(plan.args),
      requestedAt: deps.now().toISOString(),
      calledTool: plan.tool.name,
      risk: "unknown",
      summary: `Fetch with ${plan.tool.name}, following redirects.`,
      reason: reasonOf(settled),
    },
  };
}

/** Runs `work` over `items` with at most `limit` in flight. */
async function runBounded<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  });
  await Promise.all(lanes);
}
