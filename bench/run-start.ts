// What a run start costs the server's main thread, with the full toolset (issue 28):
// `node bench/run-start.ts [--runs 30] [--bursts 5] [--database postgres|pglite] [--only NAMES]
// [--before DIR] [--cpu-prof DIR]`.
//
// One caller, allowed its whole concurrency limit, starts `--runs` runs at once (blocking
// `SendMessage`s), `--bursts` times, against a server whose agent offers every tool category:
// files, web, shell, context, declared command tools (fixed, structured, chain) and a stdio MCP
// server. The model is an instant chat-completions stub on loopback (test/support/openai-stub.ts)
// in this process, so each run is its start, one model step and its end: the smallest run there
// is, and the one whose start weighs most. Meanwhile a second caller polls `GetTask` and a probe
// polls `/healthz`, one request at a time each, and their latencies are compared with the same
// probes on the idle server just before.
//
// Servers, each `peergate serve`'s composition (`startServer`) in a child process of its own,
// started one after the other on a fresh database each (`--only "full;minimal"` picks some):
//   full            the full toolset, as shipped (the start queue on);
//   full, no queue  the same, with the server-wide start queue off (PEERGATE_RUN_STARTS_AT_ONCE=0);
//   minimal         only the `context` tools, for what a toolset costs at all.
// With `--before DIR`, each is measured twice in the same session: first the code in DIR (another
// checkout, e.g. main's: `git archive main | tar -x -C DIR && ln -s "$PWD/node_modules" DIR/`),
// its server started by DIR's own copy of this file, then this checkout's; the table puts them
// side by side.
// The figure is the main thread's CPU (utime + stime of the child's first thread, from /proc)
// over the bursts, per run; the event loop's longest stall is the server's own (its
// `peergate_event_loop_lag_seconds` maximum, read from /metrics).
//
// Everything binds to 127.0.0.1; the probes share the machine's CPUs with the server, so compare
// the servers of one run, not figures across machines.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmod, cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { percentile } from "./load.ts";

const self = new URL(import.meta.url).pathname;
const repoRoot = path.resolve(path.dirname(self), "..");
const modelId = "openai-compatible:bench-instant";
const adminToken = `bench-admin-${"x".repeat(40)}`;
/** Every tool the full toolset's caller is allowed by name (acting and egress tools included). */
const allowAll = [
  "execute_command",
  "write_file",
  "edit_file",
  "make_directory",
  "web_fetch",
  "say",
  "git_log",
  "run_checks",
  "pipeline",
  "fixture.echo",
  "fixture.whoami",
];

type Variant = {
  name: string;
  toolset: "full" | "minimal";
  env: Record<string, string>;
  /** The checkout whose server is measured (its own bench/run-start.ts serves); default this one. */
  root?: string;
};

// ---------------------------------------------------------------- the server child

async function serve(): Promise<void> {
  const { loadConfig } = await import("../src/config.ts");
  const { createLogger } = await import("../src/log.ts");
  const { startServer } = await import("../src/server.ts");
  const env = { ...process.env } as Record<string, string>;
  const logger = createLogger({
    level: "warn",
    write: (line) => {
      if (!line.includes("PEERGATE_SANDBOX=none") && !line.includes("PEERGATE_SECRET_KEY")) {
        process.stderr.write(`peergate: ${line}\n`);
      }
    },
  });
  const server = await startServer(loadConfig(env, process.cwd()), logger, env);
  process.on("message", (message: { type: string }) => {
    if (message.type === "stop") {
      void server.stop().finally(() => process.exit(0));
    }
  });
  process.send?.({ type: "ready", url: server.url });
}

// ---------------------------------------------------------------- the driver

