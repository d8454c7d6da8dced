// One segment of a run: model step, tool batch, model step … until the model answers, a budget
// stops it, it is stopped from outside, a call needs an operator (the run parks), or the model asks
// its caller a question (a step whose only call is `ask_caller`, in a run that can take the
// caller's answer: the run waits `input-required`). A resumed segment first answers the call it
// stopped on (the operator's decision, or the caller's answer) and finishes that batch.
//
// Each step is one AI SDK call with `isStepCount(1)` and tools that have no `execute`: the SDK
// reports the text and the calls, and the engine decides everything about them (tool-batch.ts).
// `streamText` when someone reads the answer as it comes; `generateText` otherwise (a blocking
// A2A `SendMessage`, a webhook), which skips the stream's per-chunk work and costs about a
// millisecond less per step. The SDK's own results for calls it could not match ("unavailable tool …
// Available tools: …") are dropped, so the model only ever reads the executor's words.
import {
  generateText,
  isStepCount,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  streamText,
  type ToolModelMessage,
  type ToolSet,
} from "ai";
import type { PendingBatch, QueuedApproval, RunBudgetUsed, RunError } from "../db/schema.ts";
import type { BudgetName, HeldCall, PendingInput } from "../domain/run.ts";
import { digestArgs } from "../gate/args-digest.ts";
import {
  type ApprovalDecision,
  answerParkedBatch,
  type BatchDeps,
  executeToolBatch,
  type IndexedApproval,
  type IndexedResult,
  type ModelToolCall,
} from "../gate/batch.ts";
import { errorResult, notStartedText } from "../gate/results.ts";
import type { Logger } from "../log.ts";
import { checkToolCall } from "../policy/check-tool-call.ts";
import { askCallerToolName, readQuestion } from "../tools/context/ask-caller.ts";
import type { BudgetMeters } from "./budgets.ts";
import { type ModelCallTelemetry, modelCallTelemetry } from "./model-telemetry.ts";
import { computeCostUsd, type ModelPrice } from "./prices.ts";

export type SegmentContext = {
  readonly model: LanguageModel;
  readonly price: ModelPrice | undefined;
  readonly instructions: string;
  readonly tools: ToolSet;
  /** Model-facing names of renamed offered tools → canonical names. */
  readonly renamed: ReadonlyMap<string, string>;
  readonly batch: BatchDeps;
  readonly meters: BudgetMeters;
  /** Cumulative over the run's segments; updated as steps are charged. */
  readonly used: RunBudgetUsed;
  /** The conversation; appended to as the segment goes. */
  readonly messages: ModelMessage[];
  readonly signal: AbortSignal;
  readonly maxRetries: number;
  /** False: `generateText`, and the step's text in one delta. */
  readonly stream: boolean;
  readonly logger: Logger;
  readonly resume?:
    | { batch: PendingBatch; decision: ApprovalDecision }
    /** The caller's answer to the `ask_caller` call the run waited on. */
    | { answer: { pending: PendingInput; text: string } };
  /** The run's caller can answer `ask_caller` (an A2A caller; a webhook cannot). */
  readonly canAskCaller?: boolean;
  /** Counts a step's usage toward the daily totals (written by `flushUsage` or at the end). */
  chargeStep(delta: { tokens: number; costUsd: number }): void;
  /** Writes the usage counted so far (run usage, heartbeat, daily totals) before tools run. */
  flushUsage(): Promise<void>;
  /**
   * Between a step's model call and its tools: asks the database whether the run was canceled or
   * its caller revoked (stopping it through `signal` when so), so that neither depends on a
   * notification arriving.
   */
  checkBetweenSteps(): Promise<void>;
  /** Persists the conversation after a finished batch. */
  checkpoint(): Promise<void>;
  onTextDelta(delta: string): void;
};

export type SegmentEnd =
  | { kind: "completed"; text: string }
  | { kind: "failed"; error: RunError; text?: string }
  | { kind: "budget"; budget: BudgetName; text?: string }
  /** Stopped from outside (cancel, revocation, deadline, shutdown): the engine knows why. */
  | { kind: "stopped" }
  | { kind: "parked"; pending: QueuedApproval; batch: PendingBatch }
  /** The model asked its caller a question; the call's row is open (`parked`) until answered. */
  | { kind: "input-required"; pending: Omit<PendingInput, "askedAt"> };

