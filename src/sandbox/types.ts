// What every sandbox backend is given and gives back. A backend does not start anything itself:
// it turns one spawn request into the command line and environment that, when spawned, run the
// request confined. That one shape serves every spawn of a sandboxed process: a command's
// (src/tools/run-process.ts, src/tools/declared/pipeline.ts) and a stdio MCP server's
// (src/tools/declared/mcp-stdio.ts).

// The kinds are a configuration word (PEERGATE_SANDBOX), named in config.ts.
import type { SandboxKind } from "../config.ts";

export type { SandboxKind };

/** Resource limits of one confined process tree (applied with setrlimit to every process in it). */
export type SandboxLimits = {
  /** RLIMIT_NPROC: processes of the sandbox's user. */
  readonly processes: number;
  /** RLIMIT_CPU: CPU seconds per process. */
  readonly cpuSeconds: number;
  /** RLIMIT_FSIZE: largest file a process may write, in bytes. */
  readonly fileSizeBytes: number;
  /** RLIMIT_AS: address space per process, in bytes. */
  readonly memoryBytes: number;
  /**
   * Size of the sandbox's own /tmp, in bytes. A tmpfs's pages are memory that RLIMIT_AS does not
   * count (they belong to no process), so the file system itself is capped.
   */
  readonly tmpBytes: number;
};

/** /tmp's cap when a declaration sets none: at most this, and never more than memoryBytes. */
const defaultTmpBytes = 512 * 1024 * 1024;

/** Safe defaults: enough for compilers, git and test runners; a tool declaration can change them. */
export const defaultSandboxLimits: SandboxLimits = {
  processes: 256,
  cpuSeconds: 600,
  fileSizeBytes: 1024 * 1024 * 1024,
  memoryBytes: 4 * 1024 * 1024 * 1024,
  tmpBytes: defaultTmpBytes,
};

export type SandboxRequest = {
  /** The program and its arguments; the program is a name on the sandbox's PATH or a path. */
  readonly argv: readonly [string, ...string[]];
  /** Absolute workspace root: bound read-write at the same path. */
  readonly workspace: string;
  /** Absolute working directory inside the workspace. */
  readonly cwd: string;
  /** The process's whole environment (already an allowlist; never peergate's own). */
  readonly env: Readonly<Record<string, string>>;
  /** True only for a tool that declares egress: then the host network is shared. */
  readonly egress: boolean;
  readonly limits: SandboxLimits;
  /** Absolute paths outside /usr the program needs to read (a declared program's own file). */
  readonly readOnlyPaths?: readonly string[];
  /**
   * Regular files bound read-only at `target`, a path in the sandbox's own root (never one of the
   * host's, where a rename from outside detaches the mount): a verified copy of a script or pinned
   * program, named so in the argv, so what starts holds the bytes that were hashed, never a
   * second open of the operator's file.
   */
  readonly boundFiles?: readonly { readonly source: string; readonly target: string }[];
  /**
   * A descriptor the spawner holds open as a pipe: bwrap writes its status there
   * (`--json-status-fd`), whose first document names the host pid of the sandbox's PID 1, so a
   * stop can kill the whole sandbox whatever became of the outer bwrap. Unset (the probe):
   * nothing is written. Ignored by `none`.
   */
  readonly statusFd?: number;
};

/** What to spawn: `command` with `args`, in `cwd`, with exactly `env`. */
export type SandboxCommand = {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
};

export type SandboxBackend = {
  readonly kind: SandboxKind;
  /** True when processes are confined (false for `none`). */
  readonly confines: boolean;
  wrap(request: SandboxRequest): SandboxCommand;
};

/** A sandbox that was checked at start: either it works, or here is why not and the fix. */
export type SandboxProbe = { readonly ok: true } | { readonly ok: false; readonly problem: string };

/** A declaration's limits over the defaults (an absent field keeps its default). */
export function resolveSandboxLimits(
  declared: { readonly [K in keyof SandboxLimits]?: number | undefined } | undefined,
): SandboxLimits {
  const memoryBytes = declared?.memoryBytes ?? defaultSandboxLimits.memoryBytes;
  return {
    processes: declared?.processes ?? defaultSandboxLimits.processes,
    cpuSeconds: declared?.cpuSeconds ?? defaultSandboxLimits.cpuSeconds,
    fileSizeBytes: declared?.fileSizeBytes ?? defaultSandboxLimits.fileSizeBytes,
    memoryBytes,
    tmpBytes: declared?.tmpBytes ?? Math.min(defaultTmpBytes, memoryBytes),
  };
}
