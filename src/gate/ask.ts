// Asking a person: the one builder of an approval request (a plain tool above the policy, a
// proposal waiting for its hidden half, a redirect out of the URL grants, one stage of a chain),
// and the answer, run (or turned down) on whichever instance resumes the run.
import { createHash } from "node:crypto";
import type { ToolResultPart } from "ai";
import type { z } from "zod";
import type { QueuedApproval, ToolCallDecisionRecord } from "../db/schema.ts";
import type { HeldCall, PendingStage } from "../domain/run.ts";
import { checkToolCall } from "../policy/check-tool-call.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import {
  type ApprovalRequest,
  type CommandGate,
  isApprovalRequest,
  isStageParking,
  type StageParking,
} from "../tools/types.ts";
import { digestArgs } from "./args-digest.ts";
import { closeCall, closeWith } from "./close.ts";
import { decideRedirect, decideToolCall, isDenied } from "./decide.ts";
import { invokeTool } from "./invoke.ts";
import { unavailableMessage } from "./plan.ts";
import { notStartedText, rejectedText } from "./results.ts";
import type {
  ApprovalDecision,
  BatchDeps,
  CallPlan,
  CallRef,
  IndexedApproval,
  RunnablePlan,
} from "./types.ts";

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

/** Every approval request the gate raises is built here. */
export function buildApproval(
  deps: BatchDeps,
  input: {
    readonly recordId: string;
    readonly ref: CallRef;
    /** What runs once approved: the tool itself, or the hidden half of a two-phase tool. */
    readonly tool: string;
    readonly runs: "tool" | "execute-half";
    readonly args: unknown;
    /** What approving binds to; the digest of `args` unless a stage narrows it. */
    readonly argsDigest?: string;
    /** The tool the model called. */
    readonly calledTool: string;
    readonly risk: string;
    readonly summary: string;
    readonly reason: string;
    readonly previewDiff?: string | undefined;
    readonly stage?: PendingStage;
  },
): QueuedApproval {
  return {
    callId: input.recordId,
    toolCallId: input.ref.toolCallId,
    toolName: input.ref.toolName,
    tool: input.tool,
    runs: input.runs,
    args: input.args,
    argsDigest: input.argsDigest ?? digestArgs(input.args),
    requestedAt: deps.now().toISOString(),
    calledTool: input.calledTool,
    risk: input.risk,
    summary: input.summary.slice(0, 2_000),
    reason: input.reason.slice(0, 2_000),
    ...(typeof input.previewDiff === "string"
      ? { previewDiff: input.previewDiff.slice(0, 64 * 1024) }
      : {}),
    ...(input.stage === undefined ? {} : { stage: input.stage }),
  };
}

function refOf(plan: CallPlan): CallRef {
  return { toolCallId: plan.call.toolCallId, toolName: plan.call.toolName };
}

/** A plain tool above the policy: the executor raises the request on its behalf. */
export function plainApproval(deps: BatchDeps, plan: CallPlan): IndexedApproval {
  const risk = plan.decided.record.risk ?? plan.tool.risk;
  const args = approvalArgs(plan.args);
  return {
    ...buildApproval(deps, {
      recordId: plan.recordId,
      ref: refOf(plan),
      tool: plan.tool.name,
      runs: "tool",
      args,
      calledTool: plan.tool.name,
      risk,
      summary: `Run ${plan.tool.name} (risk: ${risk}) with the arguments shown.`,
      reason: plan.decided.resolved.reason,
    }),
    index: plan.index,
  };
}

/** A two-phase tool's proposal waiting for an operator before its hidden half runs. */
export function approvalFromProposal(
  deps: BatchDeps,
  plan: CallPlan,
  request: ApprovalRequest,
): IndexedApproval {
  return {
    ...buildApproval(deps, {
      recordId: plan.recordId,
      ref: refOf(plan),
      tool: request.executeToolName,
      runs: "execute-half",
      args: request.executeArgs,
      calledTool: plan.tool.name,
      risk: plan.decided.record.risk ?? plan.tool.risk,
      summary: String(request.summary ?? ""),
      reason: plan.decided.resolved.reason,
      previewDiff: request.previewDiff,
    }),
    index: plan.index,
  };
}

