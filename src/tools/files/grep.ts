// grep: lines matching a JavaScript regular expression in the workspace's text files. Files are
// read here (confined, each under a size bound, binaries skipped) and matched in a worker thread
// with one deadline for the whole call: a pattern that backtracks catastrophically costs at most
// the deadline, after which the worker is terminated and what was found so far is returned,
// flagged truncated.

import type { FileHandle } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import { z } from "zod";
import { quoteUntrusted } from "../../policy/quote.ts";
import { defineBuiltin } from "../builtin.ts";
import { isBinary, sniffBytes } from "../text.ts";
import { runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";
import { createGlobMatcher, type GlobMatcher } from "./glob.ts";
import type { GrepWorkerReply, GrepWorkerRequest } from "./grep-worker.ts";
import { type WalkState, walkTree } from "./walk-tree.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const grepTool = defineBuiltin(
  {
    name: "grep",
    category: "files",
    risk: "read-only",
    disclosure: "private",
    egress: false,
    description:
      "Search text files in the workspace for lines matching a JavaScript regular expression. Returns path, line number and line. Binary and very large files are skipped.",
  },
  ({ workspace, options }) => createGrepTool(workspace, options.grep ?? {}),
);

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

type Match = { path: string; line: number; text: string };
type Loaded = { relative: string } & (
  | { text: string }
  | { skipped: "large" | "binary" | "linked" }
);

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
    match(texts: string[], maxMatches: number): Promise<GrepWorkerReply> {
      const w = ensure();
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending = { id, resolve, reject };
        const request: GrepWorkerRequest = {
          id,
          texts,
          maxMatches,
          maxLineChars: grepLimits.maxLineChars,
        };
        w.postMessage(request);
      });
    },
    warm(): void {
      ensure();
    },
    async stop(): Promise<void> {
      const w = worker;
      worker = undefined;
      if (w !== undefined) await w.terminate();
    },
  };
}

/**
 * A small text file's contents, read from a handle opened by openEntryAt (closed here). Only
 * regular files are read; large, binary and hard-linked ones are skipped and counted.
 */
async function loadText(
  workspace: Workspace,
  relative: string,
  handle: FileHandle,
): Promise<Loaded | undefined> {
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return undefined;
    if (workspace.refusalOf(stats, relative) !== undefined) return { relative, skipped: "linked" };
    if (stats.size > grepLimits.maxFileBytes) return { relative, skipped: "large" };
    const bytes =
      stats.size < 64 * 1024 ? await readSmall(handle, stats.size) : await handle.readFile();
    if (bytes.length > grepLimits.maxFileBytes) return { relative, skipped: "large" };
    if (isBinary(bytes.subarray(0, sniffBytes)) || bytes.includes(0)) {
      return { relative, skipped: "binary" };
    }
    return { relative, text: bytes.toString("utf8") };
  } finally {
    await handle.close();
  }
}

/** One read for a small file (one byte more than its size, to notice it grew). */
async function readSmall(handle: FileHandle, size: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(size + 1);
  const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
  return bytesRead <= size ? buffer.subarray(0, bytesRead) : await handle.readFile();
}

/** Files read ahead of the matcher, and how much is sent to it at once. */
const readAhead = 16;
const batchFiles = 128;
const batchBytes = 1024 * 1024;

