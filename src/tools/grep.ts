// grep: lines matching a JavaScript regular expression in the workspace's text files. Files are
// read here (confined, each under a size bound, binaries skipped) and matched in a worker thread
// with one deadline for the whole call: a pattern that backtracks catastrophically costs at most
// the deadline, after which the worker is terminated and what was found so far is returned,
// flagged truncated.

import type { FileHandle } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import { z } from "zod";
import { quoteUntrusted } from "../policy/quote.ts";
import { matchPattern } from "./find-files.ts";
import type { GrepWorkerMatch, GrepWorkerReply } from "./grep-worker.ts";
import { isBinary, sniffBytes } from "./text.ts";
import { runGuarded, ToolCallError } from "./tool-call-error.ts";
import type { ToolImplementation } from "./types.ts";
import { type WalkState, walkTree } from "./walk-tree.ts";
import { checkCallWorkspace, type Workspace } from "./workspace.ts";

export const grepLimits = {
  defaultMatches: 200,
  maxMatches: 1000,
  /** Files larger than this are skipped (and counted). */
  maxFileBytes: 1024 * 1024,
  maxOutputBytes: 256 * 1024,
  maxLineChars: 500,
  maxEntries: 100_000,
  maxDepth: 32,
  /** Default deadline for the whole call. */
  timeMs: 10_000,
};

const inputSchema = z.strictObject({
  pattern: z.string().min(1).max(1024).describe("JavaScript regular expression, matched per line."),
  path: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe("File or directory to search, relative to the workspace (default: the workspace)."),
  glob: z
    .string()
    .min(1)
    .max(1024)
    .optional()
    .describe("Only search files whose name (or path, if it has a slash) matches this glob."),
  ignoreCase: z.boolean().optional(),
  limit: z
    .number()
    .int()
    .min(1)
    .max(grepLimits.maxMatches)
    .optional()
    .describe(`Most matching lines to return (default ${grepLimits.defaultMatches}).`),
});

type Match = { path: string } & GrepWorkerMatch;

/** One worker per call, asked one file at a time. */
function startMatcher(pattern: string, flags: string) {
  let worker: Worker | undefined;
  let nextId = 1;
  let pending:
    | { id: number; resolve: (r: GrepWorkerReply) => void; reject: (e: Error) => void }
    | undefined;
  const fail = (error: Error) => {
    pending?.reject(error);
    pending = undefined;
  };
  const ensure = (): Worker => {
    if (worker !== undefined) return worker;
    const started = new Worker(new URL("./grep-worker.ts", import.meta.url), {
      workerData: { pattern, flags },
      resourceLimits: { maxOldGenerationSizeMb: 128 },
    });
    started.on("message", (reply: GrepWorkerReply) => {
      if (pending?.id === reply.id) {
        pending.resolve(reply);
        pending = undefined;
      }
    });
    started.on("error", (error) => fail(error));
    started.on("exit", () => fail(new Error("grep worker exited")));
    worker = started;
    return started;
  };
  return {
    match(text: string, maxMatches: number): Promise<GrepWorkerReply> {
      const w = ensure();
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending = { id, resolve, reject };
        w.postMessage({ id, text, maxMatches, maxLineChars: grepLimits.maxLineChars });
      });
    },
    async stop(): Promise<void> {
      const w = worker;
      worker = undefined;
      if (w !== undefined) await w.terminate();
    },
  };
}

/** Reads a whole small text file from an open handle; undefined for large or binary files. */
async function readSmallText(
  handle: FileHandle,
): Promise<{ text: string } | { skipped: "large" | "binary" }> {
  const stats = await handle.stat();
  if (stats.size > grepLimits.maxFileBytes) return { skipped: "large" };
  const bytes = await handle.readFile();
  if (bytes.length > grepLimits.maxFileBytes) return { skipped: "large" };
  if (isBinary(bytes.subarray(0, sniffBytes)) || bytes.includes(0)) return { skipped: "binary" };
  return { text: bytes.toString("utf8") };
}

