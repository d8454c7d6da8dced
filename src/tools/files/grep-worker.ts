// The regex half of grep, in a worker thread: a pattern that backtracks catastrophically blocks
// this thread, not the server's, and grep terminates the worker at its deadline. Files arrive in
// batches (one message per batch keeps the per-file cost to the matching itself).
import { parentPort, workerData } from "node:worker_threads";

export type GrepWorkerRequest = {
  id: number;
  texts: string[];
  maxMatches: number;
  maxLineChars: number;
};
/** `file` is the index of the text in the request. */
export type GrepWorkerMatch = { file: number; line: number; text: string };
export type GrepWorkerReply = { id: number; matches: GrepWorkerMatch[]; more: boolean };

const { pattern, flags } = workerData as { pattern: string; flags: string };
const regex = new RegExp(pattern, flags);

parentPort?.on("message", (request: GrepWorkerRequest) => {
  const matches: GrepWorkerMatch[] = [];
  let more = false;
  search: for (const [file, text] of request.texts.entries()) {
    const lines = text.split(/\r?\n/);
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] ?? "";
      regex.lastIndex = 0;
      if (!regex.test(line)) continue;
      if (matches.length >= request.maxMatches) {
        more = true;
        break search;
      }
      matches.push({ file, line: i + 1, text: line.slice(0, request.maxLineChars) });
    }
  }
  const reply: GrepWorkerReply = { id: request.id, matches, more };
  parentPort?.postMessage(reply);
});