/** Runs one segment. Throws only for peergate's own failures (database, bugs). */
export async function runSegment(ctx: SegmentContext): Promise<SegmentEnd> {
  if (ctx.resume && "answer" in ctx.resume) {
    await answerAskCaller(ctx, ctx.resume.answer.pending, ctx.resume.answer.text);
  } else if (ctx.resume) {
    const end = await finishParkedBatch(ctx, ctx.resume.batch, ctx.resume.decision);
    if (end) return end;
  }
  for (;;) {
    if (ctx.signal.aborted) return { kind: "stopped" };
    const spent = ctx.meters.exhausted();
    if (spent) return { kind: "budget", budget: spent };

    const step = await callModel(ctx);
    if (step.kind === "stopped") return step;
    if (step.kind === "failed") return step;

    const calls = step.calls;
    const over = calls.length > 0 ? ctx.meters.exhausted() : undefined;
    ctx.messages.push(...step.assistant);
    if (calls.length === 0) {
      if (step.capped && ctx.meters.exhausted()) {
        return { kind: "budget", budget: ctx.meters.exhausted() as BudgetName, text: step.text };
      }
      return { kind: "completed", text: step.text };
    }
    if (over) {
      // No step is left to read the results: nothing runs, every call is answered "not started".
      await ctx.batch.recorder.open(
        calls.map((call) => ({
          recordId: ctx.batch.takeRecordId(call.toolCallId),
          tool: String(call.toolName).slice(0, 128),
          argsDigest: digestArgs(call.input),
          status: "not-started" as const,
          code: "budget-exceeded",
        })),
      );
      ctx.messages.push(
        toolMessage(
          calls.map((call, index) => ({ index, part: errorResult(call, notStartedText) })),
        ),
      );
      return { kind: "budget", budget: over };
    }

    // Other instances see today's totals before this run spends time in its tools.
    await ctx.flushUsage();
    await ctx.checkBetweenSteps();
    const question = ctx.canAskCaller === true ? readAskCaller(ctx, calls) : undefined;
    if (question) return askCaller(ctx, question);
    const outcome = await executeToolBatch(ctx.batch, calls);
    if (outcome.approvals.length > 0) {
      return park(outcome.results, outcome.approvals, outcome.held);
    }
    ctx.messages.push(toolMessage(outcome.results));
    if (outcome.stopped) return { kind: "stopped" };
    await ctx.checkpoint();
  }
}

/** Answers the call a resumed run parked on; once nothing waits, its batch runs (src/gate/resume.ts). */
async function finishParkedBatch(
  ctx: SegmentContext,
  batch: PendingBatch,
  decision: ApprovalDecision,
): Promise<SegmentEnd | undefined> {
  const answered = await answerParkedBatch(ctx.batch, batch, decision, (id) => inputOf(ctx, id));
  if (answered.kind === "park") return park(answered.results, answered.approvals, answered.held);
  ctx.messages.push(toolMessage(answered.results));
  if (answered.stopped) return { kind: "stopped" };
  await ctx.checkpoint();
  return undefined;
}

/** The model's input for one of its tool calls, from the conversation (the latest such call). */
function inputOf(ctx: SegmentContext, toolCallId: string): unknown {
  for (let i = ctx.messages.length - 1; i >= 0; i--) {
    const message = ctx.messages[i];
    if (message?.role !== "assistant" || typeof message.content === "string") continue;
    for (const part of message.content) {
      if (part.type === "tool-call" && part.toolCallId === toolCallId) return part.input;
    }
  }
  return undefined;
}

/**
 * The question of a step that only asks the caller, through the executor's gate: `ask_caller` (or
 * an alias of it) in the run's set, called alone, with a question. Anything else goes to the batch,
 * where the same gate refuses a tool outside the set and ask_caller's own `execute` answers a
 * call that cannot wait for the caller.
 */
function readAskCaller(
  ctx: SegmentContext,
  calls: readonly ModelToolCall[],
): { call: ModelToolCall; question: string } | undefined {
  const [call, ...others] = calls;
  if (call === undefined || others.length > 0 || call.unparsable) return undefined;
  const gate = checkToolCall(ctx.batch.controls.current.set, call.toolName, "model");
  if (!gate.allowed || (gate.kind !== "tool" && gate.kind !== "alias")) return undefined;
  if (gate.tool.name !== askCallerToolName) return undefined;
  const question = readQuestion(call.input);
  return question === undefined ? undefined : { call, question };
}

