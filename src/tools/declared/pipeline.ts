// Running the stages of one pipeline (a fixed, structured or script tool is a pipeline of one):
// every stage is its own sandboxed process (the backend wraps each argv), in its own process
// group, started together; peergate joins stage N's stdout to stage N+1's stdin with a pipe it
// holds, so each stage keeps the confinement of its own declaration and no shell ever runs. The
// model's stdin reaches only the first stage. The last stage's stdout and every stage's stderr are
// kept up to a cap (the rest drained and counted). On timeout or abort every stage gets SIGTERM,
// then SIGKILL after the grace period (to its group and, in a bwrap sandbox, to the sandbox's
// PID 1, which ends every process of the sandbox); what is still alive when the pipeline ends is
// killed so too.
import { spawn } from "node:child_process";
import type { SandboxBackend, SandboxLimits } from "../../sandbox/types.ts";
import {
  CommandProcesses,
  commandStdio,
  endProcessSpan,
  processDefaults,
  sandboxStatusFd,
  startProcessSpan,
  statusRequest,
} from "../run-process.ts";

export type StageStatus = {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly spawnError: string | undefined;
};

export type PipelineResult = {
  readonly stages: readonly StageStatus[];
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
  readonly stoppedBy: "timeout" | "abort" | undefined;
};

export type PipelineRequest = {
  readonly stages: readonly (readonly [string, ...string[]])[];
  readonly stdin: Buffer | undefined;
  readonly cwd: string;
  readonly workspace: string;
  readonly env: Record<string, string>;
  readonly egress: boolean;
  readonly limits: SandboxLimits;
  readonly readOnlyPaths: readonly string[];
  readonly backend: SandboxBackend;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  readonly maxOutputBytes: number;
  readonly killGraceMs?: number;
  /** Live bytes of stdout and stderr as they arrive (for sanitized progress). */
  readonly onOutput?: (chunk: Buffer) => void;
};

type Collector = { chunks: Buffer[]; kept: number; total: number };

function collect(c: Collector, chunk: Buffer, cap: number): void {
  c.total += chunk.length;
  const room = cap - c.kept;
  if (room <= 0) return;
  const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
  c.chunks.push(part);
  c.kept += part.length;
}

export function runPipeline(request: PipelineRequest): Promise<PipelineResult> {
  const grace = request.killGraceMs ?? processDefaults.killGraceMs;
  return new Promise((resolve) => {
    const out: Collector = { chunks: [], kept: 0, total: 0 };
    const err: Collector = { chunks: [], kept: 0, total: 0 };
    const statuses: (StageStatus | undefined)[] = request.stages.map(() => undefined);
    // Each stage's group and, in a bwrap sandbox, its sandbox's PID 1 (src/tools/run-process.ts).
    const commands: CommandProcesses[] = [];
    let stoppedBy: PipelineResult["stoppedBy"];
    let killTimer: NodeJS.Timeout | undefined;
    let settled = false;
    let open = request.stages.length;

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(killTimer);
      request.signal.removeEventListener("abort", onAbort);
      for (const command of commands) command.release();
      resolve({
        stages: statuses.map(
          (s) => s ?? { exitCode: null, signal: null, spawnError: "did not start" },
        ),
        stdout: Buffer.concat(out.chunks),
        stderr: Buffer.concat(err.chunks),
        stdoutBytes: out.total,
        stderrBytes: err.total,
        stoppedBy,
      });
    };
    const stop = (why: "timeout" | "abort") => {
      if (stoppedBy !== undefined || settled) return;
      stoppedBy = why;
      // In a sandbox, SIGTERM to each stage's own processes (its trap runs); a stage with none
      // left is killed at once.
      for (const command of commands) {
        if (!command.terminate(request.backend)) command.kill();
      }
      killTimer = setTimeout(() => {
        for (const command of commands) command.kill();
      }, grace);
    };
    const onAbort = () => stop("abort");
    const timeoutTimer = setTimeout(() => stop("timeout"), request.timeoutMs);

    let previous: NodeJS.ReadableStream | undefined;
    for (const [i, argv] of request.stages.entries()) {
      const last = i === request.stages.length - 1;
      const wrapped = request.backend.wrap({
        argv,
        workspace: request.workspace,
        cwd: request.cwd,
        env: request.env,
        egress: request.egress,
        limits: request.limits,
        readOnlyPaths: request.readOnlyPaths,
        ...statusRequest(request.backend),
      });
      const span = startProcessSpan(request.backend, argv[0]);
      const child = spawn(wrapped.command, [...wrapped.args], {
        cwd: wrapped.cwd,
        env: wrapped.env,
        detached: true,
        shell: false,
        stdio: commandStdio(
          request.backend,
          i === 0 && request.stdin === undefined ? "ignore" : "pipe",
        ),
        windowsHide: true,
      });
      commands.push(
        new CommandProcesses(
          child.pid,
          child.stdio[sandboxStatusFd] as NodeJS.ReadableStream | null | undefined,
        ),
      );
      let spawnError: string | undefined;
      child.on("error", (error: NodeJS.ErrnoException) => {
        spawnError = error.code ?? error.message;
        if (child.pid === undefined && statuses[i] === undefined) {
          statuses[i] = { exitCode: null, signal: null, spawnError };
          endProcessSpan(span, undefined, stoppedBy, spawnError);
          if (--open === 0) finish();
        }
      });
      child.stdin?.on("error", () => {
        // EPIPE: the stage stopped reading; its status says what happened.
      });
      if (i === 0 && request.stdin !== undefined) child.stdin?.end(request.stdin);
      else if (previous !== undefined && child.stdin !== null) previous.pipe(child.stdin);
      child.stderr?.on("data", (chunk: Buffer) => {
        collect(err, chunk, request.maxOutputBytes);
        request.onOutput?.(chunk);
      });
      if (last) {
        child.stdout?.on("data", (chunk: Buffer) => {
          collect(out, chunk, request.maxOutputBytes);
          request.onOutput?.(chunk);
        });
      } else previous = child.stdout ?? undefined;
      child.on("close", (code, signal) => {
        if (statuses[i] !== undefined) return;
        statuses[i] = { exitCode: code, signal, spawnError };
        endProcessSpan(span, { code, signal }, stoppedBy, spawnError);
        // A stage that ended stops its reader's input; the writer before it sees EPIPE.
        if (--open === 0) finish();
      });
    }
    if (request.signal.aborted) stop("abort");
    else request.signal.addEventListener("abort", onAbort, { once: true });
  });
}
