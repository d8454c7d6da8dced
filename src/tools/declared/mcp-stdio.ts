// A stdio MCP server's process, started by peergate rather than by the SDK. The SDK's own stdio
// transport spawns through cross-spawn with three descriptors and no process group of its own,
// so bwrap could not report the sandbox's PID 1 (--json-status-fd) and a stop reached only the
// outer bwrap: killed while the PID 1 set itself up (before it armed --die-with-parent), it left
// the sandbox running for good. This transport spawns the sandboxed command the way every other
// command is spawned (src/tools/run-process.ts): in a process group of its own, with the status
// descriptor, tracked by a `CommandProcesses`, so every stop, an exit of the server on its own
// and a forced exit of the server SIGKILL the sandbox's PID 1 too, now or as soon as it is
// reported. The SDK sees only its public `Transport` contract; the JSON-RPC framing is the SDK's
// own (`ReadBuffer`, `serializeMessage`), as its stdio transport uses it.
import { type ChildProcess, spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { SandboxBackend, SandboxCommand } from "../../sandbox/types.ts";
import {
  CommandProcesses,
  commandStdio,
  processDefaults,
  sandboxStatusFd,
} from "../run-process.ts";

export type SandboxedStdioOptions = {
  /** What the backend made of the server's argv (wrapped with `statusRequest(backend)`). */
  readonly command: SandboxCommand;
  readonly backend: SandboxBackend;
  /**
   * How long `close()` waits after closing stdin for the server to exit, and again after SIGTERM,
   * before it SIGKILLs the sandbox.
   */
  readonly graceMs: number;
};

/**
 * The MCP SDK's `Transport` over a sandboxed server's stdin and stdout. `close()` asks the server
 * to stop (stdin closed, then SIGTERM to its processes) and always ends with SIGKILL to the
 * sandbox's PID 1 and the launcher's group; `close(0)` goes straight there.
 */
export class SandboxedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** The server's stderr, there before `start()` so nothing it writes early is lost. */
  readonly stderr = new PassThrough();

  private readonly options: SandboxedStdioOptions;
  private readonly readBuffer = new ReadBuffer();
  private child: ChildProcess | undefined;
  private processes: CommandProcesses | undefined;
  private exited: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: SandboxedStdioOptions) {
    this.options = options;
  }

  start(): Promise<void> {
    if (this.closing !== undefined) return Promise.reject(new Error("The transport is closed."));
    if (this.child !== undefined) return Promise.reject(new Error("The transport has started."));
    const { command, backend } = this.options;
    const child = spawn(command.command, [...command.args], {
      cwd: command.cwd,
      env: command.env,
      detached: true,
      shell: false,
      stdio: commandStdio(backend, "pipe"),
      windowsHide: true,
    });
    this.child = child;
    // Registered at once (a forced exit of the server kills it from now on), and told of the
    // sandbox's PID 1 as soon as bwrap reports it.
    const processes = new CommandProcesses(
      child.pid,
      child.stdio[sandboxStatusFd] as NodeJS.ReadableStream | null | undefined,
    );
    this.processes = processes;
    this.exited = new Promise((resolve) => {
      child.once("close", () => {
        // Whatever the server left running (a background child, a PID 1 whose outer bwrap is
        // gone) does not outlive it.
        processes.release();
        resolve();
        this.onclose?.();
      });
    });
    child.once("exit", () => {
      // The pipes close when every holder is gone; a background child that keeps them open is
      // given a moment, then killed with the sandbox.
      setTimeout(() => processes.release(), processDefaults.lingerMs).unref();
    });
    child.stdin?.on("error", (error) => this.onerror?.(error));
    child.stdout?.on("data", (chunk: Buffer) => {
      try {
        this.readBuffer.append(chunk);
      } catch (error) {
        // Past the SDK's bound on one unfinished message: the server is not speaking MCP.
        this.onerror?.(asError(error));
        void this.close(0);
        return;
      }
      this.readMessages();
    });
    child.stdout?.on("error", (error) => this.onerror?.(error));
    child.stderr?.pipe(this.stderr);
    return new Promise((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (error) => {
        // Nothing was started: no 'close' follows.
        if (child.pid === undefined) {
          processes.release();
          this.exited = Promise.resolve();
        }
        reject(error);
        this.onerror?.(error);
      });
    });
  }

  /** Every whole line read so far, as the SDK's stdio transport reads them: a bad one is skipped. */
  private readMessages(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.readBuffer.readMessage();
      } catch (error) {
        this.onerror?.(asError(error));
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (stdin === null || stdin === undefined || this.closing !== undefined) {
      return Promise.reject(new Error("Not connected"));
    }
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Stops the server: stdin closed, SIGTERM after `graceMs`, SIGKILL after another. */
  close(graceMs = this.options.graceMs): Promise<void> {
    this.closing ??= this.stop(graceMs);
    return this.closing;
  }

  private async stop(graceMs: number): Promise<void> {
    const { child, processes, exited } = this;
    this.readBuffer.clear();
    if (child === undefined || processes === undefined || exited === undefined) return;
    if (graceMs > 0) {
      child.stdin?.end();
      if (!(await within(exited, graceMs))) {
        // A sandbox with no process of the server in it yet has no one to take the signal.
        if (processes.terminate(this.options.backend)) await within(exited, graceMs);
      }
    }
    // Always, however it went: SIGKILL to the sandbox's PID 1 (now, or when bwrap reports it)
    // and to the launcher's group.
    processes.release();
    child.stdin?.destroy();
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** Whether `promise` settles within `ms`. */
async function within(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
