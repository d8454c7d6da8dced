// What a `peergate` command and an embedded start cost: `npm exec -- node bench/cli.ts [--runs N]
// [--code DIR]` (default 5 runs of each command; `--code` measures another checkout's src/, e.g.
// an export of an older commit, the same way).
//
// Each command is a real process, `node bin/peergate.mjs …` (what npx runs), timed from outside: the wall time from
// spawn to exit, and the CPU time (user + system) the process reports of itself at exit (through
// a one-line `--import` hook, so no platform tool is needed). Commands that talk to a server talk
// to a real one: the embedded server this bench started, found through its data directory the
// way an operator's CLI on the same machine finds it.
//
// The embedded start is `node src/main.ts serve` on a new data directory (the first start: the
// embedded database is created and migrated), then again on the same one (a restart), each
// until its "listening" line; CPU up to that line is read from /proc (Linux; "-" elsewhere).
// The first start's steps are timed from its own "starting: …" log lines (src/core.ts).
// Node's compile cache (src/main.ts) is left as an operator has it: the first command of a run
// may fill it, so the figures are the medians of the runs after one unmeasured warm-up.
//
// Prints a markdown table and `<!-- cli-result {json} -->` for bench/run-all.ts.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "5" },
    code: { type: "string", default: path.resolve(import.meta.dirname, "..") },
  },
});
const runs = Math.max(1, Number(values.runs));
const code = path.resolve(values.code);
// The executable as npx and `npm start` run it (bin/peergate.mjs; src/main.ts in older code).
const bin = path.join(code, "bin/peergate.mjs");
const main = existsSync(bin) ? bin : path.join(code, "src/main.ts");

/** CLI commands: well under a second (the process's CPU time, which a loaded machine's wall is not). */
export const cliTargetSeconds = 0.5;
/** The first start: PGlite creating its cluster is most of it; the rest must not add much. */
export const firstStartTargetSeconds = 20;
/** A restart on an existing embedded database. */
export const restartTargetSeconds = 5;
/** The first progress line of a first start, CPU seconds after spawn. */
export const firstLineTargetSeconds = 1;

const dir = await mkdtemp(path.join(tmpdir(), "peergate-bench-cli-"));
const cpuHook = path.join(dir, "report-cpu.mjs");
await writeFile(
  cpuHook,
  `import { writeFileSync } from "node:fs";
process.on("exit", () => {
  const u = process.resourceUsage();
  writeFileSync(process.env.BENCH_CPU_FILE, String((u.userCPUTime + u.systemCPUTime) / 1e6));
});
`,
);

