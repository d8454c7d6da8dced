// Invoking a call that is allowed to run: the tool (or a two-phase tool's first half, which
// changes nothing), then what its result asks for (a stage an operator must approve, a redirect
// out of the URL grants, the hidden half of an auto-approved proposal), each with the run's
// signal and its own timeout.
import type { ToolResultPart } from "ai";
import { checkApprovalRequest, checkToolCall } from "../policy/check-tool-call.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import type { ToolDescriptor } from "../policy/tools.ts";
import {
  type CommandGate,
  isApprovalRequest,
  isStageParking,
  outsideUrlGrantCode,
  type StageEvent,
  type ToolCallContext,
  type ToolFailure,
  type ToolImplementation,
  type ToolResult,
  type ToolSuccess,
} from "../tools/types.ts";
import { approvalFromProposal, redirectOutOfGrants, stageApproval } from "./ask.ts";
import { closeCall, closeWith } from "./close.ts";
import { unavailableMessage } from "./plan.ts";
import { notStartedText } from "./results.ts";
import { traceToolCall } from "./trace-tool.ts";
import type { BatchDeps, CallRef, IndexedApproval, RunnablePlan } from "./types.ts";

export type CallOutcome = { part: ToolResultPart } | { approval: IndexedApproval };

/** A two-phase call whose proposal the policy approved: its hidden half, ready to run. */
export type ReadyHalf = {
  readonly plan: RunnablePlan;
  readonly executeToolName: string;
  readonly executeArgs: Record<string, unknown>;
};

/**
 * A two-phase tool's first half: what it would do, having changed nothing. The row is not marked
 * started (the ledger marks a side effect's start), so a call stopped here reads "not started".
 */
export async function propose(
  deps: BatchDeps,
  plan: RunnablePlan,
): Promise<CallOutcome | { ready: ReadyHalf }> {
  const ref = { toolCallId: plan.call.toolCallId, toolName: plan.call.toolName };
  const call = { recordId: plan.recordId, shown: plan.tool.name, ref };
  const notStarted = async () => ({
    part: await closeWith(deps, call, { status: "not-started" }, notStartedText, { quiet: true }),
  });
  if (deps.signal.aborted) return notStarted();
  const first = await invokeTool(deps, plan.impl, plan.args, plan.recordId, plan.impl.timeoutMs);
  if (first.end === "stopped" && first.result?.ok !== true) return notStarted();
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
  if (!bound.allowed) {
    return {
      part: await closeWith(
        deps,
        call,
        { status: "failed", code: "approval-not-bound" },
        bound.message,
      ),
    };
  }
  if (plan.decided.resolved.action === "run") {
    return {
      ready: { plan, executeToolName: request.executeToolName, executeArgs: request.executeArgs },
    };
  }
  await deps.recorder.finish(plan.recordId, { status: "parked" });
  return { approval: approvalFromProposal(deps, plan, request) };
}

/** The hidden half of a proposal the policy approved: the side effect starts here. */
export async function runReady(deps: BatchDeps, ready: ReadyHalf): Promise<ToolResultPart> {
  const { plan } = ready;
  const ref = { toolCallId: plan.call.toolCallId, toolName: plan.call.toolName };
  if (deps.signal.aborted) {
    const call = { recordId: plan.recordId, shown: plan.tool.name, ref };
    return closeWith(deps, call, { status: "not-started" }, notStartedText, { quiet: true });
  }
  await deps.recorder.start(plan.recordId);
  deps.emit({ type: "tool-call", callId: plan.recordId, tool: plan.tool.name, state: "started" });
  return runExecuteHalf(deps, plan, ref, ready.executeToolName, ready.executeArgs);
}

