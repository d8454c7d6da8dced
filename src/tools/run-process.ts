// Running one program for a tool: argv only (never a shell), in its own process group, with a
// scrubbed environment, stdout and stderr collected as bytes up to a cap each (the rest is
// drained and counted, so a flood cannot grow memory or stall the child on a full pipe). On
// timeout or abort the whole group gets SIGTERM, then SIGKILL after a grace period, so a script
// that traps SIGTERM can clean up but cannot outlive the call; processes the command left
// running in its group after it exited are killed too.
import { spawn } from "node:child_process";

export const processDefaults = { killGraceMs: 3_000, lingerMs: 500 };

export type ProcessResult = {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  readonly durationMs: number;
  /** Why the group was killed, if it was. */
  readonly stoppedBy: "timeout" | "abort" | undefined;
  /** SIGKILL was needed after the grace period. */
  readonly forceKilled: boolean;
  /** The program could not be started (ENOENT, EACCES …). */
  readonly spawnError: NodeJS.ErrnoException | undefined;
};

export type ProcessRequest = {
  readonly program: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  readonly maxOutputBytes: number;
  readonly killGraceMs?: number;
};

type Collector = { chunks: Buffer[]; kept: number; total: number };

function collect(collector: Collector, chunk: Buffer, cap: number): void {
  collector.total += chunk.length;
  const room = cap - collector.kept;
  if (room <= 0) return;
  const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
  collector.chunks.push(part);
  collector.kept += part.length;
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

export function runProcess(request: ProcessRequest): Promise<ProcessResult> {
  const started = performance.now();
  const grace = request.killGraceMs ?? processDefaults.killGraceMs;
  return new Promise((resolve) => {
    const out: Collector = { chunks: [], kept: 0, total: 0 };
    const err: Collector = { chunks: [], kept: 0, total: 0 };
    let stoppedBy: ProcessResult["stoppedBy"];
    let forceKilled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let spawnError: NodeJS.ErrnoException | undefined;
    let settled = false;
    let killTimer: NodeJS.Timeout | undefined;
    let lingerTimer: NodeJS.Timeout | undefined;

    const child = spawn(request.program, [...request.args], {
      cwd: request.cwd,
      env: request.env,
      detached: true,
      shell: false,
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const pid = child.pid;

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(lingerTimer);
      request.signal.removeEventListener("abort", onAbort);
      // Whatever is left of the group (background children) does not outlive the call.
      killGroup(pid, "SIGKILL");
      clearTimeout(killTimer);
      resolve({
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        stdout: Buffer.concat(out.chunks),
        stderr: Buffer.concat(err.chunks),
        stdoutBytes: out.total,
        stderrBytes: err.total,
        stdoutTruncated: out.total > out.kept,
        stderrTruncated: err.total > err.kept,
        durationMs: Math.round(performance.now() - started),
        stoppedBy,
        forceKilled,
        spawnError,
      });
    };

    const stop = (why: "timeout" | "abort") => {
      if (stoppedBy !== undefined || settled) return;
      stoppedBy = why;
      killGroup(pid, "SIGTERM");
      killTimer = setTimeout(() => {
        forceKilled = true;
        killGroup(pid, "SIGKILL");
      }, grace);
    };

    const onAbort = () => stop("abort");
    const timeoutTimer = setTimeout(() => stop("timeout"), request.timeoutMs);
    if (request.signal.aborted) stop("abort");
    else request.signal.addEventListener("abort", onAbort, { once: true });

    child.stdout.on("data", (chunk: Buffer) => collect(out, chunk, request.maxOutputBytes));
    child.stderr.on("data", (chunk: Buffer) => collect(err, chunk, request.maxOutputBytes));
    child.on("error", (error: NodeJS.ErrnoException) => {
      spawnError = error;
      // A spawn failure emits no 'close' when nothing was started.
      if (pid === undefined) finish();
    });
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      // Streams close when every holder of the pipes is gone; a background child that keeps
      // them open is given a moment, then killed with the group.
      lingerTimer = setTimeout(finish, processDefaults.lingerMs);
    });
    child.on("close", () => {
      exit ??= { code: child.exitCode, signal: child.signalCode };
      finish();
    });
  });
}

/** Output bytes as text for the model, with a marker where the cap cut it. */
export function decodeOutput(bytes: Buffer, total: number): string {
  const text = bytes.toString("utf8");
  return total > bytes.length
    ? `${text}\n[output truncated: ${total - bytes.length} more bytes not shown]`
    : text;
}