const median = (list: number[]): number => {
  const sorted = [...list].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

const baseEnv = (dataDir: string): Record<string, string> => ({
  PATH: process.env.PATH ?? "",
  HOME: process.env.HOME ?? dir,
  TMPDIR: process.env.TMPDIR ?? tmpdir(),
  PEERGATE_DATA_DIR: dataDir,
  PEERGATE_WORKSPACE: path.join(dir, "workspace"),
  PEERGATE_POLICIES_DIR: path.join(code, "policies"),
  PEERGATE_SANDBOX: "none",
});

type Timed = { wallS: number; cpuS: number; code: number | null; output: string };

/** One CLI process: wall from spawn to exit, CPU as it reports itself. */
async function timeCommand(argv: string[], env: Record<string, string>): Promise<Timed> {
  const cpuFile = path.join(dir, "cpu.txt");
  await rm(cpuFile, { force: true });
  const started = performance.now();
  const child = spawn(process.execPath, ["--import", cpuHook, main, ...argv], {
    env: { ...env, BENCH_CPU_FILE: cpuFile },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => {
    output += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    output += c.toString();
  });
  const exit = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  const wallS = (performance.now() - started) / 1000;
  const cpuS = Number(await readFile(cpuFile, "utf8").catch(() => "NaN"));
  return { wallS, cpuS, code: exit, output };
}

async function measureCommand(label: string, argv: string[], env: Record<string, string>) {
  const warm = await timeCommand(argv, env);
  if (warm.code !== 0) throw new Error(`peergate ${argv.join(" ")} failed: ${warm.output}`);
  const all: Timed[] = [];
  for (let i = 0; i < runs; i++) all.push(await timeCommand(argv, env));
  return {
    label,
    cpuS: median(all.map((t) => t.cpuS)),
    wallS: median(all.map((t) => t.wallS)),
  };
}

/** CPU seconds a live process has used so far (Linux /proc), or NaN. */
async function cpuOf(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after the command's name.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

type Started = {
  child: ChildProcess;
  wallS: number;
  cpuS: number;
  firstLineWallS: number;
  firstLineCpuS: number;
  lines: { time: number; msg: string }[];
};

/** `peergate serve` until its "listening" line. */
async function startServe(env: Record<string, string>): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [main, "serve"], {
    env: { ...env, PEERGATE_PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pid = child.pid as number;
  const lines: { time: number; msg: string }[] = [];
  let firstLineWallS = Number.NaN;
  let firstLineCpuS = Number.NaN;
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise<Started>((resolve, reject) => {
    let buffer = "";
    child.stdout.on("data", async (chunk: Buffer) => {
      buffer += chunk.toString();
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        let record: { msg?: string; time?: string };
        try {
          record = JSON.parse(line);
        } catch {
          continue;
        }
        if (lines.length === 0) {
          firstLineWallS = (performance.now() - t0) / 1000;
          firstLineCpuS = await cpuOf(pid);
        }
        lines.push({ time: Date.parse(record.time ?? ""), msg: String(record.msg) });
        if (record.msg === "listening") {
          const wallS = (performance.now() - t0) / 1000;
          resolve({
            child,
            wallS,
            cpuS: await cpuOf(pid),
            firstLineWallS,
            firstLineCpuS,
            lines,
          });
        }
      }
    });
    child.once("exit", (exitCode) =>
      reject(new Error(`serve exited with ${exitCode} before listening:\n${stderr}`)),
    );
  });
}

async function stopServe(started: Started): Promise<void> {
  const exited = new Promise((resolve) => started.child.once("exit", resolve));
  started.child.kill("SIGTERM");
  await exited;
}

/** How long each "starting: …" step of a start took: until the next line that says a step. */
function stepsOf(started: Started): { step: string; seconds: number }[] {
  const marks = started.lines.filter(
    (l) => l.msg.startsWith("starting: ") || l.msg === "database ready" || l.msg === "listening",
  );
  return marks.slice(0, -1).map((mark, i) => ({
    step:
      mark.msg === "database ready"
        ? "(database ready) port, notifications, services, admin token, model"
        : mark.msg.replace(/^starting: /, ""),
    seconds: ((marks[i + 1] as { time: number }).time - mark.time) / 1000,
  }));
}

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const verdict = (value: number, target: number) =>
  Number.isFinite(value) ? (value <= target ? "met" : "**not met**") : "-";

try {
  const dataDir = path.join(dir, "data");
  const env = baseEnv(dataDir);

  console.error("first start (creating the embedded database)…");
  const first = await startServe(env);
  await stopServe(first);
  console.error(`  listening after ${fmt(first.wallS, 1)} s (${fmt(first.cpuS, 1)} s CPU)`);
  console.error("restart…");
  const restart = await startServe(env);
  console.error(`  listening after ${fmt(restart.wallS, 1)} s (${fmt(restart.cpuS, 1)} s CPU)`);

  const commands = [];
  try {
    for (const [label, argv] of [
      ["peergate --version", ["--version"]],
      ["peergate --help", ["--help"]],
      ["peergate callers list (running server)", ["callers", "list"]],
      ["peergate runs list (running server)", ["runs", "list"]],
    ] as const) {
      console.error(`${label}…`);
      commands.push(await measureCommand(label, [...argv], env));
    }
  } finally {
    await stopServe(restart);
  }

  const rows = [
    ...commands.map(
      (c) =>
        `| ${c.label} | ${fmt(c.cpuS)} | ${fmt(c.wallS)} | < ${cliTargetSeconds} s CPU | ${verdict(c.cpuS, cliTargetSeconds)} |`,
    ),
    `| embedded first start: first log line | ${fmt(first.firstLineCpuS)} | ${fmt(first.firstLineWallS)} | < ${firstLineTargetSeconds} s CPU | ${verdict(first.firstLineCpuS, firstLineTargetSeconds)} |`,
    `| embedded first start: listening | ${fmt(first.cpuS)} | ${fmt(first.wallS)} | < ${firstStartTargetSeconds} s CPU | ${verdict(first.cpuS, firstStartTargetSeconds)} |`,
    `| embedded restart: listening | ${fmt(restart.cpuS)} | ${fmt(restart.wallS)} | < ${restartTargetSeconds} s CPU | ${verdict(restart.cpuS, restartTargetSeconds)} |`,
  ];
  console.log(
    [
      `CLI commands: median of ${runs} runs after one warm-up; code in ${code}.`,
      "",
      "| what | CPU s | wall s | target | verdict |",
      "|---|---|---|---|---|",
      ...rows,
      "",
      "First start, step by step (from its own log lines; wall seconds):",
      "",
      "| step | wall s |",
      "|---|---|",
      ...stepsOf(first).map((s) => `| ${s.step} | ${fmt(s.seconds)} |`),
      "",
      `<!-- cli-result ${JSON.stringify({
        commands,
        firstStart: {
          cpuS: first.cpuS,
          wallS: first.wallS,
          firstLineCpuS: first.firstLineCpuS,
          steps: stepsOf(first),
        },
        restart: { cpuS: restart.cpuS, wallS: restart.wallS },
        targets: {
          cliSeconds: cliTargetSeconds,
          firstStartSeconds: firstStartTargetSeconds,
          restartSeconds: restartTargetSeconds,
          firstLineSeconds: firstLineTargetSeconds,
        },
      })} -->`,
    ].join("\n"),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
