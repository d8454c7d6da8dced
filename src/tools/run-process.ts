// Running one program for a tool: argv only (never a shell), through the configured sandbox
// backend (src/sandbox), in its own process group, with an allowlisted environment, stdout and
// stderr collected as bytes up to a cap each (the rest is drained and counted, so a flood cannot
// grow memory or stall the child on a full pipe) and redacted by value. On timeout or abort the
// whole group gets SIGTERM, then SIGKILL after a grace period; processes the command left
// running in its group after it exited are killed too. Under bwrap the group holds the sandbox's
// launcher, whose death takes the sandbox's PID namespace (so every process in it, setsid or
// not) with it; a sandboxed script therefore gets no SIGTERM grace of its own.
import { spawn } from "node:child_process";
import type { Redactor } from "../sandbox/redact.ts";
import type { SandboxBackend, SandboxLimits, SandboxRequest } from "../sandbox/types.ts";

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

/** How a process is confined: the backend and what the tool declared. */
export type ProcessConfinement = {
  readonly backend: SandboxBackend;
  /** Absolute workspace root (bound read-write inside the sandbox). */
  readonly workspace: string;
  readonly egress: boolean;
  readonly limits: SandboxLimits;
  /** Files outside /usr the program needs to read (a declared program's own path). */
  readonly readOnlyPaths?: readonly string[];
  /** Verified copies bound read-only at the path the program names (SandboxRequest.boundFiles). */
  readonly boundFiles?: SandboxRequest["boundFiles"];
  /** Applied to stdout and stderr before they leave this module. */
  readonly redactor?: Redactor;
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
  readonly sandbox: ProcessConfinement;
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

    const command = request.sandbox.backend.wrap({
      argv: [request.program, ...request.args],
      workspace: request.sandbox.workspace,
      cwd: request.cwd,
      env: request.env,
      egress: request.sandbox.egress,
      limits: request.sandbox.limits,
      ...(request.sandbox.readOnlyPaths ? { readOnlyPaths: request.sandbox.readOnlyPaths } : {}),
      ...(request.sandbox.boundFiles ? { boundFiles: request.sandbox.boundFiles } : {}),
    });
    const child = spawn(command.command, [...command.args], {
      cwd: command.cwd,
      env: command.env,
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
      const stdout = redactStream(out, request.sandbox.redactor);
      const stderr = redactStream(err, request.sandbox.redactor);
      resolve({
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        stdout: stdout.bytes,
        stderr: stderr.bytes,
        stdoutBytes: stdout.total,
        stderrBytes: stderr.total,
        stdoutTruncated: out.total > out.kept,
        stderrTruncated: err.total > err.kept,
        durationMs: Math.round(performance.now() - started),
        stoppedBy,
        forceKilled,
        spawnError: spawnError ?? launcherSpawnError(request.sandbox.backend, exit, stderr.bytes),
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

/**
 * The kept bytes with secrets replaced; `total` moves by the same amount, so "n more bytes not
 * shown" stays the count of bytes cut at the cap.
 */
function redactStream(
  collector: Collector,
  redactor: Redactor | undefined,
): { bytes: Buffer; total: number } {
  const bytes = Buffer.concat(collector.chunks);
  if (redactor === undefined || redactor.size === 0) return { bytes, total: collector.total };
  const cut = collector.total > collector.kept;
  const redacted = Buffer.from(redactor.redact(bytes.toString("utf8"), { cut }), "utf8");
  return { bytes: redacted, total: collector.total - bytes.length + redacted.length };
}

/**
 * bwrap reports a program it cannot exec on stderr with exit code 1; read as the spawn error
 * a plain spawn would have given, so the model is told "not found" either way.
 */
function launcherSpawnError(
  backend: SandboxBackend,
  exit: { code: number | null } | undefined,
  stderr: Buffer,
): NodeJS.ErrnoException | undefined {
  if (backend.kind !== "bwrap" || exit?.code !== 1) return undefined;
  const match = /^bwrap: execvp [^\n]*: (No such file or directory|Permission denied)\n?$/.exec(
    stderr.toString("utf8"),
  );
  if (match === null) return undefined;
  const error: NodeJS.ErrnoException = new Error(match[0].trim());
  error.code = match[1] === "Permission denied" ? "EACCES" : "ENOENT";
  return error;
}

/** Output bytes as text for the model, with a marker where the cap cut it. */
export function decodeOutput(bytes: Buffer, total: number): string {
  const text = bytes.toString("utf8");
  return total > bytes.length
    ? `${text}\n[output truncated: ${total - bytes.length} more bytes not shown]`
    : text;
}