/** The policies of the full toolset (or of `context` alone), in `dir`. */
async function writePolicies(dir: string, toolset: Variant["toolset"]): Promise<string> {
  const policies = path.join(dir, "policies");
  await cp(path.join(repoRoot, "policies"), policies, { recursive: true });
  await chmod(policies, 0o755);
  await writeFile(
    path.join(policies, "models.yaml"),
    `models:\n  "${modelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
  );
  const agentFile = path.join(policies, "agent.yaml");
  const agent = await readFile(agentFile, "utf8");
  const tools = toolset === "full" ? "[files, context, web, shell, custom, mcp]" : "[context]";
  await writeFile(agentFile, agent.replace(/^tools: .*$/m, `tools: ${tools}`));
  if (toolset === "minimal") return policies;
  const node = JSON.stringify(process.execPath);
  const fixture = JSON.stringify(path.join(repoRoot, "test/tools/fixtures/mcp-server.ts"));
  await writeFile(
    path.join(policies, "tools.yaml"),
    [
      "commands:",
      "  - name: say",
      "    description: Print the given words.",
      "    mode: fixed",
      `    program: ${node}`,
      `    args: ["-e", "process.stdout.write(process.argv.slice(1).join(' '))"]`,
      "    risk: read-only",
      "    disclosure: public",
      "    egress: false",
      "  - name: git_log",
      "    description: Show the last commits of the repository.",
      "    mode: fixed",
      "    program: git",
      `    args: [log, --oneline, -n, "20", "--"]`,
      "    risk: read-only",
      "    disclosure: internal",
      "    egress: false",
      "  - name: run_checks",
      "    description: Run one of the project's npm scripts.",
      "    mode: structured",
      "    programs: [npm]",
      "    risk: high-risk",
      "    disclosure: private",
      "    egress: true",
      "  - name: pipeline",
      "    description: Plain words joined by pipes.",
      "    mode: chain",
      "    programs: [ls, wc, head]",
      "    risk: read-only",
      "    disclosure: internal",
      "    egress: false",
      "mcpServers:",
      "  - name: fixture",
      "    transport: stdio",
      `    command: ${node}`,
      `    args: [${fixture}]`,
      "    tools:",
      "      echo: {description: Echo text., risk: low-risk, disclosure: public, egress: false}",
      "      whoami: {description: The server's pid., risk: read-only, disclosure: internal, egress: false}",
    ].join("\n"),
  );
  return policies;
}

/** The CPU the process's first (main) thread has used, in microseconds, from /proc. */
async function mainThreadCpuMicros(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime
  return (ticks * 1_000_000) / 100; // USER_HZ is 100 on Linux
}

type Child = { pid: number; url: string; stop(): Promise<void> };

async function startChild(
  env: Record<string, string>,
  root: string,
  profileDir?: string,
): Promise<Child> {
  const flags = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const script = path.join(root, "bench/run-start.ts");
  const child: ChildProcess = spawn(process.execPath, [...flags, script, "--serve"], {
    env,
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the server exited with ${code} before ready`)));
    child.on("message", (message: { type: string; url: string }) => {
      if (message.type === "ready") resolve(message.url);
    });
  });
  child.removeAllListeners("exit");
  return {
    pid: child.pid as number,
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        child.send({ type: "stop" });
      }),
  };
}

const p99 = (values: readonly number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    99,
  );

type Measured = {
  name: string;
  runs: number;
  failures: number;
  firstFailure?: string;
  cpuMsPerRun: number;
  burstSeconds: number;
  maxLagMs: number;
  idle: { health: number; getTask: number };
  burst: { health: number; getTask: number };
};

