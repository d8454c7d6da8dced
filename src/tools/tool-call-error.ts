// Inside src/tools a tool stops early by throwing ToolCallError; `runGuarded` turns it into the
// ToolFailure the model sees. It never leaves src/tools: to the run engine a failed call is a
// result, not an exception, so one bad call cannot take a run down.
import { quoteUntrusted } from "../policy/quote.ts";
import { SandboxUnavailableError } from "../sandbox/pids-cgroup.ts";
import type { ToolCallContext, ToolFailure, ToolResult } from "./types.ts";

export type ToolFailureCode =
  | "refused"
  | "not-found"
  | "timeout"
  | "too-large"
  | "invalid-input"
  | "failed"
  | "interrupted"
  | "outside-url-grant";

export class ToolCallError extends Error {
  readonly code: ToolFailureCode;
  constructor(code: ToolFailureCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ToolCallError";
    this.code = code;
  }
}

/** A path or other untrusted string as the model gave it, safe to put in a message. */
export function quotePath(given: string): string {
  return quoteUntrusted(given, 200);
}

/** Throws `interrupted` if the call was stopped. */
export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ToolCallError("interrupted", "The call was stopped.");
}

function describeUnexpected(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === "string") return `operating system error ${code}`;
  return "unexpected error";
}

/**
 * Runs a tool body, turning a ToolCallError into its failure and anything else into `failed`
 * without the raw message (which may hold absolute paths outside the workspace).
 */
export async function runGuarded<T extends ToolResult>(
  invocation: ToolCallContext,
  body: () => Promise<T>,
): Promise<T | ToolFailure> {
  try {
    throwIfAborted(invocation.signal);
    return await body();
  } catch (error) {
    if (error instanceof ToolCallError) {
      return { ok: false, code: error.code, error: error.message };
    }
    if (error instanceof SandboxUnavailableError) {
      return { ok: false, code: "refused", error: error.message };
    }
    if (invocation.signal.aborted) {
      return { ok: false, code: "interrupted", error: "The call was stopped." };
    }
    return { ok: false, code: "failed", error: `The tool failed: ${describeUnexpected(error)}.` };
  }
}
