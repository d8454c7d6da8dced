// The regex half of grep, in a worker thread: a pattern that backtracks catastrophically blocks
// this thread, not the server's, and grep terminates the worker at its deadline.
import { parentPort, workerData } from "node:worker_threads";

type Request = { id: number; text: string; maxMatches: number; maxLineChars: number };
export type GrepWorkerMatch = { line: number; text: string };
export type GrepWorkerReply = { id: number; matches: GrepWorkerMatch[]; more: boolean };

const { pattern, flags } = workerData as { pattern: string; flags: string };
const regex = new RegExp(pattern, flags);

parentPort?.on("message", (request: Request) => {
  const matches: GrepWorkerMatch[] = [];
  let more = false;
  const lines = request.text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    regex.lastIndex = 0;
    if (!regex.test(line)) continue;
    if (matches.length >= request.maxMatches) {
      more = true;
      break;
    }
    matches.push({ line: i + 1, text: line.slice(0, request.maxLineChars) });
  }
  const reply: GrepWorkerReply = { id: request.id, matches, more };
  parentPort?.postMessage(reply);
});