/** Runs one planned call (not a proposal) to its result, or to the approval it must wait for. */
export async function runPlanned(deps: BatchDeps, plan: RunnablePlan): Promise<CallOutcome> {
  const ref = { toolCallId: plan.call.toolCallId, toolName: plan.call.toolName };
  const call = { recordId: plan.recordId, shown: plan.tool.name, ref };
  if (deps.signal.aborted) {
    return {
      part: await closeWith(deps, call, { status: "not-started" }, notStartedText, {
        quiet: true,
      }),
    };
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
  if (first.end === "returned" && isApprovalRequest(first.result)) {
    // Only a two-phase tool's proposal may ask, and proposals are not invoked here.
    const bound = checkApprovalRequest(
      deps.controls.current.set,
      plan.tool.name,
      first.result.executeToolName,
    );
    const text = bound.allowed
      ? `Tool ${quoteUntrusted(plan.tool.name)} returned an approval request it is not registered to make; nothing was run.`
      : bound.message;
    return {
      part: await closeWith(deps, call, { status: "failed", code: "approval-not-bound" }, text),
    };
  }
  return { part: await closeCall(deps, plan.recordId, plan.tool, ref, first) };
}

/** Auto-approved second phase: the hidden half, through the approval path's own gate. */
async function runExecuteHalf(
  deps: BatchDeps,
  plan: { recordId: string; tool: ToolDescriptor; impl: ToolImplementation },
  ref: CallRef,
  executeToolName: string,
  executeArgs: unknown,
): Promise<ToolResultPart> {
  const call = { recordId: plan.recordId, shown: plan.tool.name, ref };
  const gate = checkToolCall(deps.controls.current.set, executeToolName, "approval");
  const half = plan.impl.executeHalf;
  if (!gate.allowed || gate.kind !== "execute-half" || half === undefined) {
    return closeWith(
      deps,
      call,
      { status: "refused", code: "tool-unavailable" },
      unavailableMessage(executeToolName),
    );
  }
  const parsed = half.inputSchema.safeParse(executeArgs);
  if (!parsed.success) {
    return closeWith(
      deps,
      call,
      { status: "failed", code: "invalid-input" },
      `The approved call to ${plan.tool.name} had invalid arguments.`,
    );
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

/** The reason a fetch under a URL grant stopped at a redirect outside them, if it did. */
function leftTheGrants(outcome: Invocation): string | undefined {
  if (outcome.end !== "returned") return undefined;
  const result = outcome.result;
  if (isApprovalRequest(result) || result.ok || result.code !== outsideUrlGrantCode)
    return undefined;
  return result.error;
}

export type Invocation =
  | { end: "returned"; result: ToolResult }
  | { end: "timeout"; timeoutMs: number; result?: ToolSuccess | ToolFailure }
  | { end: "stopped"; result?: ToolSuccess | ToolFailure }
  | { end: "threw"; error: unknown };

type Executable = {
  readonly name?: string;
  execute(args: unknown, invocation: ToolCallContext): Promise<ToolResult>;
};

/**
 * Calls a tool with the run's signal and its own timeout. When either fires, the tool gets
 * `stopGraceMs` to wind down (a command's SIGTERM, then SIGKILL after 3 s) before it is left.
 */
export async function invokeTool(
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
  const invocation: ToolCallContext = {
    signal,
    workspace: deps.workspace,
    callId,
    now: deps.now,
    run: deps.owner,
    ...(grants === undefined ? {} : { urlGrants: grants }),
    ...(options.commands === undefined ? {} : { commands: options.commands }),
    onStage,
    progress: (text) => deps.emit({ type: "tool-progress", callId, text }),
  };
  const work: Promise<Invocation> = Promise.resolve()
    .then(() =>
      traceToolCall(tool.name ?? "tool", callId, args, () => tool.execute(args, invocation)),
    )
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
    const resolved =
      late?.end === "returned" && !isApprovalRequest(late.result) ? late.result : undefined;
    if (deps.signal.aborted) return { end: "stopped", result: resolved };
    return { end: "timeout", timeoutMs: limitMs, result: resolved };
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}
