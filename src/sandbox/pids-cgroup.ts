// The process-count limit when RLIMIT_NPROC does not bind. The kernel never applies RLIMIT_NPROC
// to a process whose real user is root outside every namespace (INIT_USER). A root server's
// sandboxes run as the workspace's owner (src/sandbox/host-user.ts), where RLIMIT_NPROC would
// bind, but it counts every process of that user on the host: concurrent sandboxes would share one
// count. A cgroup per sandbox counts each alone.
//
// So a root server gives every sandbox a pids cgroup of its own, `pids.max` = the tool's
// `processes`: the kernel counts every task in it (threads too) whatever the user, and a fork past
// the limit fails with EAGAIN. The sandbox's launcher (a shell) joins the cgroup before it execs
// anything, so every process of the sandbox is born inside it; the sandbox cannot leave it (no /sys inside,
// no capability, and its cgroup namespace is rooted at that cgroup).
//
// Fail closed: when no writable pids cgroup exists (cgroup v1 `pids` hierarchy, or cgroup v2 with
// the pids controller delegated to this server's cgroup), `wrap` throws and the probe at start
// says why, so a root server with process tools does not start, rather than run processes
// without a limit. A server not running as root does not need any of this.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { threadId } from "node:worker_threads";

/** How the sandbox's process count is limited. */
export type ProcessCountLimit =
  /** RLIMIT_NPROC alone binds (the server is not root). */
  | { readonly kind: "rlimit" }
  /** Every sandbox gets a pids cgroup under `parent`. */
  | { readonly kind: "cgroup"; readonly parent: string; readonly version: 1 | 2 }
  /** Root, and no pids cgroup can be used: every sandbox is refused. */
  | { readonly kind: "unavailable"; readonly problem: string };

export const pidsCgroupFix =
  "run peergate as an unprivileged user (RLIMIT_NPROC then binds), or give it a writable pids cgroup (cgroup v1 `pids` hierarchy, or cgroup v2 with the `pids` controller delegated to peergate's cgroup, e.g. systemd `Delegate=pids`)";

/**
 * Why a sandbox cannot be started (the call is refused; nothing runs). The message is for the
 * model (no host path); `detail` adds what the operator needs, for the start-up probe.
 */
export class SandboxUnavailableError extends Error {
  override readonly name = "SandboxUnavailableError";
  readonly detail: string;
  constructor(message: string, detail: string) {
    super(message);
    this.detail = detail;
  }
}

/** What the model is told when its command is refused for want of the limit. */
export const limitRefusal =
  "The sandbox cannot limit this command's processes on this server, so nothing was run; the operator has to fix the server's set-up.";

type CgroupSource = { readonly procSelfCgroup: string; readonly mountinfo: string };

function readSource(): CgroupSource {
  return {
    procSelfCgroup: readFileSync("/proc/self/cgroup", "utf8"),
    mountinfo: readFileSync("/proc/self/mountinfo", "utf8"),
  };
}

/** This process's pids cgroup directory and the hierarchy's version, if there is one. */
export function findPidsCgroup(
  source: CgroupSource,
): { dir: string; version: 1 | 2 } | { problem: string } {
  const mounts = source.mountinfo
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [left = "", right = ""] = line.split(" - ");
      const fields = left.split(" ");
      const [fsType = "", , superOptions = ""] = right.split(" ");
      return { root: fields[3] ?? "", mountPoint: fields[4] ?? "", fsType, superOptions };
    });
  const lines = source.procSelfCgroup.split("\n").filter((line) => line !== "");
  const under = (mount: { root: string; mountPoint: string }, cgroupPath: string) => {
    // The mount shows the hierarchy from `root` down; this process's path is absolute in it.
    if (mount.root !== "/" && !`${cgroupPath}/`.startsWith(`${mount.root}/`)) return undefined;
    const rest = mount.root === "/" ? cgroupPath : cgroupPath.slice(mount.root.length);
    return path.join(mount.mountPoint, rest);
  };
  for (const line of lines) {
    const [, controllers = "", cgroupPath = ""] = line.split(/:(.*?):/);
    if (!controllers.split(",").includes("pids")) continue;
    const mount = mounts.find(
      (m) => m.fsType === "cgroup" && m.superOptions.split(",").includes("pids"),
    );
    const dir = mount && under(mount, cgroupPath);
    if (dir) return { dir, version: 1 };
  }
  const unified = lines.find((line) => line.startsWith("0::"));
  const mount2 = mounts.find((m) => m.fsType === "cgroup2");
  if (unified && mount2) {
    const dir = under(mount2, unified.slice(3));
    if (dir && readList(path.join(dir, "cgroup.controllers")).includes("pids")) {
      return { dir, version: 2 };
    }
  }
  return { problem: "no pids cgroup controller is mounted for this process" };
}

