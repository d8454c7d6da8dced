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
export async function runSegment(segment: SegmentContext): Promise<SegmentEnd> {
  if (segment.resume && "answer" in segment.resume) {
    await answerAskCaller(segment, segment.resume.answer.pending, segment.resume.answer.text);
  } else if (segment.resume) {
    const end = await finishParkedBatch(segment, segment.resume.batch, segment.resume.decision);
    if (end) return end;
  }
  for (;;) {
    if (segment.signal.aborted) return { kind: "stopped" };
    const spent = segment.meters.exhausted();
    if (spent) return { kind: "budget", budget: spent };

    const step = await callModel(segment);
    if (step.kind === "stopped") return step;
    if (step.kind === "failed") return step;

    const calls = step.calls;
    const over = calls.length > 0 ? segment.meters.exhausted() : undefined;
    segment.messages.push(...step.assistant);
    if (calls.length === 0) {
      if (step.capped && segment.meters.exhausted()) {
        return {
          kind: "budget",
          budget: segment.meters.exhausted() as BudgetName,
          text: step.text,
        };
      }
      return { kind: "completed", text: step.text };
    }
    if (over) {
      // No step is left to read the results: nothing runs, every call is answered "not started".
      await segment.batch.recorder.open(
        calls.map((call) => ({
          recordId: segment.batch.takeRecordId(call.toolCallId),
          tool: String(call.toolName).slice(0, 128),
          argsDigest: digestArgs(call.input),
          status: "not-started" as const,
          code: "budget-exceeded",
        })),
      );
      segment.messages.push(
        toolMessage(
          calls.map((call, index) => ({ index, part: errorResult(call, notStartedText) })),
        ),
      );
      return { kind: "budget", budget: over };
    }

    // Other instances see today's totals before this run spends time in its tools.
    await segment.flushUsage();
    await segment.checkBetweenSteps();
    const question = segment.canAskCaller === true ? readAskCaller(segment, calls) : undefined;
    if (question) return askCaller(segment, question);
    const outcome = await executeToolBatch(segment.batch, calls);
    if (outcome.approvals.length > 0) {
      return park(outcome.results, outcome.approvals, outcome.held);
    }
    segment.messages.push(toolMessage(outcome.results));
    if (outcome.stopped) return { kind: "stopped" };
    await segment.checkpoint();
  }
}

/** Answers the call a resumed run parked on; once nothing waits, its batch runs (src/gate/resume.ts). */
async function finishParkedBatch(
  segment: SegmentContext,
  batch: PendingBatch,
  decision: ApprovalDecision,
): Promise<SegmentEnd | undefined> {
  const answered = await answerParkedBatch(segment.batch, batch, decision, (id) =>
    inputOf(segment, id),
  );
  if (answered.kind === "park") return park(answered.results, answered.approvals, answered.held);
  segment.messages.push(toolMessage(answered.results));
  if (answered.stopped) return { kind: "stopped" };
  await segment.checkpoint();
  return undefined;
}

