// The bubblewrap backend. One sandbox per process: its own user, mount, PID, IPC, UTS and cgroup
// namespaces, and its own network namespace (only a loopback of its own) unless the tool declares
// egress. Inside, the root holds /usr read-only with the usual /bin, /lib symlinks, the few /etc
// files programs read, a fresh size-capped /tmp (also HOME), a /proc of the sandbox's own PID
// namespace with /proc/sys read-only, a minimal read-only /dev with a capped /dev/shm, and the
// workspace read-write at its own path, so paths in output mean the same thing outside. Nothing
// else exists: no data directory, no /root, no /home, no /proc of peergate. The command runs as
// nobody, with no capability, no_new_privs, no way to make another user namespace, and the
// seccomp filter of src/sandbox/seccomp.ts.
//
// bwrap is PID 1 of the sandbox and /proc/1/environ shows the environment bwrap was started
// with, whatever --clearenv does for the child: so bwrap is spawned with PATH only, and the
// child's variables go in as --setenv.
//
// Every sandbox starts through one launcher, a shell: it joins the sandbox's pids cgroup when
// there is one (a root server: RLIMIT_NPROC does not bind root), opens the seccomp filter on fd
// 3, and execs prlimit, which sets the limits and execs, as root, setpriv, which drops to the
// workspace's owner (src/sandbox/host-user.ts) and execs bwrap: so bwrap never runs as host root,
// and every process inside inherits the cgroup, the limits and the user. If any step fails
// nothing is run.
//
// A sandbox's end does not rest on the outer bwrap. --die-with-parent is armed by the sandbox's
// PID 1 (the inner bwrap) only at the very end of its setup, after its setsid (--new-session): an
// outer bwrap killed in between leaves a PID 1 no group kill reaches and no parent death kills,
// and the command it then starts runs on. So a spawner that passes `statusFd` is told the host pid
// of that PID 1 (--json-status-fd, written before the sandbox is let run) and SIGKILLs it
// (src/tools/run-process.ts): from an ancestor PID namespace that signal always lands, and the
// kernel then kills every process left in the sandbox's PID namespace, setsid or double-forked.
import { chmodSync, cpSync, existsSync, lstatSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type HostUser, sandboxHostUser } from "./host-user.ts";
import {
  createPidsCgroups,
  detectProcessCountLimit,
  limitRefusal,
  type ProcessCountLimit,
  pidsCgroupFix,
  SandboxUnavailableError,
} from "./pids-cgroup.ts";
import { writeSeccompFilter } from "./seccomp.ts";
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
  // The sandbox's user (the workspace's owner, under a root server) reads it; only we write it.
  chmodSync(dir, 0o755);
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

/** The descriptor the launcher opens the seccomp filter on, for bwrap's --seccomp. */
const seccompFd = "3";

/** /dev/shm's cap (Docker's default): POSIX shared memory and semaphores, not a second /tmp. */
const devShmBytes = 64 * 1024 * 1024;

export type BwrapOptions = {
  /** Absolute path of bwrap (default /usr/bin/bwrap). */
  readonly bwrapPath?: string;
  /** Absolute path of prlimit (default /usr/bin/prlimit). */
  readonly prlimitPath?: string;
  /** Absolute path of the launcher's shell (default /bin/sh). */
  readonly shellPath?: string;
  /** Absolute path of setpriv, which a root server drops to the workspace's owner with. */
  readonly setprivPath?: string;
  /** Never bound, nor anything containing them (peergate's data directory). */
  readonly hiddenPaths?: readonly string[];
  /** For tests: how the process count is limited (default: decided at the first command). */
  readonly processCountLimit?: ProcessCountLimit;
};

/**
 * The launcher's script. `$1` is the sandbox's pids cgroup file (`tasks` on v1, `cgroup.procs` on
 * v2), or empty: the shell moves itself into it (`0` is the writer; so it, and every process it
 * starts, is counted there) and runs nothing if it cannot. `$2` is the seccomp filter, opened on
 * fd 3 for bwrap (a redirection that fails ends the shell: nothing runs without the filter). PWD,
 * which the shell exports on its own, is dropped: bwrap's environment stays PATH only.
 */
export const launcherScript = `if [ -n "$1" ]; then { echo 0 > "$1"; } 2>/dev/null || { echo "peergate: the sandbox could not join its pids cgroup ($1); nothing was run" >&2; exit 125; }; fi; f=$2; shift 2; unset PWD; exec "$@" ${seccompFd}<"$f"`;

