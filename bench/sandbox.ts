// Sandbox start cost: `npm exec -- node bench/sandbox.ts [--runs N] [--profile]`. Spawns
// `/usr/bin/true` the way src/tools/run-process.ts does (detached, stdout and stderr piped, wait for
// 'close'), once plainly (PEERGATE_SANDBOX=none) and once through bubblewrap, interleaved call by
// call so a load that changes during the run weighs on both alike. Reports each backend's median
// and the median of the per-pair differences: what confinement adds to every command.
//
// Every call wraps anew, as a tool call does (a root server makes the sandbox's pids cgroup
// there). `--profile` adds what each part of the sandbox costs: bwrap with one namespace at a
// time, then the sandbox's command line with one part left out, each interleaved with the whole.
// Nothing leaves the machine.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
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
    profile: { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);

const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-bench-sandbox-")));
const workspace = path.join(base, "workspace");
await mkdir(workspace);

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
const probe = await probeSandbox(bwrap);
if (!probe.ok) {
  console.log(`bwrap not measured: ${probe.problem}`);
} else {
  // As root every sandbox joins a pids cgroup of its own through a shell first; the same command
  // without that step is the sandbox as it was before (RLIMIT_NPROC only, which root ignores).
  const joins = wrapTrue(bwrap).command !== "/usr/bin/prlimit";
  const withoutJoin = (): SandboxCommand => {
    const wrapped = wrapTrue(bwrap);
    return { ...wrapped, command: wrapped.args[4] ?? "", args: wrapped.args.slice(5) };
  };
  // The first way of joining: the launcher's PID into cgroup.procs (moves a whole process).
  const wholeProcessJoin = (): SandboxCommand => {
    const wrapped = wrapTrue(bwrap);
    const [, script = "", name = "", file = "", ...rest] = wrapped.args;
    return {
      ...wrapped,
      args: [
        "-c",
        script.replace("echo 0", () => "echo $$"),
        name,
        file.replace(/tasks$/, "cgroup.procs"),
        ...rest,
      ],
    };
  };
  const makes: Make[] = [() => wrapTrue(none), () => wrapTrue(bwrap)];
  if (joins) makes.push(withoutJoin, wholeProcessJoin);
  const [plain = [], confined = [], unjoined = [], whole = []] = await interleaved(makes);
  row("`true`, PEERGATE_SANDBOX=none", plain);
  row(
    `\`true\`, PEERGATE_SANDBOX=bwrap${joins ? " (root: joins its own pids cgroup, `tasks`)" : ""}`,
    confined,
    plain,
  );
  if (joins) {
    row("`true`, bwrap as before: no pids cgroup (no process limit as root)", unjoined, plain);
    row("`true`, bwrap joining through `cgroup.procs` (whole-process move)", whole, plain);
  }

  if (values.profile) {
    const full = withoutJoin();
    const bwrapPath = "/usr/bin/bwrap";
    const launch = full.args.indexOf(bwrapPath);
    const launcher = full.args.slice(0, launch); // the limits wrapper's own arguments
    const options = full.args.slice(launch + 1, full.args.lastIndexOf("--"));
    const bare = (extra: string[]): SandboxCommand => ({
      command: bwrapPath,
      args: [...extra, "--bind", "/", "/", "/usr/bin/true"],
      cwd: "/",
      env: full.env,
    });
    /** The full command line without `count` arguments from where `flag` (the first) starts. */
    const without = (flag: string, count: number): SandboxCommand => {
      const at = options.indexOf(flag);
      const kept = at < 0 ? options : [...options.slice(0, at), ...options.slice(at + count)];
      return { ...full, args: [...launcher, bwrapPath, ...kept, "--", "/usr/bin/true"] };
    };
    const variants: [string, SandboxCommand][] = [
      ["bwrap, user namespace only, host root bound", bare(["--unshare-user"])],
      ["  + PID namespace", bare(["--unshare-user", "--unshare-pid"])],
      ["  + network namespace", bare(["--unshare-user", "--unshare-net"])],
      ["  + IPC namespace", bare(["--unshare-user", "--unshare-ipc"])],
      ["  + UTS namespace", bare(["--unshare-user", "--unshare-uts"])],
      ["  + cgroup namespace", bare(["--unshare-user", "--unshare-cgroup"])],
      [
        "the sandbox without its limits wrapper",
        { ...full, command: bwrapPath, args: [...options, "--", "/usr/bin/true"] },
      ],
      ["the sandbox without /proc", without("--proc", 2)],
      ["the sandbox without /dev", without("--dev", 2)],
      ["the sandbox without the network namespace", without("--unshare-net", 1)],
    ];
    const times = await interleaved([
      () => full,
      ...variants.map(
        ([, c]) =>
          () =>
            c,
      ),
    ]);
    const reference = times[0] ?? [];
    row("the sandbox without the pids cgroup (reference for the rows below)", reference);
    for (const [i, [label]] of variants.entries()) row(label, times[i + 1] ?? [], reference);
  }
}

console.log(
  `Sandbox start cost, ${runs} interleaved rounds (load average ${os.loadavg()[0]?.toFixed(1)}, ${os.cpus().length} CPUs)\n`,
);
console.log("| spawn of `/usr/bin/true` | runs | median ms | median difference ms |");
console.log("|---|---|---|---|");
console.log(rows.join("\n"));
await rm(base, { recursive: true, force: true });