/** The model's input for one of its tool calls, from the conversation (the latest such call). */
function inputOf(segment: SegmentContext, toolCallId: string): unknown {
  for (let i = segment.messages.length - 1; i >= 0; i--) {
    const message = segment.messages[i];
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
  segment: SegmentContext,
  calls: readonly ModelToolCall[],
): { call: ModelToolCall; question: string } | undefined {
  const [call, ...others] = calls;
  if (call === undefined || others.length > 0 || call.unparsable) return undefined;
  const gate = checkToolCall(segment.batch.controls.current.set, call.toolName, "model");
  if (!gate.allowed || (gate.kind !== "tool" && gate.kind !== "alias")) return undefined;
  if (gate.tool.name !== askCallerToolName) return undefined;
  const question = readQuestion(call.input);
  return question === undefined ? undefined : { call, question };
}

async function askCaller(
  segment: SegmentContext,
  asked: { call: ModelToolCall; question: string },
): Promise<SegmentEnd> {
  const { call, question } = asked;
  const callId = segment.batch.takeRecordId(call.toolCallId);
  await segment.batch.recorder.open([
    {
      recordId: callId,
      tool: askCallerToolName,
      argsDigest: digestArgs(call.input),
      status: "parked",
    },
  ]);
  if (segment.signal.aborted) {
    await segment.batch.recorder.finish(callId, { status: "not-started" });
    segment.messages.push(toolMessage([{ index: 0, part: errorResult(call, notStartedText) }]));
    return { kind: "stopped" };
  }
  return {
    kind: "input-required",
    pending: { callId, toolCallId: call.toolCallId, toolName: call.toolName, question },
  };
}

/** The caller's answer, as the result of the `ask_caller` call the run waited on. */
async function answerAskCaller(
  segment: SegmentContext,
  pending: PendingInput,
  text: string,
): Promise<void> {
  await segment.batch.recorder.finish(pending.callId, { status: "completed" });
  segment.messages.push(
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
  await segment.checkpoint();
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
async function callModel(segment: SegmentContext): Promise<StepOutcome> {
  const telemetry = modelCallTelemetry();
  try {
    return await callModelWith(segment, telemetry.options);
  } finally {
    telemetry.close();
  }
}

async function callModelWith(
  segment: SegmentContext,
  telemetry: ModelCallTelemetry["options"],
): Promise<StepOutcome> {
  const maxOutputTokens = segment.meters.maxOutputTokens(segment.price);
  const hasTools = Object.keys(segment.tools).length > 0;
  let text = "";
  let streamError: unknown;
  let usage: LanguageModelUsage | undefined;
  let calls: ModelToolCall[] = [];
  let assistant: ModelMessage[] = [];
  let finishReason: string | undefined;
  const options = {
    model: segment.model,
    ...(segment.instructions.trim() === "" ? {} : { instructions: segment.instructions }),
    messages: segment.messages,
    ...(hasTools ? { tools: segment.tools } : {}),
    abortSignal: segment.signal,
    maxRetries: segment.maxRetries,
    ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
    stopWhen: isStepCount(1),
    ...telemetry,
  };
  try {
    if (!segment.stream) {
      const result = await generateText(options);
      if (segment.signal.aborted) return { kind: "stopped" };
      text = result.text;
      if (text !== "") segment.onTextDelta(text);
      usage = result.usage;
      finishReason = result.finishReason;
      calls = result.toolCalls
        .filter((call) => call.providerExecuted !== true)
        .map((call) => readToolCall(call, segment.renamed));
      assistant = result.responseMessages.filter((m) => m.role === "assistant");
      return chargeModelStep(segment, {
        text,
        usage,
        calls,
        assistant,
        finishReason,
        maxOutputTokens,
      });
    }
    const result = streamText({
      ...options,
      // Errors are read from the stream below; the default handler would print them.
      onError: () => {},
    });
    for await (const part of result.fullStream) {
      if (part.type === "text-delta") {
        text += part.text;
        segment.onTextDelta(part.text);
      } else if (part.type === "error") {
        streamError ??= part.error;
      }
    }
    if (segment.signal.aborted) return { kind: "stopped" };
    if (streamError === undefined) {
      usage = await result.usage;
      finishReason = await result.finishReason;
      calls = (await result.toolCalls)
        .filter((call) => call.providerExecuted !== true)
        .map((call) => readToolCall(call, segment.renamed));
      assistant = (await result.responseMessages).filter((m) => m.role === "assistant");
    }
  } catch (error) {
    if (segment.signal.aborted) return { kind: "stopped" };
    streamError ??= error;
  }
  if (segment.signal.aborted) return { kind: "stopped" };
  if (streamError !== undefined || usage === undefined) {
    segment.logger.warn("the model call failed", { error: streamError });
    return {
      kind: "failed",
      error: { code: "model-error", message: describeModelError(streamError) },
    };
  }
  return chargeModelStep(segment, { text, usage, calls, assistant, finishReason, maxOutputTokens });
}

/** Charges a finished model step to the run's meters and usage. */
function chargeModelStep(
  segment: SegmentContext,
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
  if (tokens === undefined && segment.meters.metersUsage) {
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
    costUsd: segment.price && tokens ? computeCostUsd(segment.price, tokens) : 0,
  };
  segment.meters.charge(delta);
  segment.used.steps += 1;
  segment.used.tokens += delta.tokens;
  segment.used.costUsd += delta.costUsd;
  segment.chargeStep({ tokens: delta.tokens, costUsd: delta.costUsd });
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