async function measure(
  variant: Variant,
  options: { runs: number; bursts: number; database: "postgres" | "pglite"; modelUrl: string },
  profileDir?: string,
): Promise<Measured> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-start-"));
  let cluster: { adminUrl: string; remove(): void } | undefined;
  let child: Child | undefined;
  try {
    const workspace = path.join(scratch, "workspace");
    await mkdir(workspace);
    let databaseUrl: string | undefined;
    if (options.database === "postgres") {
      const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
      cluster = await startPostgresCluster();
      databaseUrl = cluster.adminUrl;
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      PEERGATE_HOST: "127.0.0.1",
      PEERGATE_PORT: "0",
      PEERGATE_DATA_DIR: path.join(scratch, "data"),
      PEERGATE_POLICIES_DIR: await writePolicies(scratch, variant.toolset),
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_ADMIN_TOKEN: adminToken,
      PEERGATE_MODEL: modelId,
      PEERGATE_MODEL_BASE_URL: options.modelUrl,
      PEERGATE_MODEL_API_KEY: "bench",
      // The measure is the main thread's work; no tool runs, so nothing needs confining.
      PEERGATE_SANDBOX: "none",
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      ...variant.env,
    };
    const root = variant.root ?? repoRoot;
    child = await startChild(env, root, profileDir);
    const url = child.url;
    // Budgets above the defaults and acting tools widen a caller: the operator token, made as
    // the operator makes it (`peergate operator-token create`).
    const made = spawnSync(
      process.execPath,
      [path.join(root, "src/main.ts"), "operator-token", "create", "--json"],
      { env, encoding: "utf8" },
    );
    if (made.status !== 0) throw new Error(`operator-token create: ${made.stderr}`);
    const { operatorToken } = JSON.parse(made.stdout) as { operatorToken: string };
    const addCaller = async (body: Record<string, unknown>) => {
      const created = await fetch(`${url}/admin/v1/callers`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${adminToken}`,
          "content-type": "application/json",
          "x-peergate-operator-token": operatorToken,
        },
        body: JSON.stringify(body),
      });
      if (created.status !== 201)
        throw new Error(`caller: ${created.status} ${await created.text()}`);
      return ((await created.json()) as { credential: { secret: string } }).credential.secret;
    };
    const burstToken = await addCaller({
      name: "burst",
      kind: "peer",
      tier: "private",
      allow: variant.toolset === "full" ? allowAll : [],
      budgets: {
        concurrentRuns: options.runs,
        daily: { runs: 10_000_000, tokens: 10_000_000_000, costUsd: 1_000_000 },
      },
    });
    const pollToken = await addCaller({ name: "poller", kind: "peer", tier: "public" });

    const rpc = async (token: string, method: string, params: unknown) => {
      const response = await fetch(`${url}/a2a`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      });
      const body = (await response.json()) as { result?: { id?: string; task?: { id: string } } };
      if (!body.result) throw new Error(`${method}: ${response.status} ${JSON.stringify(body)}`);
      return body.result;
    };
    const send = (token: string, i: number) =>
      rpc(token, "SendMessage", {
        message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: `run ${i}` }] },
      });
    const polled = await send(pollToken, 0);
    const taskId = polled.task?.id ?? polled.id;
    // Warm-up: the first runs compile what every later one reuses.
    for (let i = 0; i < 3; i++) await send(burstToken, i);

    const probes = {
      health: () =>
        new Promise<void>((resolve, reject) => {
          http
            .get(`${url}/healthz`, { agent: false }, (response) => {
              response.resume();
              response.on("end", resolve);
            })
            .on("error", reject);
        }),
      getTask: () => rpc(pollToken, "GetTask", { id: taskId }),
    };
    const probeLoop = async (probe: () => Promise<unknown>, until: () => boolean) => {
      const out: number[] = [];
      while (!until()) {
        const start = performance.now();
        await probe();
        out.push(performance.now() - start);
      }
      return out;
    };
    const idleUntil = performance.now() + 2_000;
    const [idleHealth, idleGet] = await Promise.all([
      probeLoop(probes.health, () => performance.now() > idleUntil),
      probeLoop(probes.getTask, () => performance.now() > idleUntil),
    ]);

    let failures = 0;
    let firstFailure: string | undefined;
    const burstHealth: number[] = [];
    const burstGet: number[] = [];
    const { monitorEventLoopDelay } = await import("node:perf_hooks");
    const parentLag = monitorEventLoopDelay({ resolution: 10 });
    parentLag.enable();
    const cpuBefore = await mainThreadCpuMicros(child.pid);
    const started = performance.now();
    for (let b = 0; b < options.bursts; b++) {
      let done = false;
      const loops = Promise.all([
        probeLoop(probes.health, () => done),
        probeLoop(probes.getTask, () => done),
      ]);
      await Promise.all(
        Array.from({ length: options.runs }, (_, i) =>
          send(burstToken, 100 + b * options.runs + i).catch((error: unknown) => {
            failures++;
            firstFailure ??= error instanceof Error ? error.message : String(error);
          }),
        ),
      );
      done = true;
      const [health, get] = await loops;
      burstHealth.push(...health);
      burstGet.push(...get);
    }
    const burstSeconds = (performance.now() - started) / 1000;
    parentLag.disable();
    if (process.env.BENCH_DEBUG)
      console.error(
        "parent lag max ms",
        parentLag.max / 1e6,
        "health samples",
        burstHealth.map(Math.round).join(","),
      );
    const cpuMicros = (await mainThreadCpuMicros(child.pid)) - cpuBefore;
    const metrics = await (
      await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })
    ).text();
    const lag = /^peergate_event_loop_lag_max_seconds (\S+)$/m.exec(metrics)?.[1];
    const runs = options.runs * options.bursts;
    return {
      name: variant.name,
      runs,
      failures,
      ...(firstFailure ? { firstFailure } : {}),
      cpuMsPerRun: cpuMicros / 1000 / runs,
      burstSeconds,
      maxLagMs: lag === undefined ? Number.NaN : Number(lag) * 1000,
      idle: { health: p99(idleHealth), getTask: p99(idleGet) },
      burst: { health: p99(burstHealth), getTask: p99(burstGet) },
    };
  } finally {
    await child?.stop();
    cluster?.remove();
    await rm(scratch, { recursive: true, force: true });
  }
}

function printTable(results: Measured[], options: { runs: number; database: string }): void {
  const ms = (n: number) => (Number.isNaN(n) ? "n/a" : n.toFixed(n < 10 ? 2 : 0));
  console.log(
    `\n## Run starts with the full toolset: ${options.runs} at once, ${options.database}\n`,
  );
  console.log(
    "| server | runs | failed | main-thread CPU per run (ms) | burst (s) | longest event-loop stall (ms) | /healthz p99 idle → burst (ms) | GetTask p99 idle → burst (ms) |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of results) {
    console.log(
      `| ${r.name} | ${r.runs} | ${r.failures} | ${ms(r.cpuMsPerRun)} | ${r.burstSeconds.toFixed(1)} | ${ms(r.maxLagMs)} | ${ms(r.idle.health)} → ${ms(r.burst.health)} | ${ms(r.idle.getTask)} → ${ms(r.burst.getTask)} |`,
    );
    if (r.firstFailure) console.log(`\nfirst failure of ${r.name}: ${r.firstFailure}\n`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: "boolean", default: false },
      runs: { type: "string", default: "30" },
      bursts: { type: "string", default: "5" },
      database: { type: "string" },
      only: { type: "string" },
      before: { type: "string" },
      "cpu-prof": { type: "string" },
    },
  });
  if (values.serve) return serve();
  const { findPostgres } = await import("../test/support/postgres-cluster.ts");
  const database =
    values.database === "pglite" || values.database === "postgres"
      ? values.database
      : "unavailable" in findPostgres()
        ? "pglite"
        : "postgres";
  const runs = Number(values.runs);
  const bursts = Number(values.bursts);
  const { createOpenAiStub } = await import("../test/support/openai-stub.ts");
  const stub = createOpenAiStub({ record: false });
  stub.respondWith(() => ({ text: "pong", usage: { prompt: 40, completion: 1 } }));
  const modelUrl = await stub.listen();
  const all: Variant[] = [
    { name: "full", toolset: "full", env: {} },
    { name: "full, no queue", toolset: "full", env: { PEERGATE_RUN_STARTS_AT_ONCE: "0" } },
    { name: "minimal", toolset: "minimal", env: {} },
  ];
  const chosen = all.filter(
    (v) => values.only === undefined || values.only.split(";").includes(v.name),
  );
  const before = values.before === undefined ? undefined : path.resolve(values.before);
  const variants = before
    ? chosen.flatMap((v) => [{ ...v, name: `${v.name}, before`, root: before }, v])
    : chosen;
  const profileDir = values["cpu-prof"];
  if (profileDir) await mkdir(profileDir, { recursive: true });
  const results: Measured[] = [];
  try {
    for (const variant of variants) {
      results.push(await measure(variant, { runs, bursts, database, modelUrl }, profileDir));
    }
  } finally {
    await stub.close();
  }
  printTable(results, { runs, database });
}

await main();