export function createGrepTool(
  workspace: Workspace,
  options: { timeMs?: number } = {},
): ToolImplementation {
  const timeMs = options.timeMs ?? grepLimits.timeMs;
  return {
    name: "grep",
    description:
      "Search text files in the workspace for lines matching a JavaScript regular expression. Returns path, line number and line. Binary and very large files are skipped.",
    inputSchema,
    timeoutMs: timeMs + 20_000,
    execute: (args, ctx) =>
      runGuarded(ctx, async () => {
        checkCallWorkspace(ctx.workspace, workspace);
        const input = inputSchema.parse(args);
        const flags = input.ignoreCase === true ? "i" : "";
        try {
          new RegExp(input.pattern, flags);
        } catch (error) {
          throw new ToolCallError(
            "invalid-input",
            `The pattern ${quoteUntrusted(input.pattern)} is not a valid regular expression: ${(error as Error).message}`,
          );
        }
        const limit = input.limit ?? grepLimits.defaultMatches;
        const deadline = Date.now() + timeMs;
        const start = await workspace.resolveExisting(input.path ?? ".");
        const matcher = startMatcher(input.pattern, flags);
        const matches: Match[] = [];
        const skipped = { large: 0, binary: 0 };
        let outputBytes = 0;
        let truncated = false;
        let stoppedBy: "deadline" | "entries" | "matches" | "output" | undefined;
        let filesSearched = 0;
        const aborted = new Promise<"aborted">((resolve) => {
          ctx.signal.addEventListener("abort", () => resolve("aborted"), { once: true });
        });

        /** Returns false when the search must stop. */
        const search = async (relative: string, handle: FileHandle): Promise<boolean> => {
          let read: Awaited<ReturnType<typeof readSmallText>>;
          try {
            read = await readSmallText(handle);
          } finally {
            await handle.close();
          }
          if ("skipped" in read) {
            skipped[read.skipped]++;
            return true;
          }
          filesSearched++;
          const remaining = deadline - Date.now();
          if (remaining <= 0) {
            stoppedBy = "deadline";
            return false;
          }
          let timer: NodeJS.Timeout | undefined;
          const reply = await Promise.race([
            matcher.match(read.text, limit - matches.length + 1),
            new Promise<"deadline">((resolve) => {
              timer = setTimeout(() => resolve("deadline"), remaining);
            }),
            aborted,
          ]).finally(() => clearTimeout(timer));
          if (reply === "aborted") throw new ToolCallError("interrupted", "The call was stopped.");
          if (reply === "deadline") {
            stoppedBy = "deadline";
            return false;
          }
          for (const match of reply.matches) {
            if (matches.length >= limit) {
              stoppedBy = "matches";
              return false;
            }
            const size = Buffer.byteLength(match.text) + relative.length + 16;
            if (outputBytes + size > grepLimits.maxOutputBytes) {
              stoppedBy = "output";
              return false;
            }
            outputBytes += size;
            matches.push({ path: relative, ...match });
          }
          if (reply.more) {
            stoppedBy = "matches";
            return false;
          }
          return true;
        };

        try {
          if (start.stats.isFile()) {
            await search(start.relative, await workspace.openFile(start));
          } else {
            const state: WalkState = { stoppedBy: undefined, visited: 0 };
            const walk = walkTree(
              workspace,
              start,
              {
                maxDepth: grepLimits.maxDepth,
                maxEntries: grepLimits.maxEntries,
                deadline,
                signal: ctx.signal,
              },
              state,
            );
            for await (const entry of walk) {
              if (entry.type !== "file") continue;
              if (
                input.glob !== undefined &&
                !matchPattern(input.glob, entry.name, entry.fromStart)
              ) {
                continue;
              }
              const handle = await workspace.openFileAt(entry.parent, entry.name);
              if (handle === undefined) continue;
              if (!(await search(entry.relative, handle))) break;
            }
            stoppedBy ??= state.stoppedBy;
          }
        } finally {
          await matcher.stop();
        }
        if (stoppedBy !== undefined) truncated = true;
        return {
          ok: true as const,
          content: {
            pattern: input.pattern,
            matches,
            filesSearched,
            ...(skipped.large + skipped.binary > 0 ? { skipped } : {}),
            ...(stoppedBy === undefined ? {} : { stoppedBy }),
          },
          truncated,
        };
      }),
  };
}