function readList(file: string): string[] {
  try {
    return readFileSync(file, "utf8").trim().split(/\s+/);
  } catch {
    return [];
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes a cgroup directory and its child cgroups (only ones no process is in go away). */
function removeTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) removeTree(path.join(dir, entry.name));
  }
  rmdirSync(dir);
}

/**
 * The parent cgroups of servers that are gone (a crash, a SIGKILL, an out-of-memory kill leaves
 * them behind), with whatever still runs in them: only sandboxes ever join these cgroups, so a
 * process found there is a sandbox whose server died without stopping it. It is killed, not left
 * to run for good with no server to stop it. Returns how many processes were killed.
 */
function sweepStale(dir: string): number {
  let killed = 0;
  const ours = pidNamespace();
  for (const name of readdirSync(dir)) {
    const [, namespace, pid] = /^peergate-(?:(\d+)-)?(\d+)$/.exec(name) ?? [];
    if (pid === undefined) continue;
    // A pid means something only in the PID namespace it was taken in: a server of another one
    // (a container sharing this cgroup) is not judged dead by a pid that is free here.
    if ((namespace ?? ours) !== ours || isAlive(Number(pid))) continue;
    const stale = path.join(dir, name);
    try {
      killed += killTree(stale);
      removeTree(stale);
    } catch {
      // A process of that server's sandbox did not go in time; the next start tries again.
    }
  }
  return killed;
}

/** How many rounds `killTree` reads the tree again for processes born while it killed. */
const killRounds = 50;

/**
 * SIGKILLs every process in a cgroup tree until none is left (a process forking meanwhile is
 * found in the next round; pids.max bounds how many it can make). cgroup v2's `cgroup.kill` ends
 * the whole tree at once where the kernel has it. Returns how many processes were signalled.
 */
function killTree(dir: string): number {
  try {
    writeFileSync(path.join(dir, "cgroup.kill"), "1");
  } catch {
    // cgroup v1, or a kernel before 5.14: each process is killed below.
  }
  let signalled = 0;
  for (let round = 0; round < killRounds; round++) {
    const pids = processesIn(dir);
    if (pids.length === 0) return signalled;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
        signalled += 1;
      } catch {
        // Gone already.
      }
    }
    // The kernel takes a killed process out of its cgroup as it exits: give it a moment.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
  }
  return signalled;
}

/** Every process in a cgroup tree (`cgroup.procs` of it and of each child cgroup). */
function processesIn(dir: string): number[] {
  const pids = readList(path.join(dir, "cgroup.procs"))
    .map(Number)
    .filter((pid) => Number.isSafeInteger(pid) && pid > 0);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) pids.push(...processesIn(path.join(dir, entry.name)));
  }
  return pids;
}

/** This process's PID namespace (the inode /proc/self/ns/pid names); "" where it cannot be read. */
export function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "";
  } catch {
    return "";
  }
}

/**
 * The name of this server's parent cgroup: its pid, and the PID namespace that pid belongs to,
 * so the next start judges whether the server is gone only where the pid means that server.
 */
export function serverCgroupName(pid = process.pid): string {
  const namespace = pidNamespace();
  return namespace === "" ? `peergate-${pid}` : `peergate-${namespace}-${pid}`;
}

