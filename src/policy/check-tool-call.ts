// The executor's gate (DESIGN §4), as values the run engine turns into tool-error results. It runs
// before the registry is asked anything, because the registry knows every tool in the process and
// the model may name a tool it was never offered.
//
// A name outside the run's set and a name that exists nowhere get the same code and the same
// message, so a model (or whoever steers it) cannot probe which tools exist. A hidden execute half
// is in the set only so the approval path can run it; named by the model it is always refused,
// otherwise guessing `execute_write_file` would skip the approval the pair exists to collect.
import type { EffectiveToolSet } from "./effective-set.ts";
import { quoteUntrusted } from "./quote.ts";
import type { ToolDescriptor, ToolNameKind } from "./tools.ts";

/** Who is asking: the model's own tool call, or the approval path running an approved call. */
export type ToolCallOrigin = "model" | "approval";

export type ToolCallRefusal = "tool-unavailable" | "hidden-half" | "approval-not-bound";

export type ToolCallCheck =
  | {
      readonly allowed: true;
      readonly tool: ToolDescriptor;
      /** How the call named it; `execute-half` means run the tool's second half. */
      readonly kind: ToolNameKind;
    }
  | {
      readonly allowed: false;
      readonly code: ToolCallRefusal;
      /** Safe to show the model. */
      readonly message: string;
    };

function refuseUnavailable(
  name: string,
  code: ToolCallRefusal = "tool-unavailable",
): ToolCallCheck {
  return {
    allowed: false,
    code,
    message: `Tool ${quoteUntrusted(name)} is not available in this run.`,
  };
}

/** Decides whether a call naming `name` may run in a run whose effective set is `set`. */
export function checkToolCall(
  set: EffectiveToolSet,
  name: string,
  origin: ToolCallOrigin,
): ToolCallCheck {
  const entry = typeof name === "string" ? set.names.get(name) : undefined;
  if (entry === undefined) return refuseUnavailable(String(name));
  if (entry.kind === "execute-half" && origin !== "approval") {
    // The same words as for a tool that does not exist (issue 5): the model learns nothing about
    // which halves exist. The code still tells the audit trail what was attempted.
    return refuseUnavailable(name, "hidden-half");
  }
  return { allowed: true, tool: entry.tool, kind: entry.kind };
}

/**
 * Decides whether an approval request returned by the tool `fromTool` may be honoured: only if
 * that tool is registered to make it (its own hidden half is `executeToolName`) and that half is
 * in the run's set. Anything else shaped like a request (an MCP reply, fetched JSON, another
 * tool's half) is refused and nothing runs. `executeToolName` comes from tool output: untrusted.
 */
export function checkApprovalRequest(
  set: EffectiveToolSet,
  fromTool: string,
  executeToolName: unknown,
): ToolCallCheck {
  const from = set.names.get(fromTool);
  const target = typeof executeToolName === "string" ? set.names.get(executeToolName) : undefined;
  if (
    from === undefined ||
    from.kind === "execute-half" ||
    target === undefined ||
    target.kind !== "execute-half" ||
    target.tool !== from.tool ||
    from.tool.executeHalf !== executeToolName
  ) {
    return {
      allowed: false,
      code: "approval-not-bound",
      message: `Tool ${quoteUntrusted(fromTool)} returned an approval request it is not registered to make; nothing was run.`,
    };
  }
  return { allowed: true, tool: target.tool, kind: "execute-half" };
}
