// get_time: the current date and time on this machine. `public` disclosure: the clock and the
// time zone name, nothing else.
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { runGuarded } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const getTimeTool = defineBuiltin(
  {
    name: "get_time",
    category: "context",
    risk: "read-only",
    disclosure: "public",
    egress: false,
    description: "Tell the current date and time (ISO 8601, UTC) and this machine's time zone.",
  },
  () => createGetTimeTool(),
);

const inputSchema = z.strictObject({});

export function createGetTimeTool(): ToolImplementation {
  return {
    name: "get_time",
    description: getTimeTool.descriptor.description,
    inputSchema,
    timeoutMs: 5_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        inputSchema.parse(args);
        const now = invocation.now();
        const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
        return {
          ok: true as const,
          content: {
            utc: now.toISOString(),
            unixMs: now.getTime(),
            timeZone,
            local: now.toLocaleString("en-US", { timeZone, timeZoneName: "short" }),
          },
        };
      }),
  };
}