async function askCaller(
  ctx: SegmentContext,
  asked: { call: ModelToolCall; question: string },
): Promise<SegmentEnd> {
  const { call, question } = asked;
  const callId = ctx.batch.takeRecordId(call.toolCallId);
  await ctx.batch.recorder.open([
    {
      recordId: callId,
      tool: askCallerToolName,
      argsDigest: digestArgs(call.input),
      status: "parked",
    },
  ]);
  if (ctx.signal.aborted) {
    await ctx.batch.recorder.finish(callId, { status: "not-started" });
    ctx.messages.push(toolMessage([{ index: 0, part: errorResult(call, notStartedText) }]));
    return { kind: "stopped" };
  }
  return {
    kind: "input-required",
    pending: { callId, toolCallId: call.toolCallId, toolName: call.toolName, question },
  };
}

/** The caller's answer, as the result of the `ask_caller` call the run waited on. */
async function answerAskCaller(
  ctx: SegmentContext,
  pending: PendingInput,
  text: string,
): Promise<void> {
  await ctx.batch.recorder.finish(pending.callId, { status: "completed" });
  ctx.messages.push(
    toolMessage([
      {
        index: 0,
        part: {
          type: "tool-result",
          toolCallId: pending.toolCallId,
          toolName: pending.toolName,
          // The caller's words: data for the model, like any tool result, never instructions.
          output: { type: "json", value: { answer: text } },
        },
      },
    ]),
  );
  await ctx.checkpoint();
}

function park(
  results: IndexedResult[],
  approvals: IndexedApproval[],
  held: readonly HeldCall[],
): SegmentEnd {
  const [pending] = approvals;
  if (pending === undefined) throw new Error("park needs an approval");
  return {
    kind: "parked",
    pending,
    batch: {
      results: results.map((r) => ({
        index: r.index,
        part: r.part as unknown as Record<string, unknown>,
      })),
      approvals,
      ...(held.length > 0 ? { held: [...held] } : {}),
    },
  };
}

function toolMessage(results: readonly IndexedResult[]): ToolModelMessage {
  return {
    role: "tool",
    content: [...results].sort((a, b) => a.index - b.index).map((r) => r.part),
  };
}

type StepOutcome =
  | {
      kind: "step";
      text: string;
      calls: ModelToolCall[];
      assistant: ModelMessage[];
      /** The step ended at an output cap a budget set. */
      capped: boolean;
    }
  | { kind: "failed"; error: RunError }
  | { kind: "stopped" };

/** One model step, reported through the AI SDK's telemetry (src/runs/model-telemetry.ts). */
async function callModel(ctx: SegmentContext): Promise<StepOutcome> {
  const telemetry = modelCallTelemetry();
  try {
    return await callModelWith(ctx, telemetry.options);
  } finally {
    telemetry.close();
  }
}

