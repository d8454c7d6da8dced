// What an idle instance costs the database: `npm exec -- node bench/idle.ts [--seconds S]
// [--instances N] [--settle S]` (defaults: 60 s measured after 15 s of settling, 3 instances).
//
// Starts peergate servers with no traffic and counts the SQL statements each sends (the opt-in
// counter of src/db/round-trips.ts): one on embedded PGlite, one alone on a PostgreSQL database
// and N sharing another, all at once (idle, they do not disturb each other). Start-up
// (migrations, the first recovery, the pollers' quick first looks) is left out: counting begins
// `--settle` seconds after the last instance started. Each instance's statements per second is printed beside issue 26's target
// (≤ 1 per idle instance) with a verdict, with the statements it sent grouped by their text, so a
// miss names its source. Prints `<!-- idle-result {json} -->` for bench/run-all.ts.
import { cp, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { loadConfig } from "../src/config.ts";
import type { RecordedStatement } from "../src/db/round-trips.ts";
import { createLogger } from "../src/log.ts";
import { type RunningServer, startServer } from "../src/server.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    settle: { type: "string", default: "15" },
    instances: { type: "string", default: "3" },
  },
});
const seconds = Number(values.seconds);
const settleSeconds = Number(values.settle);
const several = Number(values.instances);
const repoRoot = path.resolve(import.meta.dirname, "..");
/** Issue 26: statements per second per idle instance. */
const target = 1;

type Measured = {
  setup: string;
  instances: number;
  /** Statements per second of each instance. */
  perInstance: number[];
  /** Statement text (numbers and quoted values folded) → count, all instances together. */
  sources: Map<string, number>;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startInstance(scratch: string, name: string, databaseUrl: string | undefined) {
  const dir = path.join(scratch, name);
  const policies = path.join(dir, "policies");
  await cp(path.join(repoRoot, "policies"), policies, { recursive: true });
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: path.join(dir, "data"),
    PEERGATE_POLICIES_DIR: policies,
    PEERGATE_WORKSPACE: path.join(dir, "workspace"),
    PEERGATE_ADMIN_TOKEN: "bench-idle-admin-token-0123456789abcdef",
    PEERGATE_SECRET_KEY: "ab".repeat(32),
    PEERGATE_LOG_LEVEL: "warn",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  };
  const config = { ...loadConfig(env, dir), countRoundTrips: true };
  const logger = createLogger({
    level: config.logLevel,
    write: (line) => process.stderr.write(`${name}: ${line}\n`),
  });
  return startServer(config, logger, env);
}

/** Folds the parts of a statement that change between calls, so one source is one line. */
function sourceOf(statement: RecordedStatement): string {
  return statement.sql
    .replace(/\s+/g, " ")
    .replace(/'[^']*'/g, "'…'")
    .replace(/\$\d+/g, "$n")
    .slice(0, 110);
}

type Setup = { name: string; servers: RunningServer[] };

/** Counts every setup's statements over the same window. */
async function measure(setups: Setup[]): Promise<Measured[]> {
  await sleep(settleSeconds * 1000);
  const counting = setups.map((setup) => ({
    setup,
    counters: setup.servers.map((server) => {
      const counter = server.database.roundTrips;
      if (!counter) throw new Error("the server was opened without counting");
      return { counter, before: counter.read().statements, stopRecording: counter.record() };
    }),
  }));
  const started = performance.now();
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - started) / 1000;
  return counting.map(({ setup, counters }) => {
    const sources = new Map<string, number>();
    const perInstance = counters.map(({ counter, before, stopRecording }) => {
      for (const statement of stopRecording()) {
        const key = sourceOf(statement);
        sources.set(key, (sources.get(key) ?? 0) + 1);
      }
      return (counter.read().statements - before) / elapsed;
    });
    return { setup: setup.name, instances: setup.servers.length, perInstance, sources };
  });
}

async function main(): Promise<void> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-idle-"));
  const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
  const cluster = await startPostgresCluster();
  const setups: Setup[] = [];
  let results: Measured[] = [];
  try {
    const admin = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
    for (const name of ["idle_one", "idle_several"]) await admin.unsafe(`create database ${name}`);
    await admin.end();
    const urlOf = (name: string) => cluster.adminUrl.replace(/\/postgres$/, `/${name}`);
    process.stderr.write(
      `idle bench: ${settleSeconds} s settle, ${seconds} s measured, every setup at once\n`,
    );
    const start = async (name: string, count: number, url: string | undefined) => {
      const setup: Setup = { name, servers: [] };
      setups.push(setup);
      for (let i = 0; i < count; i++) {
        setup.servers.push(await startInstance(scratch, `${name.replace(/\W+/g, "-")}-${i}`, url));
      }
    };
    await start("embedded PGlite", 1, undefined);
    await start("PostgreSQL, 1 instance", 1, urlOf("idle_one"));
    await start(`PostgreSQL, ${several} instances`, several, urlOf("idle_several"));
    results = await measure(setups);
  } finally {
    await Promise.all(setups.flatMap((setup) => setup.servers.map((server) => server.stop())));
    cluster.remove();
    await rm(scratch, { recursive: true, force: true });
  }
  print(results);
}

function print(results: Measured[]): void {
  const lines = [
    `Idle instances: SQL statements sent with no traffic, over ${seconds} s after ${settleSeconds} s of settling.`,
    "",
    "| setup | instances | statements/s per instance (max) | all instances | target | verdict |",
    "|---|---:|---:|---:|---:|---|",
  ];
  for (const r of results) {
    const max = Math.max(...r.perInstance);
    const total = r.perInstance.reduce((a, b) => a + b, 0);
    lines.push(
      `| ${r.setup} | ${r.instances} | ${max.toFixed(2)} | ${total.toFixed(2)} | ≤ ${target} | ${max <= target ? "met" : "not met"} |`,
    );
  }
  lines.push("", "Where they come from (all setups, statements over the window):", "");
  const sources = new Map<string, number>();
  for (const r of results) {
    for (const [key, n] of r.sources) sources.set(key, (sources.get(key) ?? 0) + n);
  }
  lines.push("| statements | statement |", "|---:|---|");
  for (const [key, n] of [...sources].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
    lines.push(`| ${n} | \`${key.replaceAll("|", "\\|").replaceAll("`", "'")}\` |`);
  }
  lines.push(
    "",
    `<!-- idle-result ${JSON.stringify({
      target,
      seconds,
      setups: results.map((r) => ({
        setup: r.setup,
        instances: r.instances,
        maxPerInstance: Math.max(...r.perInstance),
      })),
    })} -->`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
