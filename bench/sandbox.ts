// Sandbox start cost: `npm exec -- node bench/sandbox.ts [--runs N]`. Spawns
// `/usr/bin/true` the way src/tools/run-process.ts does (detached, stdout and stderr piped, wait for
// 'close'), once plainly (PEERGATE_SANDBOX=none) and once through bubblewrap, interleaved call by
// call so a load that changes during the run weighs on both alike. Reports each backend's median
// and the median of the per-pair differences: what confinement adds to every command.
//
// Every call wraps anew, as a tool call does (a root server makes the sandbox's pids cgroup
// there). The sandbox's command line is also run with one part left out — the seccomp filter,
// the uid drop (setpriv, root only), all of the hardening that keeps a root server's commands
// from being host root — interleaved with the whole, so each part's cost is the median of its
// per-round differences, and its share of what the sandbox adds, from one run. Nothing leaves the
// machine.
import { spawn } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createBwrapBackend } from "../src/sandbox/bwrap.ts";
import { createNoneBackend } from "../src/sandbox/none.ts";
import { probeSandbox } from "../src/sandbox/probe.ts";
import {
  defaultSandboxLimits,
  type SandboxBackend,
  type SandboxCommand,
} from "../src/sandbox/types.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "60" },
  },
});
const runs = Number(values.runs);

const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-bench-sandbox-")));
const workspace = path.join(base, "workspace");
await mkdir(workspace);
// A root server runs commands as the workspace's owner and refuses a root-owned one.
if (process.geteuid?.() === 0) {
  await chmod(base, 0o755);
  await chown(workspace, 65534, 65534);
}

function wrapTrue(backend: SandboxBackend): SandboxCommand {
  return backend.wrap({
    argv: ["/usr/bin/true"],
    workspace,
    cwd: workspace,
    env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" },
    egress: false,
    limits: defaultSandboxLimits,
  });
}

/** One spawn to 'close'; throws when the command fails. */
function once(command: SandboxCommand): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command.command, [...command.args], {
      cwd: command.cwd,
      env: command.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stdout.resume();
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`${command.command} exited ${code}: ${stderr.trim()}`));
    });
  });
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

type Make = () => SandboxCommand;

/** One call as a tool makes it: wrap (a root server makes the sandbox's cgroup here), spawn. */
async function call(make: Make): Promise<number> {
  const started = performance.now();
  await once(make());
  return performance.now() - started;
}

/** `runs` rounds of each command in turn (order rotated per round); times by command. */
async function interleaved(makes: readonly Make[]): Promise<number[][]> {
  const times = makes.map(() => [] as number[]);
  for (let round = 0; round < 3; round++) for (const make of makes) await call(make); // warm-up
  for (let round = 0; round < runs; round++) {
    for (let k = 0; k < makes.length; k++) {
      const i = (round + k) % makes.length;
      const make = makes[i];
      if (make) times[i]?.push(await call(make));
    }
  }
  return times;
}

const rows: string[] = [];
const row = (label: string, values: number[], vs?: number[]) => {
  const diff = vs ? median(values.map((v, i) => v - (vs[i] ?? 0))).toFixed(2) : "-";
  rows.push(`| ${label} | ${values.length} | ${median(values).toFixed(2)} | ${diff} |`);
};

const none = createNoneBackend();
const bwrap = createBwrapBackend();
const probe = await probeSandbox(bwrap, { workspace });
/** The cost of each part, against the whole sandbox in the same rounds (ms and share). */
const parts: string[] = [];
if (!probe.ok) {
  console.log(`bwrap not measured: ${probe.problem}`);
} else {
  const full = () => wrapTrue(bwrap);
  /** `args` without `count` items from the first `item` on (unchanged when absent). */
  const cut = (args: readonly string[], item: string, count: number): string[] => {
    const at = args.indexOf(item);
    return at < 0 ? [...args] : [...args.slice(0, at), ...args.slice(at + count)];
  };
  const withoutSeccomp = (args: readonly string[]) => cut(args, "--seccomp", 2);
  // A root server's launcher drops to the workspace's owner: `setpriv … --`.
  const withoutSetpriv = (args: readonly string[]): string[] => {
    const at = args.indexOf("/usr/bin/setpriv");
    if (at < 0) return [...args];
    const end = args.indexOf("--", at);
    return [...args.slice(0, at), ...args.slice(end + 1)];
  };
  // The sandbox as it was before it stopped being root: no uid drop, no seccomp, no nested
  // user-namespace ban, /proc/sys, /dev and /tmp as bwrap makes them.
  const asBefore = (args: readonly string[]): string[] => {
    let out = withoutSetpriv(withoutSeccomp(args));
    out = cut(out, "--disable-userns", 1);
    const sys = out.indexOf("/proc/sys");
    if (sys > 0) out = [...out.slice(0, sys - 1), ...out.slice(sys + 2)];
    out = cut(out, "--size", 4); // /dev/shm's tmpfs
    out = cut(out, "--remount-ro", 2);
    out = cut(out, "--size", 2); // /tmp's cap
    return out;
  };
  const variant = (edit: (args: readonly string[]) => string[]) => () => {
    const wrapped = full();
    return { ...wrapped, args: edit(wrapped.args) };
  };
  const drops = full().args.includes("/usr/bin/setpriv");
  const makes: Make[] = [
    () => wrapTrue(none),
    full,
    variant(withoutSeccomp),
    variant(withoutSetpriv),
    variant(asBefore),
  ];
  const [plain = [], whole = [], noFilter = [], noDrop = [], before = []] =
    await interleaved(makes);
  row("`true`, PEERGATE_SANDBOX=none", plain);
  row(
    `\`true\`, PEERGATE_SANDBOX=bwrap now${drops ? " (root: pids cgroup, setpriv to the workspace owner)" : ""}`,
    whole,
    plain,
  );
  row("  the same without the seccomp filter", noFilter, plain);
  row(
    `  the same without the uid drop (setpriv)${drops ? "" : ": not root, none to drop"}`,
    noDrop,
    plain,
  );
  row("  the sandbox as before this hardening (bwrap as root under a root server)", before, plain);
  const added = median(whole.map((v, i) => v - (plain[i] ?? 0)));
  const part = (label: string, without: number[]) => {
    const cost = median(whole.map((v, i) => v - (without[i] ?? 0)));
    parts.push(
      `| ${label} | ${cost.toFixed(2)} | ${added > 0 ? ((100 * cost) / added).toFixed(0) : "-"}% |`,
    );
  };
  part("seccomp filter (`--seccomp 3`, loaded by bwrap)", noFilter);
  part("uid drop (`setpriv` exec before bwrap)", noDrop);
  part("all of this hardening together", before);
}
console.log(
  `Sandbox start cost, ${runs} interleaved rounds (load average ${os.loadavg()[0]?.toFixed(1)}, ${os.cpus().length} CPUs)\n`,
);
console.log("| spawn of `/usr/bin/true` | runs | median ms | median difference ms |");
console.log("|---|---|---|---|");
console.log(rows.join("\n"));
if (parts.length > 0) {
  console.log(
    "\n| part (median of per-round differences with the whole sandbox) | ms | share of what the sandbox adds |",
  );
  console.log("|---|---|---|");
  console.log(parts.join("\n"));
}
await rm(base, { recursive: true, force: true });