/** A call the policy let run, held because another call of its batch waits for a person. */
export function holdPlan(deps: BatchDeps, plan: CallPlan): HeldCall {
  const risk = plan.decided.record.risk ?? plan.tool.risk;
  return {
    ...buildApproval(deps, {
      recordId: plan.recordId,
      ref: refOf(plan),
      tool: plan.tool.name,
      runs: "tool",
      args: approvalArgs(plan.args),
      calledTool: plan.tool.name,
      risk,
      summary: `Run ${plan.tool.name} (risk: ${risk}) once the batch's approvals are answered.`,
      reason: plan.decided.resolved.reason,
    }),
    index: plan.index,
    heldBy: "policy",
    ...(plan.decided.checkRedirects ? { checkRedirects: true } : {}),
    ...(plan.stages === undefined ? {} : { stages: { park: plan.stages.park } }),
  };
}

/** An approved proposal's hidden half, held like `holdPlan`. */
export function holdProposal(
  deps: BatchDeps,
  plan: CallPlan,
  request: Pick<ApprovalRequest, "executeToolName" | "executeArgs">,
): HeldCall {
  return {
    ...buildApproval(deps, {
      recordId: plan.recordId,
      ref: refOf(plan),
      tool: request.executeToolName,
      runs: "execute-half",
      args: request.executeArgs,
      calledTool: plan.tool.name,
      risk: plan.decided.record.risk ?? plan.tool.risk,
      summary: `Run ${plan.tool.name}'s approved proposal once the batch's approvals are answered.`,
      reason: plan.decided.resolved.reason,
    }),
    index: plan.index,
    heldBy: "policy",
  };
}

/** One stage waiting for an operator: the approval names the stage's fingerprint, not the call's. */
export function stageApproval(
  deps: BatchDeps,
  recordId: string,
  ref: CallRef,
  tool: string,
  args: unknown,
  parking: StageParking,
  approvedBefore: readonly string[],
): QueuedApproval {
  const { stage, checkpoint } = parking;
  return buildApproval(deps, {
    recordId,
    ref,
    tool,
    runs: "tool",
    args,
    argsDigest: digestArgs({ args, stage: stage.fingerprint }),
    calledTool: tool,
    risk: "unknown",
    summary: `Run the stage ${quoteUntrusted(stage.argv.join(" "), 500)} of ${tool} (${stage.executable}, SHA-256 ${stage.executableSha256}); this approval is for this stage only.`,
    reason: stage.reason,
    stage: {
      fingerprint: stage.fingerprint,
      argv: [...stage.argv],
      executable: stage.executable,
      executableSha256: stage.executableSha256,
      approved: [...approvedBefore],
      checkpoint: { item: checkpoint.item, state: checkpoint.state },
    },
  });
}

