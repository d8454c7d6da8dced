// The bubblewrap backend. One sandbox per process: its own user, mount, PID, IPC, UTS and cgroup
// namespaces, and its own network namespace (only a loopback of its own) unless the tool declares
// egress. Inside, the root holds /usr read-only with the usual /bin, /lib symlinks, the few /etc
// files programs read, a fresh /tmp (also HOME), a /proc of the sandbox's own PID namespace, a
// minimal /dev, and the workspace read-write at its own path, so paths in output mean the same
// thing outside. Nothing else exists: no data directory, no /root, no /home, no /proc of peergate.
//
// bwrap is PID 1 of the sandbox and /proc/1/environ shows the environment bwrap was started
// with, whatever --clearenv does for the child: so bwrap is spawned with PATH only, and the
// child's variables go in as --setenv. prlimit (util-linux) execs into bwrap with the limits set,
// so every process inside inherits them. A server running as root also puts every sandbox in a
// pids cgroup of its own (src/sandbox/pids-cgroup.ts), since RLIMIT_NPROC does not bind root: a
// shell joins it and execs prlimit, and refuses to run anything if it cannot. When the outer bwrap dies (the run's kill reaches its
// process group), --die-with-parent kills the sandbox's PID 1 and the kernel kills every process
// left in its PID namespace: a setsid or double-forked child cannot outlive the call.
import { cpSync, existsSync, lstatSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  createPidsCgroups,
  detectProcessCountLimit,
  limitRefusal,
  type ProcessCountLimit,
  pidsCgroupFix,
  SandboxUnavailableError,
} from "./pids-cgroup.ts";
import type { SandboxBackend, SandboxCommand, SandboxRequest } from "./types.ts";

/** The environment bwrap itself runs with (visible inside as /proc/1/environ). */
export const bwrapLauncherEnv: Readonly<Record<string, string>> = { PATH: "/usr/bin:/bin" };

/**
 * Files and directories of /etc that ordinary programs read. They are copied once (symlinks kept
 * as symlinks) into a private directory bound read-only as the sandbox's /etc: one mount instead
 * of one per entry, which is most of bwrap's start cost after the namespaces. The copy is taken
 * at the first command; an edit of these files reaches sandboxes after a restart.
 */
const etcEntries = [
  "passwd",
  "group",
  "nsswitch.conf",
  "hosts",
  "host.conf",
  "localtime",
  "timezone",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "alternatives",
  "ssl",
  "ca-certificates",
  "ca-certificates.conf",
  "mime.types",
  "protocols",
  "services",
  "gitconfig",
  // Read only to resolve names, which only an egress tool can use.
  "resolv.conf",
  "gai.conf",
];

/** Never copied: TLS private keys (inside, the root-owned copy would be readable). */
const etcExcluded = new Set(["/etc/ssl/private"]);

function stageEtc(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "peergate-sandbox-etc-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  for (const entry of etcEntries) {
    const from = `/etc/${entry}`;
    if (!existsSync(from) && !isSymlink(from)) continue;
    cpSync(from, path.join(dir, entry), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (source) => !etcExcluded.has(source),
    });
  }
  return dir;
}

function isSymlink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The sandbox's user: nobody, so nothing inside is root even in its own namespace. */
const sandboxUid = "65534";

export type BwrapOptions = {
  /** Absolute path of bwrap (default /usr/bin/bwrap). */
  readonly bwrapPath?: string;
  /** Absolute path of prlimit (default /usr/bin/prlimit). */
  readonly prlimitPath?: string;
  /** Absolute path of the shell that joins a pids cgroup (default /bin/sh). */
  readonly shellPath?: string;
  /** Never bound, nor anything containing them (peergate's data directory). */
  readonly hiddenPaths?: readonly string[];
  /** For tests: how the process count is limited (default: decided at the first command). */
  readonly processCountLimit?: ProcessCountLimit;
};

/**
 * The launcher's script when the sandbox has a pids cgroup: move itself into the cgroup (`0` is
 * the writer; so it, and every process it starts, is counted there), then exec the rest. If the
 * write fails nothing is run. `$1` is the cgroup's `tasks` (v1) or `cgroup.procs` (v2) file. PWD, which the shell exports
 * on its own, is dropped: bwrap's environment stays PATH only.
 */
