// stat: what a path is, how big, when it changed. Never its contents.
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { runGuarded } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, readEntryType, type Workspace } from "../workspace.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const statTool = defineBuiltin(
  {
    name: "stat",
    category: "files",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
    description:
      "Describe a file or directory in the workspace: type, size, permissions and modification time (no contents).",
  },
  ({ workspace }) => createStatTool(workspace),
);

const inputSchema = z.strictObject({
  path: z.string().min(1).max(4096).describe("Path, relative to the workspace."),
});

export function createStatTool(workspace: Workspace): ToolImplementation {
  return {
    name: "stat",
    description: statTool.descriptor.description,
    inputSchema,
    timeoutMs: 10_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
        const confined = await workspace.resolveExisting(inputSchema.parse(args).path);
        const stats = confined.stats;
        return {
          ok: true as const,
          content: {
            path: confined.relative,
            type: readEntryType(stats),
            size: stats.size,
            mode: (stats.mode & 0o7777).toString(8).padStart(4, "0"),
            modified: stats.mtime.toISOString(),
          },
        };
      }),
  };
}
