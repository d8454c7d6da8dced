// ls: the entries of one directory in the workspace, with their types and file sizes. Names and
// sizes only (`internal` disclosure): no contents, no symlink targets.
import { lstat, readdir } from "node:fs/promises";
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type EntryType, readEntryType, type Workspace } from "../workspace.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const listDirectoryTool = defineBuiltin(
  {
    name: "ls",
    category: "files",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
    description:
      "List the entries of a directory in the workspace: name, type (file, directory, symlink, other) and size of files.",
  },
  ({ workspace }) => createListDirectoryTool(workspace),
);

export const listDirectoryLimits = { maxEntries: 1000 };

const inputSchema = z.strictObject({
  path: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe("Directory, relative to the workspace (default: the workspace itself)."),
});

type Entry = { name: string; type: EntryType; size?: number };

export function createListDirectoryTool(workspace: Workspace): ToolImplementation {
  return {
    name: "ls",
    description: listDirectoryTool.descriptor.description,
    inputSchema,
    timeoutMs: 30_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
        const given = inputSchema.parse(args).path ?? ".";
        const confined = await workspace.resolveExisting(given);
        if (!confined.stats.isDirectory()) {
          throw new ToolCallError(
            "invalid-input",
            `The path ${quotePath(given)} is a file, not a directory; use stat to describe it.`,
          );
        }
        const dir = await workspace.openDirectory(confined);
        try {
          const dirents = await readdir(dir.at("."), { withFileTypes: true });
          const names = dirents
            .filter((d) => !workspace.isDataPath(`${dir.absolute}/${d.name}`))
            .map((d) => d.name)
            .sort();
          const truncated = names.length > listDirectoryLimits.maxEntries;
          const entries: Entry[] = [];
          for (const name of names.slice(0, listDirectoryLimits.maxEntries)) {
            const stats = await lstat(dir.at(name)).catch(() => undefined);
            if (stats === undefined) continue; // removed since the listing
            const type = readEntryType(stats);
            entries.push(type === "file" ? { name, type, size: stats.size } : { name, type });
          }
          return {
            ok: true as const,
            content: { path: confined.relative, entries, total: names.length },
            truncated,
          };
        } finally {
          await dir.close();
        }
      }),
  };
}
