// How a call ends: one place records the row's end, tells the observer and gives the model its
// result, so no path can do one of the three and forget another.
import type { ToolResultPart } from "ai";
import type { ToolDescriptor } from "../policy/tools.ts";
import { isApprovalRequest } from "../tools/types.ts";
import type { Invocation } from "./invoke.ts";
import { describeToolResult, errorResult, interruptedText } from "./results.ts";
import type { BatchDeps, CallEnd, CallRef } from "./types.ts";

/** The call a result belongs to: its row, the tool the observer is told about, the model's ref. */
export type ClosingCall = {
  readonly recordId: string;
  /** The name the observer sees (the tool the model called). */
  readonly shown: string;
  readonly ref: CallRef;
};

/**
 * Ends a call that did not run to a result of its own: the row gets `end`, the observer hears
 * `failed` (unless `quiet`: a call that never started, or a refusal told to nobody before), and
 * the model reads `text`.
 */
export async function closeWith(
  deps: BatchDeps,
  call: ClosingCall,
  end: CallEnd,
  text: string,
  options: { quiet?: boolean } = {},
): Promise<ToolResultPart> {
  await deps.recorder.finish(call.recordId, end);
  if (options.quiet !== true) {
    deps.emit({ type: "tool-call", callId: call.recordId, tool: call.shown, state: "failed" });
  }
  return errorResult(call.ref, text);
}

/** Records how an invoked call ended, tells the observer, and gives the model its result. */
export async function closeCall(
  deps: BatchDeps,
  recordId: string,
  tool: ToolDescriptor,
  ref: CallRef,
  outcome: Invocation,
  ran?: string,
): Promise<ToolResultPart> {
  const extra = ran === undefined ? {} : { ran };
  const call: ClosingCall = { recordId, shown: tool.name, ref };
  const completed = async (result: { content: unknown; truncated?: boolean }) => {
    await deps.recorder.finish(recordId, {
      status: "completed",
      truncated: result.truncated === true,
      ...extra,
    });
    deps.emit({ type: "tool-call", callId: recordId, tool: tool.name, state: "completed" });
  };
  switch (outcome.end) {
    case "returned": {
      const result = outcome.result;
      if (isApprovalRequest(result)) throw new Error("unreachable: approval handled by caller");
      if (result.ok) {
        await completed(result);
        return describeToolResult(ref, result, deps.redactor);
      }
      await deps.recorder.finish(recordId, {
        status: "failed",
        code: String(result.code).slice(0, 64),
        truncated: result.truncated === true,
        ...extra,
      });
      deps.emit({ type: "tool-call", callId: recordId, tool: tool.name, state: "failed" });
      return describeToolResult(ref, result, deps.redactor);
    }
    case "threw": {
      deps.logger.error("a tool threw instead of returning a failure", {
        tool: tool.name,
        callId: recordId,
        error: outcome.error,
      });
      return closeWith(
        deps,
        call,
        { status: "failed", code: "failed", ...extra },
        `${tool.name} failed unexpectedly; nothing more is known.`,
      );
    }
    case "timeout": {
      if (outcome.result?.ok === true) {
        await completed(outcome.result);
        return describeToolResult(ref, outcome.result, deps.redactor);
      }
      return closeWith(
        deps,
        call,
        { status: "failed", code: "timeout", ...extra },
        `${tool.name} did not finish within ${outcome.timeoutMs} ms and was stopped.`,
      );
    }
    case "stopped": {
      if (outcome.result?.ok === true) {
        await completed(outcome.result);
        return describeToolResult(ref, outcome.result, deps.redactor);
      }
      return closeWith(
        deps,
        call,
        { status: "interrupted", code: "interrupted", ...extra },
        interruptedText,
      );
    }
  }
}
