// find (alias glob): paths below a workspace directory whose name or relative path matches a
// glob. A pattern without a slash matches names at any depth (`*.ts`); with a slash it matches
// the path relative to the starting directory (`src/**/*.test.ts`). Bounded in entries visited,
// results and time; `truncated` says the list may not be exhaustive.
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";
import { createGlobMatcher } from "./glob.ts";
import { type WalkEntry, type WalkState, walkTree } from "./walk-tree.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const findFilesTool = defineBuiltin(
  {
    name: "find",
    category: "files",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
    aliases: ["glob"],
    description:
      "Find files and directories in the workspace by glob pattern. Directories end with '/'. Symbolic links are not followed.",
  },
  ({ workspace, options }) => createFindFilesTool(workspace, options.find ?? {}),
);

export const findLimits = {
  defaultResults: 200,
  maxResults: 1000,
  maxEntries: 100_000,
  maxDepth: 32,
  timeMs: 10_000,
};

/** Entries sent to the matcher at once. */
const matchBatch = 256;

const inputSchema = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .max(1024)
    .describe(
      "Glob: without a slash it matches names at any depth (*.md); with one, paths relative to `path` (src/**/*.ts).",
    ),
  path: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe("Directory to search, relative to the workspace (default: the workspace)."),
  limit: z
    .number()
    .int()
    .min(1)
    .max(findLimits.maxResults)
    .optional()
    .describe(`Most results to return (default ${findLimits.defaultResults}).`),
});

export function createFindFilesTool(
  workspace: Workspace,
  options: { readonly timeMs?: number } = {},
): ToolImplementation {
  const timeMs = options.timeMs ?? findLimits.timeMs;
  return {
    name: "find",
    description: findFilesTool.descriptor.description,
    inputSchema,
    timeoutMs: 30_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        const limit = input.limit ?? findLimits.defaultResults;
        const confined = await workspace.resolveExisting(input.path ?? ".");
        if (!confined.stats.isDirectory()) {
          throw new ToolCallError(
            "invalid-input",
            `The path ${quotePath(confined.given)} is not a directory.`,
          );
        }
        const deadline = Date.now() + timeMs;
        const matcher = createGlobMatcher(input.pattern, deadline);
        const state: WalkState = { stoppedBy: undefined, visited: 0 };
        const matches: string[] = [];
        let truncated = false;
        const walk = walkTree(
          workspace,
          confined,
          {
            maxDepth: findLimits.maxDepth,
            maxEntries: findLimits.maxEntries,
            deadline,
            signal: invocation.signal,
          },
          state,
        );
        // Entries are matched in batches (off the main thread when the pattern is not simple).
        let batch: WalkEntry[] = [];
        const flush = async (): Promise<boolean> => {
          const verdicts = await matcher.match(batch);
          for (const [i, entry] of batch.entries()) {
            if (verdicts[i] !== true) continue;
            if (matches.length >= limit) {
              truncated = true;
              return false;
            }
            matches.push(entry.type === "directory" ? `${entry.relative}/` : entry.relative);
          }
          batch = [];
          return true;
        };
        try {
          let going = true;
          for await (const entry of walk) {
            batch.push(entry);
            if (batch.length < matchBatch) continue;
            going = await flush();
            if (!going) break;
          }
          if (going) await flush();
        } catch (error) {
          if (!(error instanceof ToolCallError && error.code === "timeout")) throw error;
          state.stoppedBy ??= "deadline";
        } finally {
          await matcher.stop();
        }
        if (state.stoppedBy !== undefined) truncated = true;
        return {
          ok: true as const,
          content: {
            path: confined.relative,
            pattern: input.pattern,
            matches,
            ...(state.stoppedBy === undefined ? {} : { stoppedBy: state.stoppedBy }),
          },
          truncated,
        };
      }),
  };
}
