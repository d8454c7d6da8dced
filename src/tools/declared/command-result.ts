// What a declared command tool's call returns: the record of every stage (ran, skipped, failed to
// start), the saved state a parked chain resumes from, and the one shaping of output, status and
// stop into the tool's result (`structured`, `stdout` or the default), redacted and bounded.
import type { CommandToolPolicy } from "../../policy/policy-files.ts";
import type { Redactor } from "../../sandbox/redact.ts";
import type { StageCheckpoint, ToolFailure, ToolSuccess } from "../types.ts";
import type { PlannedStage } from "./command-plan.ts";
import { DeclaredToolError } from "./command-prepare.ts";
import { finalizeOutput } from "./declared-output.ts";
import type { PipelineResult, StageStatus } from "./pipeline.ts";

export type StageRecord = {
  program: string;
  arguments: string[];
  executable: string;
  executable_sha256: string;
  status: { exited: number } | { signaled: string } | { skipped: true } | { failed: string };
};

export function statusOf(stage: StageStatus): StageRecord["status"] {
  if (stage.spawnError !== undefined) return { failed: stage.spawnError };
  if (stage.signal !== null) return { signaled: stage.signal };
  return { exited: stage.exitCode ?? -1 };
}

export function exitOf(stage: StageStatus): number {
  if (stage.exitCode !== null) return stage.exitCode;
  return stage.signal === null ? 127 : 128;
}

export const recordOf = (stage: PlannedStage): Omit<StageRecord, "status"> => ({
  program: stage.name,
  arguments: stage.shown,
  executable: stage.resolved.path,
  executable_sha256: stage.resolved.sha256,
});

export type SavedChain = {
  item: number;
  records: StageRecord[];
  stdout: string;
  stderr: string;
  stdoutTotal: number;
  stderrTotal: number;
  status: number;
  lastStatuses: StageStatus[];
};

/** A checkpoint as the engine handed it back; one that does not fit this call is a typed failure. */
export function readCheckpoint(checkpoint: StageCheckpoint, items: number): SavedChain {
  const s = checkpoint.state;
  const ok =
    Number.isInteger(checkpoint.item) &&
    checkpoint.item >= 0 &&
    checkpoint.item < items &&
    Array.isArray(s.records) &&
    typeof s.stdout === "string" &&
    typeof s.stderr === "string" &&
    typeof s.stdoutTotal === "number" &&
    typeof s.stderrTotal === "number" &&
    typeof s.status === "number" &&
    Array.isArray(s.lastStatuses);
  if (!ok) {
    throw new DeclaredToolError(
      "refused",
      "The saved state of this call does not match its command; nothing more was run.",
    );
  }
  return { item: checkpoint.item, ...(s as Omit<SavedChain, "item">) };
}

/** Everything a call gathered, from the first item it ran (or resumed) to its last. */
export type CallOutcome = {
  stdout: Buffer[];
  stderr: Buffer[];
  stdoutTotal: number;
  stderrTotal: number;
  status: number;
  stoppedBy: PipelineResult["stoppedBy"];
  failure: DeclaredToolError | undefined;
  records: StageRecord[];
  lastStatuses: StageStatus[];
};

/** The tool-level facts the result is shaped with. */
export type ResultShape = {
  tool: CommandToolPolicy;
  manifest: string;
  timeoutMs: number;
  maxOutputBytes: number;
  redactor: Redactor;
  /** The sandbox backend's kind, named in a structured result. */
  backend: string;
};

export function shapeResult(r: CallOutcome, how: ResultShape): ToolSuccess | ToolFailure {
  const { tool, manifest, timeoutMs, maxOutputBytes, redactor } = how;
  if (r.records.every((rec) => "skipped" in rec.status) && r.failure !== undefined) {
    return { ok: false, code: r.failure.code, error: r.failure.message };
  }
  const outBytes = Buffer.concat(r.stdout).subarray(0, maxOutputBytes);
  const errBytes = Buffer.concat(r.stderr).subarray(0, maxOutputBytes);
  const stdoutTruncated = r.stdoutTotal > outBytes.length;
  const stderrTruncated = r.stderrTotal > errBytes.length;
  const out = finalizeOutput(outBytes, r.stdoutTotal, redactor);
  const err = finalizeOutput(errBytes, r.stderrTotal, redactor);
  const truncated = stdoutTruncated || stderrTruncated;
  const spawnFailed = r.lastStatuses.find((s) => s.spawnError !== undefined);
  if (spawnFailed !== undefined && r.records.length === 1) {
    return {
      ok: false,
      code: spawnFailed.spawnError === "ENOENT" ? "not-found" : "failed",
      error: `The program could not be started (${spawnFailed.spawnError}).`,
    };
  }
  if (r.stoppedBy !== undefined) {
    const tail = (t: string) => (t.length > 2000 ? `…${t.slice(-2000)}` : t);
    return {
      ok: false,
      code: r.stoppedBy === "timeout" ? "timeout" : "interrupted",
      error: `${r.stoppedBy === "timeout" ? `The command ran longer than ${timeoutMs} ms and was killed.` : "The command was stopped; it may have made part of its changes."}\nstdout (end): ${tail(out)}\nstderr (end): ${tail(err)}`,
      truncated,
    };
  }
  const last = r.lastStatuses[r.lastStatuses.length - 1];
  const content: Record<string, unknown> =
    tool.result === "structured"
      ? {
          status: { exited: r.status },
          stdout: out,
          stderr: err,
          stdout_truncated: stdoutTruncated,
          stderr_truncated: stderrTruncated,
          backend: how.backend,
          tool: tool.name,
          manifest_sha256: manifest,
          commands: r.records,
          ...(r.failure === undefined
            ? {}
            : { stopped: { code: r.failure.code, reason: r.failure.message } }),
        }
      : tool.result === "stdout"
        ? { exitCode: r.status, stdout: out, stdoutTruncated }
        : {
            exitCode: r.status,
            signal: last?.signal ?? null,
            stdout: out,
            stderr: err,
            stdoutTruncated,
            stderrTruncated,
            ...(r.failure === undefined ? {} : { stopped: r.failure.message }),
          };
  if (r.failure !== undefined) {
    return {
      ok: false,
      code: r.failure.code,
      error: `${r.failure.message}\n${JSON.stringify(content)}`,
      truncated,
    };
  }
  if (r.status !== 0 && tool.nonzero === "error") {
    return {
      ok: false,
      code: "nonzero-exit",
      error: `The command exited with status ${r.status}.\n${JSON.stringify(content)}`,
      truncated,
    };
  }
  return { ok: true, content, truncated };
}