/** A redirect out of the grants: the fetch asks (parks or is declined) naming the hop. */
export async function redirectOutOfGrants(
  deps: BatchDeps,
  plan: RunnablePlan,
  ref: CallRef,
  reason: string,
): Promise<{ part: ToolResultPart } | { approval: IndexedApproval }> {
  const decided = decideRedirect(deps.controls.current, plan.tool, reason);
  const resolved = decided.resolved;
  if (resolved.action === "decline") {
    return {
      part: await closeWith(
        deps,
        { recordId: plan.recordId, shown: plan.tool.name, ref },
        { status: "declined", code: resolved.rule, decision: decided.record },
        resolved.modelMessage,
      ),
    };
  }
  await deps.recorder.finish(plan.recordId, { status: "parked", decision: decided.record });
  return {
    approval: {
      ...buildApproval(deps, {
        recordId: plan.recordId,
        ref,
        tool: plan.tool.name,
        runs: "tool",
        args: plan.args,
        calledTool: plan.tool.name,
        risk: "unknown",
        summary: `Fetch with ${plan.tool.name}, following redirects.`,
        reason: resolved.reason,
      }),
      index: plan.index,
    },
  };
}

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
  /** A call held while its batch waited: who let it run, and the checks it would have run with. */
  held?: Partial<Pick<HeldCall, "heldBy" | "checkRedirects" | "stages">>,
): Promise<{ part: ToolResultPart; stopped: boolean } | { approval: QueuedApproval }> {
  const ref = { toolCallId: approval.toolCallId, toolName: approval.toolName };
  const shown = approval.calledTool ?? approval.tool;
  const call = { recordId: approval.callId, shown, ref };
  const end = async (
    status: "rejected" | "not-started" | "refused" | "failed",
    code: string | undefined,
    text: string,
    quiet = false,
  ) => closeWith(deps, call, { status, ...(code === undefined ? {} : { code }) }, text, { quiet });
  if (!decision.approved && approval.stage === undefined) {
    return {
      part: await end("rejected", "rejected", rejectedText(decision.reason)),
      stopped: false,
    };
  }
  if (deps.signal.aborted) {
    return { part: await end("not-started", undefined, notStartedText, true), stopped: true };
  }
  const gate = checkToolCall(deps.controls.current.set, approval.tool, "approval");
  // A deny override set while the run was parked holds: the call is refused like an unknown tool.
  const denied = gate.allowed && isDenied(deps.controls.current, gate.tool.name);
  if (denied) {
    const text = unavailableMessage(approval.toolName);
    return { part: await end("refused", "tool-unavailable", text, true), stopped: false };
  }
  const wanted = approval.runs === "execute-half" ? "execute-half" : "tool";
  const impl = gate.allowed ? deps.tools.get(gate.tool.name) : undefined;
  const target = approval.runs === "execute-half" ? impl?.executeHalf : impl;
  if (!gate.allowed || gate.kind !== wanted || impl === undefined || target === undefined) {
    const code = gate.allowed ? "not-implemented" : gate.code;
    const text = unavailableMessage(approval.toolName);
    return { part: await end("refused", code, text, true), stopped: false };
  }
  const parsed = parseApproved(target, approval, inputOf);
  if (!parsed.success) {
    const text = `The approved call to ${shown} had invalid arguments.`;
    return { part: await end("failed", "invalid-input", text, true), stopped: false };
  }
  const stage = approval.stage;
  let checks = held;
  if (held?.heldBy === "policy") {
    // The policy's word was given when the batch was planned; the run may have been narrowed
    // while it waited. Decided again now, with the controls the run holds now (DESIGN §11).
    const again = await redecideHeld(deps, approval, parsed.data, inputOf);
    if (again.kind === "ends") {
      const { status, code, text, decision: record } = again;
      const part = await closeWith(deps, call, { status, code, decision: record }, text);
      return { part, stopped: false };
    }
    if (again.kind === "asks") {
      await deps.recorder.finish(approval.callId, { status: "parked", decision: again.record });
      return { approval: again.approval };
    }
    checks = again.checks;
  }
  // A stage answered: the call carries on from where it stopped, the approved stages known by
  // fingerprint (a rejected one is refused there, and what ran before it is reported).
  const commands: CommandGate | undefined =
    stage === undefined
      ? checks?.stages === undefined
        ? undefined
        : { entries: deps.controls.current.commands, park: checks.stages.park }
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
    {
      ...(commands === undefined ? {} : { commands }),
      ...(checks?.checkRedirects === true ? { checkRedirects: true } : {}),
    },
  );
  if (!decision.approved) {
    const rest =
      outcome.end === "returned" && !isApprovalRequest(outcome.result) && !outcome.result.ok
        ? ` ${outcome.result.error}`
        : "";
    const text = `${rejectedText(decision.reason)}${rest}`;
    const redacted = deps.redactor === undefined ? text : deps.redactor.redact(text);
    return { part: await end("rejected", "rejected", redacted), stopped: false };
  }
  const staged = stage !== undefined || checks?.stages?.park === true;
  if (staged && outcome.end === "returned" && isStageParking(outcome.result)) {
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
        stage === undefined ? [] : [...stage.approved, stage.fingerprint],
      ),
    };
  }
  if (outcome.end === "returned" && isApprovalRequest(outcome.result)) {
    // An approved plain tool asking again (or a half asking at all) is not honoured.
    const text = `Tool ${quoteUntrusted(shown)} returned an approval request it is not registered to make; nothing was run.`;
    return { part: await end("failed", "approval-not-bound", text), stopped: false };
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

type HeldChecks = Partial<Pick<HeldCall, "heldBy" | "checkRedirects" | "stages">>;

/** What a call the policy let run comes to when decided again as its batch resumes. */
type Redecided =
  | { readonly kind: "runs"; readonly checks: HeldChecks }
  | {
      readonly kind: "asks";
      readonly approval: QueuedApproval;
      readonly record: ToolCallDecisionRecord;
    }
  | {
      readonly kind: "ends";
      readonly status: "declined" | "refused" | "failed";
      readonly code: string;
      readonly text: string;
      readonly decision?: ToolCallDecisionRecord;
    };

/**
 * Decides a held call again with the controls the run holds now, as `planCall` decided it when
 * its batch was planned: the call the model made (for a two-phase tool's held half, the calling
 * tool with the model's own input), its deny override and its decision. What the policy no longer
 * lets run asks (an operator's answer is then what runs it) or is declined or refused; it never
 * runs on a word given under controls the run has since lost.
 */
async function redecideHeld(
  deps: BatchDeps,
  approval: QueuedApproval,
  args: unknown,
  inputOf: ((toolCallId: string) => unknown) | undefined,
): Promise<Redecided> {
  const controls = deps.controls.current;
  const called = approval.calledTool ?? approval.tool;
  const unavailable = unavailableMessage(approval.toolName);
  const check = checkToolCall(controls.set, called, "model");
  if (!check.allowed) {
    return { kind: "ends", status: "refused", code: check.code, text: unavailable };
  }
  if (isDenied(controls, check.tool.name)) {
    return { kind: "ends", status: "refused", code: "tool-unavailable", text: unavailable };
  }
  const impl = deps.tools.get(check.tool.name);
  const input =
    approval.runs === "execute-half"
      ? impl?.inputSchema.safeParse(inputOf?.(approval.toolCallId))
      : { success: true as const, data: args };
  if (impl === undefined || input === undefined || !input.success) {
    const text = `The held call to ${quoteUntrusted(called)} could not be decided again; nothing was run.`;
    return { kind: "ends", status: "failed", code: "invalid-input", text };
  }
  const decided = await decideToolCall({ ...deps.decide, controls }, check.tool, input.data);
  const { resolved, record } = decided;
  const mode = deps.decide?.commandTools?.get(check.tool.name)?.mode;
  if (resolved.action === "run") {
    return {
      kind: "runs",
      checks: { heldBy: "policy", ...(decided.checkRedirects ? { checkRedirects: true } : {}) },
    };
  }
  if (
    (mode === "chain" || mode === "script") &&
    record.rule === "policy-parks" &&
    (resolved.action === "park" || resolved.action === "decline")
  ) {
    // As when planned: per stage, each one outside the allowlist asks (or is declined) on its own.
    return {
      kind: "runs",
      checks: { heldBy: "policy", stages: { park: resolved.action === "park" } },
    };
  }
  if (resolved.action === "refuse") {
    return {
      kind: "ends",
      status: "refused",
      code: "tool-unavailable",
      text: unavailable,
      decision: record,
    };
  }
  if (resolved.action === "decline") {
    return {
      kind: "ends",
      status: "declined",
      code: resolved.rule,
      text: resolved.modelMessage,
      decision: record,
    };
  }
  const reason = `the run's controls narrowed while its batch waited: ${resolved.reason}`;
  const ref = { toolCallId: approval.toolCallId, toolName: approval.toolName };
  return {
    kind: "asks",
    record: { ...record, reason: reason.slice(0, 2_000) },
    approval: buildApproval(deps, {
      recordId: approval.callId,
      ref,
      tool: approval.tool,
      runs: approval.runs === "execute-half" ? "execute-half" : "tool",
      args: approval.args,
      argsDigest: approval.argsDigest,
      calledTool: called,
      risk: record.risk ?? check.tool.risk,
      summary: `Run ${called} (risk: ${record.risk ?? check.tool.risk}) with the arguments shown.`,
      reason,
      previewDiff: approval.previewDiff,
    }),
  };
}
