// Glob patterns from the model, for find and grep, matched so that no pattern can stall the
// server. Node's matcher turns a pattern into a regular expression, and some patterns backtrack
// for minutes on one name (`*a*a*a*a*a*a*b` against a long name of `a`s). So:
//
// - complexity the matcher would multiply is refused up front with a clear error: brace
//   expansions of more than `globLimits.maxAlternatives` alternatives (or any `{x..y}` range),
//   and extglob groups (`+(…)`, `*(…)`, `@(…)`, `?(…)`, `!(…)`);
// - a simple pattern (at most one `*` per segment and one `**`, no braces) is matched here, on
//   the main thread, where its cost is linear;
// - anything else is matched in a worker thread under the call's deadline; at the deadline the
//   worker is terminated and the call stops, flagged truncated.
import path from "node:path";
import { Worker } from "node:worker_threads";
import { ToolCallError } from "../tool-call-error.ts";
import type { GlobWorkerReply, GlobWorkerRequest } from "./glob-worker.ts";

export const globLimits = {
  /** Most alternatives a pattern's braces may expand to. */
  maxAlternatives: 64,
};

/** Whether a walked entry matches the pattern: by name without a slash, by path with one. */
export function matchPattern(pattern: string, name: string, fromStart: string): boolean {
  const normalized = pattern.startsWith("./") ? pattern.slice(2) : pattern;
  try {
    return normalized.includes("/")
      ? path.posix.matchesGlob(fromStart, normalized)
      : path.posix.matchesGlob(name, normalized);
  } catch {
    return false;
  }
}

/** The alternatives a brace expression expands to, counted without expanding it (capped). */
function countAlternatives(pattern: string): number {
  // A stack of groups; each holds the product so far of its current branch and the sum of its
  // finished branches. Escaped characters are literal.
  type Group = { sum: number; product: number };
  const stack: Group[] = [{ sum: 0, product: 1 }];
  const cap = globLimits.maxAlternatives + 1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      i++;
    } else if (c === "{") {
      stack.push({ sum: 0, product: 1 });
    } else if (c === "," && stack.length > 1) {
      const top = stack[stack.length - 1] as Group;
      top.sum = Math.min(cap, top.sum + top.product);
      top.product = 1;
    } else if (c === "}" && stack.length > 1) {
      const done = stack.pop() as Group;
      const alternatives = Math.min(cap, done.sum + done.product);
      const parent = stack[stack.length - 1] as Group;
      parent.product = Math.min(cap, parent.product * alternatives);
    }
  }
  const top = stack[0] as Group;
  return Math.min(cap, top.sum + top.product);
}

/** Refuses what the matcher would multiply; throws ToolCallError("invalid-input"). */
export function checkGlobPattern(pattern: string, field = "pattern"): void {
  if (/[@*+?!]\(/.test(pattern)) {
    throw new ToolCallError(
      "invalid-input",
      `The ${field} uses an extglob group such as +(…) or @(…), which is not supported; use plain *, ?, [...] and {a,b}.`,
    );
  }
  if (/\{[^{}]*\.\.[^{}]*\}/.test(pattern)) {
    throw new ToolCallError(
      "invalid-input",
      `The ${field} uses a {x..y} range, which is not supported; list the alternatives as {a,b,c}.`,
    );
  }
  if (countAlternatives(pattern) > globLimits.maxAlternatives) {
    throw new ToolCallError(
      "invalid-input",
      `The ${field}'s braces expand to more than ${globLimits.maxAlternatives} alternatives; use a simpler pattern.`,
    );
  }
}

/** True when matching the pattern costs time linear in the name: safe on the main thread. */
function isSimple(pattern: string): boolean {
  if (pattern.includes("{")) return false;
  const segments = pattern.split("/");
  if (segments.filter((s) => s === "**").length > 1) return false;
  return segments.every((s) => s === "**" || (s.match(/\*/g)?.length ?? 0) <= 1);
}

export type GlobMatcher = {
  /** Which of the entries match; throws ToolCallError("timeout") at the deadline. */
  match(entries: readonly { name: string; fromStart: string }[]): Promise<boolean[]>;
  stop(): Promise<void>;
};

/**
 * A matcher for one call: checks the pattern (throws ToolCallError for refused complexity), then
 * matches simple patterns inline and others in a worker that is terminated at `deadline`.
 */
export function createGlobMatcher(pattern: string, deadline: number, field?: string): GlobMatcher {
  checkGlobPattern(pattern, field);
  if (isSimple(pattern)) {
    return {
      match: async (entries) => entries.map((e) => matchPattern(pattern, e.name, e.fromStart)),
      stop: async () => {},
    };
  }
  let worker: Worker | undefined;
  let nextId = 1;
  const stop = async () => {
    const w = worker;
    worker = undefined;
    if (w !== undefined) await w.terminate();
  };
  const ensure = (): Worker => {
    worker ??= new Worker(new URL("./glob-worker.ts", import.meta.url), {
      workerData: { pattern },
      resourceLimits: { maxOldGenerationSizeMb: 64 },
    });
    return worker;
  };
  return {
    match: (entries) => {
      const w = ensure();
      const id = nextId++;
      // Names only: an entry may carry a directory handle, which cannot cross threads.
      const request: GlobWorkerRequest = {
        id,
        entries: entries.map((e) => ({ name: e.name, fromStart: e.fromStart })),
      };
      return new Promise<boolean[]>((resolve, reject) => {
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          w.off("message", onMessage);
          w.off("error", onError);
          w.off("exit", onExit);
          settle();
        };
        const onMessage = (reply: GlobWorkerReply) => {
          if (reply.id === id) finish(() => resolve(reply.matched));
        };
        const onError = (error: Error) => finish(() => reject(error));
        const onExit = () => finish(() => reject(new Error("glob worker exited")));
        const timer = setTimeout(
          () => {
            finish(() =>
              reject(
                new ToolCallError(
                  "timeout",
                  "The pattern took too long to match; nothing more was searched. Use a simpler pattern.",
                ),
              ),
            );
            void stop();
          },
          Math.max(0, deadline - Date.now()),
        );
        w.on("message", onMessage);
        w.on("error", onError);
        w.on("exit", onExit);
        w.postMessage(request);
      });
    },
    stop,
  };
}
