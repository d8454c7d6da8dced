// Running one program for a tool: argv only (never a shell), through the configured sandbox
// backend (src/sandbox), in its own process group, with an allowlisted environment, stdout and
// stderr collected as bytes up to a cap each (the rest is drained and counted, so a flood cannot
// grow memory or stall the child on a full pipe) and redacted by value. On timeout or abort the
// command gets SIGTERM, then SIGKILL after a grace period; processes the command left running in
// its group after it exited are killed too.
//
// Under bwrap the spawned process becomes the outer bwrap, whose child is bwrap again, the
// sandbox's PID 1; everything below that is the command. SIGTERM goes to each of those processes
// (bwrap itself would only take the sandbox down at once), so a script's TERM trap runs; the
// SIGKILL after the grace goes to the group, whose bwrap's death takes the sandbox's PID
// namespace (every process in it, setsid or not) with it.
//
// Every live group is registered, so a forced exit of the server (a second SIGINT or SIGTERM,
// src/main.ts) kills them all at once, whatever the backend: under `none` nothing else would.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { Redactor } from "../sandbox/redact.ts";
import type { SandboxBackend, SandboxLimits, SandboxRequest } from "../sandbox/types.ts";
import { failSpan, type Span, startSpan } from "../trace.ts";

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

/** The process groups of every command still running, for a forced exit. */
const liveGroups = new Set<number>();

/** Registers a command's process group until the returned function is called. */
export function trackCommandGroup(pid: number | undefined): () => void {
  if (pid === undefined) return () => {};
  liveGroups.add(pid);
  return () => liveGroups.delete(pid);
}

/** SIGKILLs every live command's group at once (the server is exiting without waiting). */
export function killCommandGroups(): number {
  const count = liveGroups.size;
  for (const pid of liveGroups) killGroup(pid, "SIGKILL");
  liveGroups.clear();
  return count;
}

/** Host pids below `pid`, deepest last, skipping the first `skip` generations. */
function descendantsOf(pid: number, skip: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The parent pid is the second field after the command name, which may hold spaces.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      // Gone while we looked.
    }
  }
  const found: number[] = [];
  const walk = (parent: number, depth: number) => {
    for (const child of children.get(parent) ?? []) {
      if (depth >= skip) found.push(child);
      walk(child, depth + 1);
    }
  };
  walk(pid, 0);
  return found;
}

/**
 * Asks a command to stop: SIGTERM to its group, or, in a bwrap sandbox, to every process below
 * the two bwraps (the outer one and the sandbox's PID 1). Returns false when a sandbox has no
 * process of the command yet (or any more): nothing can take the signal, so the caller kills.
 */
export function terminateCommand(pid: number | undefined, backend: SandboxBackend): boolean {
  if (pid === undefined) return false;
  if (backend.kind !== "bwrap") {
    killGroup(pid, "SIGTERM");
    return true;
  }
  let signalled = false;
  for (const inside of descendantsOf(pid, 1)) {
    try {
      process.kill(inside, "SIGTERM");
      signalled = true;
    } catch {
      // It ended meanwhile.
    }
  }
  return signalled;
}

export function runProcess(request: ProcessRequest): Promise<ProcessResult> {
  const started = performance.now();
  const grace = request.killGraceMs ?? processDefaults.killGraceMs;
  // The process as a span under its tool call's: the backend, the program's name (never its
  // arguments or environment), how it ended.
  const span = startProcessSpan(request.sandbox.backend, request.program);
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
    const untrack = trackCommandGroup(pid);

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(lingerTimer);
      request.signal.removeEventListener("abort", onAbort);
      // Whatever is left of the group (background children) does not outlive the call.
      killGroup(pid, "SIGKILL");
      untrack();
      clearTimeout(killTimer);
      const stdout = redactStream(out, request.sandbox.redactor);
      const stderr = redactStream(err, request.sandbox.redactor);
      endProcessSpan(span, exit, stoppedBy, spawnError?.code ?? spawnError?.message);
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
      if (!terminateCommand(pid, request.sandbox.backend)) {
        // A sandbox with nothing of the command in it: no trap to wait for.
        killGroup(pid, "SIGKILL");
        return;
      }
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
 * A process started for a tool, as a span under its tool call's (src/gate/trace-tool.ts): the
 * sandbox backend and the program's name, never its arguments or environment.
 */
export function startProcessSpan(backend: SandboxBackend, program: string): Span {
  return startSpan("peergate.sandbox.process", {
    "peergate.sandbox.backend": backend.kind,
    "process.executable.name": path.basename(program),
  });
}

/** How the process ended: its exit code, what stopped it, why it could not start. */
export function endProcessSpan(
  span: Span,
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined,
  stoppedBy: ProcessResult["stoppedBy"],
  spawnError: string | undefined,
): void {
  if (exit?.code !== null && exit?.code !== undefined) {
    span.setAttribute("process.exit.code", exit.code);
  }
  if (stoppedBy !== undefined) span.setAttribute("peergate.process.stopped_by", stoppedBy);
  if (spawnError !== undefined) failSpan(span, undefined, "spawn-failed");
  span.end();
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
