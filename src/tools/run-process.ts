// Running one program for a tool: argv only (never a shell), through the configured sandbox
// backend (src/sandbox), in its own process group, with an allowlisted environment, stdout and
// stderr collected as bytes up to a cap each (the rest is drained and counted, so a flood cannot
// grow memory or stall the child on a full pipe) and redacted by value. On timeout or abort the
// command gets SIGTERM, then SIGKILL after a grace period; processes the command left running in
// its group after it exited are killed too.
//
// Under bwrap the spawned process becomes the outer bwrap, whose child is bwrap again, the
// sandbox's PID 1; everything below that is the command. SIGTERM goes to each process below the
// PID 1 (bwrap itself would only take the sandbox down at once), so a script's TERM trap runs; the
// SIGKILL after the grace goes to the sandbox's PID 1, whose host pid bwrap reports on a pipe
// (--json-status-fd), and to the group. The PID 1's death takes its PID namespace (every process
// in it, setsid or not) with it, whether or not the outer bwrap is still there: an outer killed
// before the PID 1 armed --die-with-parent (src/sandbox/bwrap.ts) no longer leaves the sandbox
// running.
//
// Every live command is registered, so a forced exit of the server (a second SIGINT or SIGTERM,
// src/main.ts) kills them all at once, whatever the backend: under `none` nothing else would. It
// exits once the reports still in their pipes have been read (bounded), so a PID 1 that bwrap
// reported but Node had not read yet is killed too.
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

/**
 * The descriptor a bwrap sandbox reports its PID 1 on (SandboxRequest.statusFd); 3 is the seccomp
 * filter's (src/sandbox/bwrap.ts).
 */
export const sandboxStatusFd = 4;

/** The spawn stdio of a command: stdin as given, stdout and stderr piped, and bwrap's status. */
export function commandStdio(
  backend: SandboxBackend,
  stdin: "ignore" | "pipe",
): ("ignore" | "pipe")[] {
  return backend.kind === "bwrap"
    ? [stdin, "pipe", "pipe", "ignore", "pipe"]
    : [stdin, "pipe", "pipe"];
}

/** What a backend is asked for so that a stop can reach the whole sandbox. */
export function statusRequest(backend: SandboxBackend): { statusFd?: number } {
  return backend.kind === "bwrap" ? { statusFd: sandboxStatusFd } : {};
}

/** A sandbox's PID 1 as the host sees it, with its start time so a reused pid is never hit. */
type SandboxInit = { readonly pid: number; readonly startTime: string };

/** Field 22 of /proc/<pid>/stat (after the command name, which may hold spaces). */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** `pid` as a live PID namespace's init (NSpid ends in 1), or undefined. */
function sandboxInit(pid: number): SandboxInit | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const nspid = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/) ?? [];
    if (nspid.length < 2 || nspid.at(-1) !== "1") return undefined;
  } catch {
    return undefined;
  }
  const startTime = startTimeOf(pid);
  return startTime === undefined ? undefined : { pid, startTime };
}

/**
 * One spawned command's processes: its process group (the spawned pid) and, in a bwrap sandbox,
 * the sandbox's PID 1 once bwrap has reported it on `sandboxStatusFd`. `kill` takes both down:
 * SIGKILL to the PID 1 from the host's PID namespace ends every process of the sandbox, whatever
 * became of the outer bwrap (killed before the PID 1 armed --die-with-parent, say), and a PID 1
 * reported only after the kill is killed as it is reported. Until `release`, a forced exit of the
 * server kills it too (`killCommandGroups`).
 */
export class CommandProcesses {
  readonly group: number | undefined;
  /**
   * Settles once nothing more can be reported: the PID 1's report was read (and, after a kill,
   * the PID 1 killed), or the pipe ended without one, or there is no pipe (no sandbox).
   */
  readonly reported: Promise<void>;
  private init: SandboxInit | undefined;
  private killed = false;

  constructor(group: number | undefined, status: NodeJS.ReadableStream | null | undefined) {
    this.group = group;
    if (group !== undefined) liveCommands.add(this);
    if (status === null || status === undefined) {
      this.reported = Promise.resolve();
      return;
    }
    let settle = () => {};
    this.reported = new Promise((resolve) => {
      settle = resolve;
    });
    // Waited for by a forced exit until settled, even once the command is released.
    unreported.add(this);
    void this.reported.then(() => unreported.delete(this));
    let text = "";
    let read = false;
    // Read to the end: the outer bwrap writes here again when it ends, and a reader gone would
    // fail that write.
    status.on("data", (chunk: Buffer | string) => {
      if (read) return;
      text += chunk.toString();
      const line = text.indexOf("\n");
      if (line === -1) return;
      read = true;
      const pid = Number(/"child-pid"\s*:\s*(\d+)/.exec(text.slice(0, line))?.[1]);
      if (Number.isSafeInteger(pid) && pid > 1) {
        this.init = sandboxInit(pid);
        if (this.killed) this.killInit();
      }
      settle();
    });
    // Every holder of the write end is gone (the outer bwrap, and the PID 1, which closes its
    // copy before it is let run): nothing more will come.
    status.on("end", settle);
    status.on("close", settle);
    status.on("error", () => {
      // The pipe broke: the outer bwrap is gone; what it reported was already read.
      settle();
    });
  }

