// The glob half of find and grep, in a worker thread: a pattern whose matching backtracks (many
// `*` in one segment, several `**`) blocks this thread, not the server's, and the caller
// terminates the worker at its deadline.
import { parentPort, workerData } from "node:worker_threads";
import { matchPattern } from "./glob.ts";

export type GlobWorkerRequest = {
  id: number;
  entries: { name: string; fromStart: string }[];
};
export type GlobWorkerReply = { id: number; matched: boolean[] };

const { pattern } = workerData as { pattern: string };

parentPort?.on("message", (request: GlobWorkerRequest) => {
  const matched = request.entries.map((e) => matchPattern(pattern, e.name, e.fromStart));
  const reply: GlobWorkerReply = { id: request.id, matched };
  parentPort?.postMessage(reply);
});