export const joinCgroupScript = `{ echo 0 > "$1"; } 2>/dev/null || { echo "peergate: the sandbox could not join its pids cgroup ($1); nothing was run" >&2; exit 125; }; shift; unset PWD; exec "$@"`;

export function createBwrapBackend(options: BwrapOptions = {}): SandboxBackend {
  const bwrap = options.bwrapPath ?? "/usr/bin/bwrap";
  const prlimit = options.prlimitPath ?? "/usr/bin/prlimit";
  const shell = options.shellPath ?? "/bin/sh";
  let etc: string | undefined;
  let counting: ProcessCountLimit | undefined = options.processCountLimit;
  let cgroups: ReturnType<typeof createPidsCgroups> | undefined;
  return {
    kind: "bwrap",
    confines: true,
    wrap(request: SandboxRequest): SandboxCommand {
      const { limits } = request;
      counting ??= detectProcessCountLimit();
      if (counting.kind === "unavailable") {
        throw new SandboxUnavailableError(
          limitRefusal,
          `the process-count limit cannot be applied: ${counting.problem}; nothing was run. Fix: ${pidsCgroupFix}`,
        );
      }
      etc ??= stageEtc();
      const args = [
        `--nproc=${limits.processes}`,
        `--cpu=${limits.cpuSeconds}`,
        `--fsize=${limits.fileSizeBytes}`,
        `--as=${limits.memoryBytes}`,
        "--",
        bwrap,
        ...bwrapArguments(request, etc, options.hiddenPaths ?? []),
        "--",
        ...request.argv,
      ];
      if (counting.kind === "cgroup") {
        cgroups ??= createPidsCgroups(counting.parent, counting.version);
        const procs = cgroups.create(limits.processes);
        return {
          command: shell,
          args: ["-c", joinCgroupScript, "peergate-sandbox", procs, prlimit, ...args],
          cwd: "/",
          env: { ...bwrapLauncherEnv },
        };
      }
      return { command: prlimit, args, cwd: "/", env: { ...bwrapLauncherEnv } };
    },
  };
}

/** bwrap's options for one request, with `etc` as the sandbox's /etc (exported for tests). */
export function bwrapArguments(
  request: SandboxRequest,
  etc: string,
  hiddenPaths: readonly string[] = [],
): string[] {
  const args = [
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(request.egress ? [] : ["--unshare-net"]),
    "--uid",
    sandboxUid,
    "--gid",
    sandboxUid,
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--ro-bind",
    etc,
    "/etc",
  ];
  // Only regular files (a program, a script): an argument such as `/` must not bind the host's
  // root, and nothing in or around the data directory is ever bound.
  for (const extra of request.readOnlyPaths ?? []) {
    if (isUnder(extra, "/usr") || !isRegularFile(extra)) continue;
    if (hiddenPaths.some((hidden) => isUnder(extra, hidden) || isUnder(hidden, extra))) continue;
    args.push("--ro-bind", extra, extra);
  }
  // After /tmp: a workspace under /tmp is bound on top of the fresh tmpfs.
  args.push("--bind", request.workspace, request.workspace, "--chdir", request.cwd);
  // After the workspace: a verified copy covers the file of the same name there. Refused, not
  // skipped: running the operator's file instead would run bytes nobody verified.
  for (const file of request.boundFiles ?? []) {
    const hidden = hiddenPaths.some((h) =>
      [file.source, file.target].some((p) => isUnder(p, h) || isUnder(h, p)),
    );
    if (hidden || !path.isAbsolute(file.target) || !isRegularFile(file.source)) {
      throw new Error(`cannot bind ${file.source} at ${file.target}; nothing was run`);
    }
    args.push("--ro-bind", file.source, file.target);
  }
  args.push("--clearenv");
  for (const [name, value] of Object.entries({ HOME: "/tmp", ...request.env })) {
    args.push("--setenv", name, value);
  }
  return args;
}

function isRegularFile(file: string): boolean {
  try {
    return path.isAbsolute(file) && statSync(file).isFile();
  } catch {
    return false;
  }
}

function isUnder(file: string, dir: string): boolean {
  return file === dir || file.startsWith(`${dir}/`);
}