async function callModelWith(
  ctx: SegmentContext,
  telemetry: ModelCallTelemetry["options"],
): Promise<StepOutcome> {
  const maxOutputTokens = ctx.meters.maxOutputTokens(ctx.price);
  const hasTools = Object.keys(ctx.tools).length > 0;
  let text = "";
  let streamError: unknown;
  let usage: LanguageModelUsage | undefined;
  let calls: ModelToolCall[] = [];
  let assistant: ModelMessage[] = [];
  let finishReason: string | undefined;
  const options = {
    model: ctx.model,
    ...(ctx.instructions.trim() === "" ? {} : { instructions: ctx.instructions }),
    messages: ctx.messages,
    ...(hasTools ? { tools: ctx.tools } : {}),
    abortSignal: ctx.signal,
    maxRetries: ctx.maxRetries,
    ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
    stopWhen: isStepCount(1),
    ...telemetry,
  };
  try {
    if (!ctx.stream) {
      const result = await generateText(options);
      if (ctx.signal.aborted) return { kind: "stopped" };
      text = result.text;
      if (text !== "") ctx.onTextDelta(text);
      usage = result.usage;
      finishReason = result.finishReason;
      calls = result.toolCalls
        .filter((call) => call.providerExecuted !== true)
        .map((call) => readToolCall(call, ctx.renamed));
      assistant = result.responseMessages.filter((m) => m.role === "assistant");
      return chargeModelStep(ctx, { text, usage, calls, assistant, finishReason, maxOutputTokens });
    }
    const result = streamText({
      ...options,
      // Errors are read from the stream below; the default handler would print them.
      onError: () => {},
    });
    for await (const part of result.fullStream) {
      if (part.type === "text-delta") {
        text += part.text;
        ctx.onTextDelta(part.text);
      } else if (part.type === "error") {
        streamError ??= part.error;
      }
    }
    if (ctx.signal.aborted) return { kind: "stopped" };
    if (streamError === undefined) {
      usage = await result.usage;
      finishReason = await result.finishReason;
      calls = (await result.toolCalls)
        .filter((call) => call.providerExecuted !== true)
        .map((call) => readToolCall(call, ctx.renamed));
      assistant = (await result.responseMessages).filter((m) => m.role === "assistant");
    }
  } catch (error) {
    if (ctx.signal.aborted) return { kind: "stopped" };
    streamError ??= error;
  }
  if (ctx.signal.aborted) return { kind: "stopped" };
  if (streamError !== undefined || usage === undefined) {
    ctx.logger.warn("the model call failed", { error: streamError });
    return {
      kind: "failed",
      error: { code: "model-error", message: describeModelError(streamError) },
    };
  }
  return chargeModelStep(ctx, { text, usage, calls, assistant, finishReason, maxOutputTokens });
}

/** Charges a finished model step to the run's meters and usage. */
function chargeModelStep(
  ctx: SegmentContext,
  step: {
    text: string;
    usage: LanguageModelUsage;
    calls: ModelToolCall[];
    assistant: ModelMessage[];
    finishReason: string | undefined;
    maxOutputTokens: number | undefined;
  },
): StepOutcome {
  const { text, usage, calls, assistant, finishReason, maxOutputTokens } = step;
  const tokens = readTokens(usage);
  if (tokens === undefined && ctx.meters.metersUsage) {
    return {
      kind: "failed",
      error: {
        code: "usage-unknown",
        message:
          "the model reported no token usage, so this caller's token or cost budget cannot be enforced",
      },
    };
  }
  const delta = {
    steps: 1,
    tokens: tokens?.total ?? 0,
    costUsd: ctx.price && tokens ? computeCostUsd(ctx.price, tokens) : 0,
  };
  ctx.meters.charge(delta);
  ctx.used.steps += 1;
  ctx.used.tokens += delta.tokens;
  ctx.used.costUsd += delta.costUsd;
  ctx.chargeStep({ tokens: delta.tokens, costUsd: delta.costUsd });
  return {
    kind: "step",
    text,
    calls,
    assistant,
    capped: finishReason === "length" && maxOutputTokens !== undefined,
  };
}

function readTokens(
  usage: LanguageModelUsage,
): { input: number; output: number; total: number } | undefined {
  if (
    usage.inputTokens === undefined &&
    usage.outputTokens === undefined &&
    usage.totalTokens === undefined
  ) {
    return undefined;
  }
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  return { input, output, total: usage.totalTokens ?? input + output };
}

type SdkToolCall = {
  toolCallId: string;
  toolName: string;
  input: unknown;
  invalid?: boolean;
  error?: unknown;
};

function readToolCall(call: SdkToolCall, renamed: ReadonlyMap<string, string>): ModelToolCall {
  const errorName = (call.error as { name?: unknown } | undefined)?.name;
  return {
    toolCallId: String(call.toolCallId),
    toolName: renamed.get(call.toolName) ?? call.toolName,
    input: call.input,
    unparsable:
      call.invalid === true &&
      typeof call.input === "string" &&
      errorName === "AI_InvalidToolInputError",
  };
}

function describeModelError(error: unknown): string {
  const detail =
    error instanceof Error
      ? [
          (error as { statusCode?: unknown }).statusCode
            ? `HTTP ${(error as { statusCode?: unknown }).statusCode}`
            : undefined,
          error.message,
        ]
          .filter(Boolean)
          .join(": ")
      : String(error ?? "no response");
  const line = detail.replace(/\s+/g, " ").trim();
  return `the model call failed: ${line.length > 300 ? `${line.slice(0, 300)}…` : line}`;
}