  /**
   * Asks the command to stop: SIGTERM to its group, or, in a bwrap sandbox, to every process
   * below the sandbox's PID 1 (the command and its children), so a TERM trap runs. Returns false
   * when a sandbox has no process of the command yet (or any more): nothing can take the signal,
   * so the caller kills.
   */
  terminate(backend: SandboxBackend): boolean {
    if (this.group === undefined) return false;
    if (backend.kind !== "bwrap") {
      killGroup(this.group, "SIGTERM");
      return true;
    }
    const init = this.liveInit();
    const inside = init !== undefined ? descendantsOf(init, 0) : descendantsOf(this.group, 1);
    let signalled = false;
    for (const pid of inside) {
      try {
        process.kill(pid, "SIGTERM");
        signalled = true;
      } catch {
        // It ended meanwhile.
      }
    }
    return signalled;
  }

  /** SIGKILL to the sandbox's PID 1 (now, or when reported) and to the group. */
  kill(): void {
    this.killed = true;
    this.killInit();
    killGroup(this.group, "SIGKILL");
  }

  /** The command is over: kills what is left and stops tracking it. */
  release(): void {
    this.kill();
    liveCommands.delete(this);
  }

  /** The sandbox's PID 1 while it is the process bwrap reported (a reused pid is another). */
  private liveInit(): number | undefined {
    const init = this.init;
    if (init === undefined || startTimeOf(init.pid) !== init.startTime) return undefined;
    return init.pid;
  }

  private killInit(): void {
    const pid = this.liveInit();
    if (pid === undefined) return;
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ESRCH: it ended meanwhile.
    }
  }
}

/** Every command still running, for a forced exit. */
const liveCommands = new Set<CommandProcesses>();

/** Every sandbox whose PID 1 may still be reported (running or not), for a forced exit. */
const unreported = new Set<CommandProcesses>();

/** SIGKILLs every live command (its sandbox and its group) at once: the server is exiting. */
export function killCommandGroups(): number {
  const count = liveCommands.size;
  for (const command of liveCommands) command.kill();
  liveCommands.clear();
  return count;
}

/**
 * How long a forced exit waits, at most, for sandboxes' reports still in their pipes. Reading one
 * takes the event loop a few milliseconds once the group kill has ended its outer bwrap.
 */
export const forcedExitReportMs = 2_000;

/**
 * The server's forced exit (a second SIGINT or SIGTERM): SIGKILLs every live command at once,
 * then exits with `code` once every sandbox's report has been read (a PID 1 reported now is
 * killed as it is read) or after `forcedExitReportMs`. A report bwrap wrote that Node had not
 * read yet (a sandbox's first milliseconds, when its PID 1 may have left the launcher's group
 * and not yet armed --die-with-parent) is so still read and its PID 1 killed before the exit.
 */
export function exitKillingCommands(code: number): void {
  killCommandGroups();
  const pending = [...unreported].map((command) => command.reported);
  const exit = () => process.exit(code);
  setTimeout(exit, forcedExitReportMs);
  void Promise.all(pending).then(exit);
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
      ...statusRequest(request.sandbox.backend),
    });
    const child = spawn(command.command, [...command.args], {
      cwd: command.cwd,
      env: command.env,
      detached: true,
      shell: false,
      stdio: commandStdio(request.sandbox.backend, "ignore"),
      windowsHide: true,
    });
    const processes = new CommandProcesses(
      child.pid,
      child.stdio[sandboxStatusFd] as NodeJS.ReadableStream | null | undefined,
    );

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(lingerTimer);
      request.signal.removeEventListener("abort", onAbort);
      // Whatever is left of the group and of the sandbox (background children) does not
      // outlive the call.
      processes.release();
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
      if (!processes.terminate(request.sandbox.backend)) {
        // A sandbox with nothing of the command in it: no trap to wait for.
        processes.kill();
        return;
      }
      killTimer = setTimeout(() => {
        forceKilled = true;
        processes.kill();
      }, grace);
    };

    const onAbort = () => stop("abort");
    const timeoutTimer = setTimeout(() => stop("timeout"), request.timeoutMs);
    if (request.signal.aborted) stop("abort");
    else request.signal.addEventListener("abort", onAbort, { once: true });

    child.stdout?.on("data", (chunk: Buffer) => collect(out, chunk, request.maxOutputBytes));
    child.stderr?.on("data", (chunk: Buffer) => collect(err, chunk, request.maxOutputBytes));
    child.on("error", (error: NodeJS.ErrnoException) => {
      spawnError = error;
      // A spawn failure emits no 'close' when nothing was started.
      if (child.pid === undefined) finish();
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