/** Decides how processes are counted for this server, creating its parent cgroup if needed. */
export function detectProcessCountLimit(
  options: { readonly euid?: number; readonly source?: CgroupSource } = {},
): ProcessCountLimit {
  const euid = options.euid ?? process.geteuid?.();
  if (euid !== 0) return { kind: "rlimit" };
  const root = "peergate runs as root, where the kernel does not apply RLIMIT_NPROC";
  let found: ReturnType<typeof findPidsCgroup>;
  try {
    found = findPidsCgroup(options.source ?? readSource());
  } catch (error) {
    return { kind: "unavailable", problem: `${root}, and ${(error as Error).message}` };
  }
  if ("problem" in found) return { kind: "unavailable", problem: `${root}, and ${found.problem}` };
  const parent = path.join(found.dir, serverCgroupName());
  try {
    sweepStale(found.dir);
    if (!existsSync(parent)) mkdirSync(parent);
    if (found.version === 2) {
      // A v2 child gets pids.max only when its parent hands the controller down.
      writeFileSync(path.join(found.dir, "cgroup.subtree_control"), "+pids");
      writeFileSync(path.join(parent, "cgroup.subtree_control"), "+pids");
    }
    process.once("exit", () => {
      try {
        removeTree(parent);
      } catch {
        // Left for the next start's sweep.
      }
    });
  } catch (error) {
    return {
      kind: "unavailable",
      problem: `${root}, and the pids cgroup ${found.dir} cannot be used (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    };
  }
  return { kind: "cgroup", parent, version: found.version };
}

/** Sandbox cgroups are numbered per thread (backends of several threads may share the parent). */
let nextSandbox = 0;

/** How long an unused sandbox cgroup is kept before it is taken for abandoned. */
const abandonAfterMs = 60_000;

/**
 * One cgroup per sandbox under `parent`. `create` makes it with its pids.max and returns the
 * file its launcher writes `0` (itself) to; cgroups whose sandbox has ended are removed on the
 * way. On cgroup v1 that file is `tasks`: the launcher is one thread, and moving one thread that
 * is the writer itself skips the lock that moving a whole process takes, which waits for an RCU
 * grace period (measured: 56 ms against 41 ms per sandbox start under load; bench/sandbox.ts).
 */
export function createPidsCgroups(parent: string, version: 1 | 2 = 1) {
  const made = new Map<string, number>();
  const sweep = (now: number) => {
    for (const [dir, createdAt] of made) {
      // Ended: something was in it and nothing is now. Never used: its launcher did not start.
      const used = readCount(path.join(dir, "pids.peak")) > 0;
      if (!used && now - createdAt < abandonAfterMs) continue;
      try {
        rmdirSync(dir);
        made.delete(dir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") made.delete(dir);
        // EBUSY: still running.
      }
    }
  };
  return {
    create(maxProcesses: number): string {
      const now = Date.now();
      sweep(now);
      const dir = path.join(parent, `s${threadId}-${nextSandbox++}`);
      let madeHere = false;
      try {
        mkdirSync(dir);
        madeHere = true;
        writeFileSync(path.join(dir, "pids.max"), String(maxProcesses));
      } catch (error) {
        if (madeHere) rmdirSync(dir);
        throw new SandboxUnavailableError(
          limitRefusal,
          `the sandbox's pids cgroup could not be made in ${parent} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); nothing was run. Fix: ${pidsCgroupFix}`,
        );
      }
      made.set(dir, now);
      return path.join(dir, version === 1 ? "tasks" : "cgroup.procs");
    },
    /** Sandbox cgroups not yet removed (for tests). */
    get live(): number {
      return made.size;
    },
  };
}

/** A counter file's value; 0 when it is absent (pids.peak is recent) or unreadable. */
function readCount(file: string): number {
  try {
    return statSync(file).isFile() ? Number(readFileSync(file, "utf8").trim()) || 0 : 0;
  } catch {
    return 0;
  }
}