export function createBwrapBackend(options: BwrapOptions = {}): SandboxBackend {
  const bwrap = options.bwrapPath ?? "/usr/bin/bwrap";
  const prlimit = options.prlimitPath ?? "/usr/bin/prlimit";
  const shell = options.shellPath ?? "/bin/sh";
  const setpriv = options.setprivPath ?? "/usr/bin/setpriv";
  let etc: string | undefined;
  let filter: string | undefined;
  let counting: ProcessCountLimit | undefined = options.processCountLimit;
  let cgroups: ReturnType<typeof createPidsCgroups> | undefined;
  // The workspace's owner is read once per workspace: only root can change it.
  const users = new Map<string, HostUser | undefined>();
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
      if (!users.has(request.workspace)) {
        users.set(request.workspace, sandboxHostUser(request.workspace));
      }
      const user = users.get(request.workspace);
      etc ??= stageEtc();
      filter ??= writeSeccompFilter();
      let procs = "";
      if (counting.kind === "cgroup") {
        cgroups ??= createPidsCgroups(counting.parent, counting.version);
        procs = cgroups.create(limits.processes);
      }
      // With a pids cgroup the count is per sandbox, there. RLIMIT_NPROC is left as the server
      // has it: set to `processes` it would count every process of the workspace's owner on the
      // host, so concurrent sandboxes would share one count (and raising it needs
      // CAP_SYS_RESOURCE, which a container's root may not hold).
      const nproc = counting.kind === "cgroup" ? [] : [`--nproc=${limits.processes}`];
      const drop =
        user === undefined
          ? []
          : [
              setpriv,
              `--reuid=${user.uid}`,
              `--regid=${user.gid}`,
              "--clear-groups",
              "--no-new-privs",
              "--",
            ];
      return {
        command: shell,
        args: [
          "-c",
          launcherScript,
          "peergate-sandbox",
          procs,
          filter,
          prlimit,
          ...nproc,
          `--cpu=${limits.cpuSeconds}`,
          `--fsize=${limits.fileSizeBytes}`,
          `--as=${limits.memoryBytes}`,
          "--",
          ...drop,
          bwrap,
          ...bwrapArguments(request, etc, options.hiddenPaths ?? []),
          "--",
          ...request.argv,
        ],
        cwd: "/",
        env: { ...bwrapLauncherEnv },
      };
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
    // An explicit --unshare-user, which --disable-userns needs: nothing inside can make another
    // user namespace (where it would hold every capability again).
    "--unshare-user",
    "--disable-userns",
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
    // bwrap 0.8 cannot remount /proc/sys read-only; a read-only bind of it over itself does.
    "--ro-bind",
    "/proc/sys",
    "/proc/sys",
    "--dev",
    "/dev",
    // /dev is a tmpfs bwrap makes writable: without this it would be an uncapped one.
    "--size",
    String(Math.min(devShmBytes, request.limits.tmpBytes)),
    "--tmpfs",
    "/dev/shm",
    "--remount-ro",
    "/dev",
    "--size",
    String(request.limits.tmpBytes),
    "--tmpfs",
    "/tmp",
    "--ro-bind",
    etc,
    "/etc",
    "--seccomp",
    seccompFd,
    ...(request.statusFd === undefined ? [] : ["--json-status-fd", String(request.statusFd)]),
  ];
  // Only regular files (a program, a script): an argument such as `/` must not bind the host's
  // root, and nothing in or around the data directory is ever bound.
  // Nor anything in the workspace: bound with it already, and what a command left there (a
  // symlink to a file of the host's, in place of a program) must not be followed by bwrap, which
  // binds as root what the path names when it binds.
  for (const extra of request.readOnlyPaths ?? []) {
    if (isUnder(extra, "/usr") || isUnder(extra, request.workspace) || !isRegularFile(extra)) {
      continue;
    }
    if (hiddenPaths.some((hidden) => isUnder(extra, hidden) || isUnder(hidden, extra))) continue;
    args.push("--ro-bind", extra, extra);
  }
  // After /tmp: a workspace under /tmp is bound on top of the fresh tmpfs.
  args.push("--bind", request.workspace, request.workspace, "--chdir", request.cwd);
  // Verified copies, each at its own path in the sandbox's root (tools/declared/verified-files.ts),
  // never over a path of the host's, where a rename from outside would detach the mount. Refused,
  // not skipped: the argv names the copy, and nothing else may be there.
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
