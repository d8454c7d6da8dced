// What the model reads back for each tool call. Every call the model made gets exactly one result,
// including calls that were refused, never started or cut short, so the conversation stays valid
// for the next step and for a later turn.
import type { JSONValue, ToolResultPart } from "ai";
import type { Redactor } from "../sandbox/redact.ts";
import type { ToolResult } from "../tools/types.ts";

/** A tool's content is capped again here, whatever the tool did (the tools bound their own). */
export const maxResultChars = 512 * 1024;

export const interruptedText =
  "The call was interrupted when the run was stopped; it may have made part of its changes.";
export const notStartedText = "The call was not started; it changed nothing.";
export const batchRejectedText =
  "The call was not run: an operator rejected another call of the same batch, so nothing of the batch ran without an operator's approval; it changed nothing. Call it again if it is still wanted.";

export type CallRef = { readonly toolCallId: string; readonly toolName: string };

function toJson(value: unknown): JSONValue {
  try {
    return (JSON.parse(JSON.stringify(value ?? null)) as JSONValue) ?? null;
  } catch {
    return String(value);
  }
}

export function errorResult(call: CallRef, message: string): ToolResultPart {
  return {
    type: "tool-result",
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    output: { type: "error-text", value: message },
  };
}

/** Every string inside `value` redacted (keys too), before anything serialises it. */
function redactDeep(value: unknown, redactor: Redactor, depth = 0): unknown {
  if (typeof value === "string") return redactor.redact(value);
  if (depth > 64 || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map((item) => redactDeep(item, redactor, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[redactor.redact(key)] = redactDeep(item, redactor, depth + 1);
  }
  return out;
}

/**
 * The result part for a finished call (success or failure; never an approval request). With a
 * redactor, every secret peergate holds is replaced in the text the model reads, whichever tool
 * printed it: output, error text and every string of a structured result.
 */
export function describeToolResult(
  call: CallRef,
  result: Exclude<ToolResult, { kind: "approval-request" }>,
  redactor?: Redactor,
): ToolResultPart {
  const redact = (text: string, wasCut = false) =>
    redactor === undefined ? text : redactor.redact(text, { cut: wasCut });
  if (!result.ok) {
    const { text, wasCut } = cut(result.error);
    return errorResult(call, redact(text, wasCut));
  }
  if (typeof result.content === "string") {
    const { text: raw, wasCut } = cut(result.content);
    const text = redact(raw, wasCut || result.truncated === true);
    const note =
      result.truncated === true || wasCut ? "\n[output truncated: it was cut at its bound]" : "";
    return {
      type: "tool-result",
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      output: { type: "text", value: `${text}${note}` },
    };
  }
  let value = toJson(
    redactor === undefined ? result.content : redactDeep(result.content, redactor),
  );
  const encoded = JSON.stringify(value);
  if (encoded.length > maxResultChars) {
    value = { truncated: true, partialJson: encoded.slice(0, maxResultChars) };
  } else if (result.truncated === true) {
    value = { truncated: true, result: value };
  }
  return {
    type: "tool-result",
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    output: { type: "json", value },
  };
}

function cut(text: string): { text: string; wasCut: boolean } {
  return text.length > maxResultChars
    ? { text: text.slice(0, maxResultChars), wasCut: true }
    : { text, wasCut: false };
}

export function rejectedText(reason: string | undefined): string {
  const trimmed = reason?.trim().slice(0, 2_000);
  return trimmed
    ? `An operator rejected this call; it did not run. Their reason: ${trimmed}`
    : "An operator rejected this call; it did not run.";
}
