// One tool call as a span, by the GenAI semantic conventions (`execute_tool <name>`): the tool's
// name and the call's id; its arguments only when the operator allowed content in traces
// (PEERGATE_TRACE_CONTENT=1), since they carry what the model was told. A result that is a
// failure marks the span with the failure's code. What the tool starts (a sandboxed process,
// src/tools/run-process.ts) nests under it.

import type { ToolResult } from "../tools/types.ts";
import { failSpan, inSpan, traceContent } from "../trace.ts";

const argumentsLimit = 16 * 1024;

export function traceToolCall(
  name: string,
  callId: string,
  args: unknown,
  execute: () => Promise<ToolResult>,
): Promise<ToolResult> {
  const shown = traceContent() ? JSON.stringify(args ?? null).slice(0, argumentsLimit) : undefined;
  return inSpan(
    `execute_tool ${name}`,
    {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": name,
      "gen_ai.tool.call.id": callId,
      ...(shown === undefined ? {} : { "gen_ai.tool.call.arguments": shown }),
    },
    async (span) => {
      const result = await execute();
      if (typeof result === "object" && result !== null && "ok" in result && result.ok === false) {
        failSpan(span, undefined, typeof result.code === "string" ? result.code : "tool-error");
      }
      return result;
    },
  );
}