export function createGrepTool(
  workspace: Workspace,
  options: { timeMs?: number } = {},
): ToolImplementation {
  const timeMs = options.timeMs ?? grepLimits.timeMs;
  return {
    name: "grep",
    description: grepTool.descriptor.description,
    inputSchema,
    timeoutMs: timeMs + 20_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
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
        const globMatcher: GlobMatcher | undefined =
          input.glob === undefined ? undefined : createGlobMatcher(input.glob, deadline, "glob");
        const start = await workspace.resolveExisting(input.path ?? ".");
        const matcher = startMatcher(input.pattern, flags);
        // Boot the worker (tens of milliseconds) while the first files are found and read.
        matcher.warm();
        const matches: Match[] = [];
        const skipped = { large: 0, binary: 0, linked: 0 };
        let outputBytes = 0;
        let truncated = false;
        let stoppedBy: "deadline" | "entries" | "matches" | "output" | undefined;
        let filesSearched = 0;
        const aborted = new Promise<"aborted">((resolve) => {
          invocation.signal.addEventListener("abort", () => resolve("aborted"), { once: true });
        });

        let batch: { relative: string; text: string }[] = [];
        let batchSize = 0;

        /** Sends the batch to the matcher; false when the search must stop. */
        const flush = async (): Promise<boolean> => {
          if (batch.length === 0) return true;
          const files = batch;
          batch = [];
          batchSize = 0;
          const remaining = deadline - Date.now();
          if (remaining <= 0) {
            stoppedBy = "deadline";
            return false;
          }
          let timer: NodeJS.Timeout | undefined;
          const reply = await Promise.race([
            matcher.match(
              files.map((f) => f.text),
              limit - matches.length + 1,
            ),
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
            const relative = files[match.file]?.relative ?? "";
            const size = Buffer.byteLength(match.text) + relative.length + 16;
            if (outputBytes + size > grepLimits.maxOutputBytes) {
              stoppedBy = "output";
              return false;
            }
            outputBytes += size;
            matches.push({ path: relative, line: match.line, text: match.text });
          }
          if (reply.more) {
            stoppedBy = "matches";
            return false;
          }
          return true;
        };

        /** Takes one loaded file into the batch; false when the search must stop. */
        const absorb = async (loaded: Loaded | undefined): Promise<boolean> => {
          if (loaded === undefined) return true;
          if ("skipped" in loaded) {
            skipped[loaded.skipped]++;
            return true;
          }
          filesSearched++;
          batch.push(loaded);
          batchSize += loaded.text.length;
          return batch.length >= batchFiles || batchSize >= batchBytes ? flush() : true;
        };

        // Files are opened in walk order through the directory the walk holds (that handle is
        // valid only until the walk moves on), then checked and read concurrently.
        const reads: Promise<Loaded | undefined>[] = [];
        const next = () => reads.shift() as Promise<Loaded | undefined>;
        try {
          let going = true;
          if (start.stats.isFile()) {
            reads.push(loadText(workspace, start.relative, await workspace.openFile(start)));
          } else {
            const state: WalkState = { stoppedBy: undefined, visited: 0 };
            const walk = walkTree(
              workspace,
              start,
              {
                maxDepth: grepLimits.maxDepth,
                maxEntries: grepLimits.maxEntries,
                deadline,
                signal: invocation.signal,
              },
              state,
            );
            for await (const entry of walk) {
              if (entry.type !== "file") continue;
              if (globMatcher !== undefined) {
                const verdict = await globMatcher.match([entry]).catch((error: unknown) => {
                  if (error instanceof ToolCallError && error.code === "timeout") return undefined;
                  throw error;
                });
                if (verdict === undefined) {
                  stoppedBy = "deadline";
                  going = false;
                  break;
                }
                if (verdict[0] !== true) continue;
              }
              const handle = await workspace.openEntryAt(entry.parent, entry.name);
              if (handle === undefined) continue;
              reads.push(loadText(workspace, entry.relative, handle));
              if (reads.length >= readAhead) {
                going = await absorb(await next());
                if (!going) break;
              }
            }
            stoppedBy ??= state.stoppedBy;
          }
          while (going && reads.length > 0) going = await absorb(await next());
          if (going) await flush();
        } finally {
          // Every handle opened is closed before the call returns, whatever stopped it.
          await Promise.allSettled(reads);
          await matcher.stop();
          await globMatcher?.stop();
        }
        if (stoppedBy !== undefined) truncated = true;
        return {
          ok: true as const,
          content: {
            pattern: input.pattern,
            matches,
            filesSearched,
            ...(skipped.large + skipped.binary + skipped.linked > 0
              ? {
                  skipped: {
                    large: skipped.large,
                    binary: skipped.binary,
                    // Files with more than one hard link (refused unless the operator allows).
                    ...(skipped.linked > 0 ? { linked: skipped.linked } : {}),
                  },
                }
              : {}),
            ...(stoppedBy === undefined ? {} : { stoppedBy }),
          },
          truncated,
        };
      }),
  };
}
