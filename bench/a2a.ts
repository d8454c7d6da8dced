// A2A `SendMessage` benchmark: `npm exec -- node bench/a2a.ts [--tasks N] [--concurrency C]`
// (defaults 50000 and 16; `--warmup W`; `--callers K` spreads peergate's connections over K peer
// callers, default 1; `--only reference|diy|diy-guaranteed|peergate`, or a comma-separated list;
// `--cpu-prof DIR` writes a V8 CPU profile of each server child, `--cpu-prof-measured DIR` one of
// the measured tasks only; `--statements` loads pg_stat_statements into each cluster and prints,
// per server, its statements' execution and planning time per measured task; `--compare DIR`
// adds the server of another checkout (e.g. a `git worktree` of main) as a second peergate,
// taking turns with this one; `--push [--rate R] [--seconds S]` the push load below).
//
// Four servers, each in its own child process (so each RSS is that server's alone):
//   reference  the a2a-js SDK's own stack: its express adapter (`jsonRpcHandler`), its in-memory
//              task store, and an executor that answers at once (task, working, answer artifact,
//              completed: the same events peergate publishes).
//   peergate   the real server (`startServer`, what `peergate serve` runs): bearer-token auth, the
//              caller's ceiling, a run per task through the run engine with everything persisted
//              in a real PostgreSQL (a throwaway cluster started here), and the model through the
//              real `@ai-sdk/openai-compatible` provider against an instant chat-completions stub
//              on loopback (a third child process, test/support/openai-stub.ts), logging at info.
//   diy        the do-it-yourself stack (bench/diy-server.ts): a2a-js on express, a PostgreSQL
//              TaskStore, a token table, one `generateText` call to its own copy of the stub.
//   diy-guaranteed  the same stack with peergate's guarantees written by hand
//              (bench/diy-guarantees.ts): a start transaction that admits the caller under row
//              locks (slot, day's share) and inserts the run and its audit event, the model call,
//              an end transaction that writes the end once, settles the day, gives the slot back
//              and inserts its audit event. The floor those guarantees set, measured.
//              `--only …,diy-guaranteed-commit-behind` adds a variant whose start sends its COMMIT
//              right behind its statement (one round trip, the rows locked only while it runs).
// peergate, diy and diy-guaranteed each get a PostgreSQL cluster of their own, so the CPU its
// backends use (read from /proc) is that server's alone; all count their SQL round trips at the
// driver (src/db/round-trips.ts).
// Each gets the same closed-loop load: C keep-alive connections, each sending the next blocking
// `SendMessage` (unique messageId, a new task every time) as soon as the last one answered: W
// warm-up tasks, then N tasks in four quarters, the servers taking turns (ABBA) so that whatever
// else the machine does falls on both alike. RSS (and the live heap after a full GC) is sampled
// at 0, 25, 50, 75 and 100 % of the tasks. Prints a markdown table and the ratio peergate /
// reference.
//
// `--push` measures push notification delivery instead (issue 16), on peergate alone: an open loop
// of `--rate R` new tasks per second (default 200) for `--seconds S` (default 10), after W warm-up
// tasks, each a blocking `SendMessage` carrying a push config (`taskPushNotificationConfig`) for a
// receiver in this process on loopback, which the caller is granted (`PUT …/push-hosts`) and the
// egress guard is told to allow (`PEERGATE_PUSH_ALLOW_ADDRESSES=127.0.0.1`). Every stored update of
// a task is one delivery, claimed by the server's push worker from the outbox. The receiver notes
// when each `X-A2A-Notification-Id` first arrived; the delivery's `created_at` in the database is
// when the transaction storing that task update began. Prints the events delivered per second and
// p50/p99 from task update to delivery, with the undelivered and repeated ones. Target: p99 <
// 100 ms at 200 tasks/s.
//
// Everything binds to 127.0.0.1. The load generator shares the machine's CPUs with both servers
// (and PostgreSQL and the model stub): compare the ratio of one run, not absolute numbers across
// machines.
//
// One file over 500 lines on purpose: the servers, the load generator and the table are measured
// together, alternating in one run, so their ratios compare like with like.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { percentile } from "./load.ts";

const self = new URL(import.meta.url).pathname;
const repoRoot = path.resolve(path.dirname(self), "..");
const modelId = "openai-compatible:bench-instant";
const answerText = "pong";

type ChildMessage =
  | { type: "ready"; url: string }
  | {
      type: "memory";
      id: number;
      rss: number;
      heapUsed: number;
      cpuMicros: number;
      /** SQL round trips this server has made so far (counted at its driver). */
      roundTrips: number;
    };

type ParentMessage = { type: "sample"; id: number } | { type: "stop" };

// ---------------------------------------------------------------- child roles
// Each role imports what it needs when it starts, so a child's RSS holds only its own server.

/**
 * Answers samples from the parent — memory after a full GC, and the CPU time this process has
 * used, less what the forced GCs took — and stops when told.
 */
function serveChild(
  url: string,
  stop: () => Promise<void>,
  roundTrips: () => number = () => 0,
): void {
  const cpuNow = () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  let forcedGcMicros = 0;
  const profile = measuredProfile(process.env.BENCH_PROFILE_MEASURED);
  process.on("message", (message: ParentMessage) => {
    if (message.type === "sample") {
      void profile.start();
      const cpuMicros = cpuNow() - forcedGcMicros;
      const before = cpuNow();
      (globalThis as { gc?: () => void }).gc?.();
      forcedGcMicros += cpuNow() - before;
      const { rss, heapUsed } = process.memoryUsage();
      process.send?.({
        type: "memory",
        id: message.id,
        rss,
        heapUsed,
        cpuMicros,
        roundTrips: roundTrips(),
      } satisfies ChildMessage);
    } else if (message.type === "stop") {
      void profile
        .stop()
        .then(stop)
        .finally(() => process.exit(0));
    }
  });
  process.send?.({ type: "ready", url } satisfies ChildMessage);
}

/**
 * `--cpu-prof-measured DIR`: a V8 CPU profile of the measured tasks only, from the first sample
 * (after the warm-up) to the stop, so start-up and migrations do not dilute it.
 */
function measuredProfile(dir: string | undefined) {
  let session: import("node:inspector/promises").Session | undefined;
  return {
    async start() {
      if (!dir || session) return;
      const { Session } = await import("node:inspector/promises");
      session = new Session();
      session.connect();
      await session.post("Profiler.enable");
      await session.post("Profiler.setSamplingInterval", { interval: 500 });
      await session.post("Profiler.start");
    },
    async stop() {
      if (!dir || !session) return;
      const { profile } = await session.post("Profiler.stop");
      await writeFile(
        path.join(dir, `${process.argv.at(-1)}-${process.pid}.cpuprofile`),
        JSON.stringify(profile),
      );
      session.disconnect();
    },
  };
}

async function runReference(): Promise<void> {
  const { Role, TaskState } = await import("@a2a-js/sdk");
  const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = await import(
    "@a2a-js/sdk/server"
  );
  const { agentCardHandler, jsonRpcHandler, UserBuilder } = await import(
    "@a2a-js/sdk/server/express"
  );
  const express = (await import("express")).default;
  type Card = import("@a2a-js/sdk").AgentCard;
  type Executor = import("@a2a-js/sdk/server").AgentExecutor;

  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card: Card = {
    name: "reference",
    description: "The a2a-js reference stack answering at once",
    version: "1.0.0",
    supportedInterfaces: [
      { url: `${url}/a2a`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "answer",
        name: "Answer",
        description: "Answers at once",
        tags: ["bench"],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
  const text = (value: string) => ({
    content: { $case: "text" as const, value },
    mediaType: "text/plain",
    filename: "",
    metadata: undefined,
  });
  const executor: Executor = {
    async execute(context, bus) {
      const ids = { taskId: context.taskId, contextId: context.contextId };
      const status = (state: (typeof TaskState)[keyof typeof TaskState], message?: string) =>
        AgentEvent.statusUpdate({
          ...ids,
          status: {
            state,
            timestamp: new Date().toISOString(),
            message: message
              ? {
                  messageId: randomUUID(),
                  ...ids,
                  role: Role.ROLE_AGENT,
                  parts: [text(message)],
                  metadata: undefined,
                  extensions: [],
                  referenceTaskIds: [],
                }
              : undefined,
          },
          metadata: undefined,
        });
      bus.publish(
        AgentEvent.task({
          id: ids.taskId,
          contextId: ids.contextId,
          status: {
            state: TaskState.TASK_STATE_SUBMITTED,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          artifacts: [],
          history: [context.userMessage],
          metadata: {},
        }),
      );
      bus.publish(status(TaskState.TASK_STATE_WORKING));
      bus.publish(
        AgentEvent.artifactUpdate({
          ...ids,
          artifact: {
            artifactId: `answer-${ids.taskId}`,
            name: "answer",
            description: "The agent's answer",
            parts: [text(answerText)],
            metadata: undefined,
            extensions: [],
          },
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
      );
      bus.publish(status(TaskState.TASK_STATE_COMPLETED, answerText));
      bus.finished();
    },
    async cancelTask() {},
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const app = express();
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
  app.use(
    "/a2a",
    jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }),
  );
  server.on("request", app);
  serveChild(url, () => new Promise<void>((resolve) => server.close(() => resolve())));
}

async function runModel(): Promise<void> {
  const { createOpenAiStub } = await import("../test/support/openai-stub.ts");
  const stub = createOpenAiStub({ record: false });
  stub.respondWith(() => ({ text: answerText, usage: { prompt: 40, completion: 1 } }));
  const baseUrl = await stub.listen();
  serveChild(baseUrl, () => stub.close());
}

async function runPeergate(): Promise<void> {
  const { loadConfig } = await import("../src/config.ts");
  const { createLogger } = await import("../src/log.ts");
  const { startServer } = await import("../src/server.ts");
  const env = { ...process.env } as Record<string, string>;
  // The bench measures round trips: the one place a server counts them.
  const config = { ...loadConfig(env, process.cwd()), countRoundTrips: true };
  // As `peergate serve` logs: JSON lines on stdout (here /dev/null), one per request at info.
  // Warnings and errors also go to stderr, the bench's own: a failed task can then be explained.
  const logger = createLogger({
    level: config.logLevel,
    write: (line) => {
      process.stdout.write(`${line}\n`);
      if (/^\{"time":"[^"]*","level":"(warn|error)"/.test(line)) {
        process.stderr.write(`peergate: ${line}\n`);
      }
    },
  });
  const server = await startServer(config, logger, env);
  serveChild(
    server.url,
    () => server.stop(),
    () => server.database.roundTrips?.read().roundTrips ?? 0,
  );
}

/** The bench callers' budgets (peergate's are set alike in startPeergateTarget). */
const benchBudgets = {
  concurrentRuns: 1_000,
  daily: { runs: 10_000_000, tokens: 10_000_000_000, costUsd: 1_000_000 },
};

async function runDiy(guaranteed: boolean, startCommitBehind = false): Promise<void> {
  const { startDiyServer } = await import("./diy-server.ts");
  const server = await startDiyServer({
    databaseUrl: process.env.DIY_DATABASE_URL ?? "",
    modelBaseUrl: process.env.DIY_MODEL_BASE_URL ?? "",
    modelId,
    tokens: (process.env.DIY_TOKENS ?? "").split(","),
    answerText,
    ...(guaranteed
      ? {
          guarantees: {
            concurrentRuns: benchBudgets.concurrentRuns,
            dailyRuns: benchBudgets.daily.runs,
            dailyTokens: benchBudgets.daily.tokens,
            dailyCostUsd: benchBudgets.daily.costUsd,
          },
          startCommitBehind,
        }
      : {}),
  });
  serveChild(
    server.url,
    () => server.stop(),
    () => server.roundTrips.read().roundTrips,
  );
}

// ---------------------------------------------------------------- the driver

type Sample = {
  rss: number;
  heapUsed: number;
  cpuMicros: number;
  roundTrips: number;
  /** CPU time of the target's PostgreSQL backends so far (from /proc), 0 without one. */
  pgCpuMicros: number;
};

type Child = {
  url: string;
  sample(): Promise<Omit<Sample, "pgCpuMicros">>;
  stop(): Promise<void>;
};

async function startChild(
  role:
    | "reference"
    | "peergate"
    | "model"
    | "diy"
    | "diy-guaranteed"
    | "diy-guaranteed-commit-behind",
  env: Record<string, string> = {},
  profileDir?: string,
  /** The bench script whose role runs (another checkout's, for `--compare`). */
  script: string = self,
): Promise<Child> {
  const flags = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const child: ChildProcess = spawn(
    process.execPath,
    ["--expose-gc", ...flags, script, "--serve", role],
    {
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    },
  );
  const pending = new Map<number, (m: Omit<Sample, "pgCpuMicros">) => void>();
  let nextId = 0;
  const url = await new Promise<string>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`${role} exited with ${code} before ready`)));
    child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") resolve(message.url);
      else if (message.type === "memory") {
        pending.get(message.id)?.(message);
        pending.delete(message.id);
      }
    });
  });
  child.removeAllListeners("exit");
  return {
    url,
    sample: () =>
      new Promise<Omit<Sample, "pgCpuMicros">>((resolve) => {
        const id = nextId++;
        pending.set(id, resolve);
        child.send({ type: "sample", id } satisfies ParentMessage);
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        child.send({ type: "stop" } satisfies ParentMessage);
      }),
  };
}

type Measured = {
  name: string;
  tasks: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  failures: number;
  firstFailure?: string;
  rss: number[];
  heap: number[];
  /** CPU time of the server's process per task (forced GCs of the samples left out). */
  cpuMsPerTask: number;
  /** CPU time of its PostgreSQL per task (from /proc), 0 without one. */
  pgCpuMsPerTask: number;
  /** SQL round trips per task, counted at the server's driver. */
  roundTripsPerTask: number;
};

/** The body of one blocking SendMessage that starts a new task. */
function sendMessageBody(i: number): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: i,
    method: "SendMessage",
    params: {
      message: {
        messageId: randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: `task ${i}: say pong` }],
      },
    },
  });
}

type Segment = { latencies: number[]; seconds: number; failures: number; firstFailure?: string };

/**
 * Closed loop: `concurrency` keep-alive connections send `total` requests between them, each the
 * next as soon as the last one answered.
 */
async function driveLoad(options: {
  url: string;
  /** The headers of connection `c` (each connection may be another caller). */
  headers: (connection: number) => Record<string, string>;
  total: number;
  concurrency: number;
}): Promise<Segment> {
  const target = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const latencies: number[] = [];
  let next = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const one = (i: number, connection: number) =>
    new Promise<void>((resolve, reject) => {
      const body = sendMessageBody(i);
      const t0 = performance.now();
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: "POST",
          agent,
          headers: {
            ...options.headers(connection),
            "content-type": "application/json",
            "a2a-version": "1.0",
            "content-length": Buffer.byteLength(body),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            latencies.push(performance.now() - t0);
            const text = Buffer.concat(chunks).toString("utf8");
            // A completed task carrying the answer; anything else is a failure.
            if (
              res.statusCode !== 200 ||
              !text.includes("TASK_STATE_COMPLETED") ||
              !text.includes(answerText)
            ) {
              failures += 1;
              firstFailure ??= `HTTP ${res.statusCode}: ${text.slice(0, 300)}`;
            }
            resolve();
          });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const started = performance.now();
  const worker = async (connection: number) => {
    while (next < options.total) await one(next++, connection);
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, c) => worker(c)));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { latencies, seconds, failures, ...(firstFailure ? { firstFailure } : {}) };
}

type LoadOptions = { tasks: number; concurrency: number; warmup: number };

/** A server under test: its child (memory samples), how to call it, and how to tear it down. */
type Target = {
  name: string;
  child: Child;
  headers: (connection: number) => Record<string, string>;
  /** CPU microseconds its PostgreSQL has used so far; absent without one. */
  pgCpuMicros?: () => Promise<number>;
  /** The server's own database, when the bench reads it afterwards (the push load). */
  databaseUrl?: string;
  /** With `--statements`: pg_stat_statements of its cluster. */
  statements?: Statements | undefined;
  stop(): Promise<void>;
};

type Statements = { reset(): Promise<void>; read(): Promise<StatementRow[]> };
type StatementRow = { query: string; calls: number; ms: number };

/** Whether `--statements` was given (read by the targets as they start their clusters). */
let loadStatements = false;

/**
 * Loads pg_stat_statements into a cluster nothing has connected to yet (one restart) and reads it
 * through `watcher`: each statement's calls and execution plus planning time.
 */
async function statementsOf(
  cluster: import("../test/support/postgres-cluster.ts").PostgresCluster,
  watcher: postgres.Sql,
): Promise<Statements | undefined> {
  if (!loadStatements) return undefined;
  const admin = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe("alter system set shared_preload_libraries = 'pg_stat_statements'");
  await admin.end();
  cluster.crash();
  cluster.start();
  // Known to the server only once the module is loaded.
  await watcher.unsafe("alter system set pg_stat_statements.track_planning = on");
  await watcher.unsafe("select pg_reload_conf()");
  await watcher.unsafe("create extension if not exists pg_stat_statements");
  return {
    reset: async () => {
      await watcher.unsafe("select pg_stat_statements_reset()");
    },
    read: () =>
      watcher.unsafe(
        `select query, sum(calls)::float8 as calls,
           sum(total_exec_time + total_plan_time)::float8 as ms
         from pg_stat_statements where query not like '%pg_stat%'
         group by query order by ms desc`,
      ) as unknown as Promise<StatementRow[]>,
  };
}

/** The statements of each server that has them, per measured task, the costliest first. */
async function printStatements(targets: Target[], results: Measured[]) {
  const lines: string[] = [];
  for (const [i, target] of targets.entries()) {
    const tasks = results[i]?.tasks ?? 0;
    if (!target.statements || tasks === 0) continue;
    const rows = await target.statements.read();
    const total = rows.reduce((sum, r) => sum + r.ms, 0);
    const cell = (query: string) => query.replace(/\s+/g, " ").slice(0, 110).replaceAll("|", "\\|");
    lines.push(
      "",
      `#### ${target.name}: PostgreSQL execution + planning ${(total / tasks).toFixed(3)} ms / task`,
      "",
      "| statement | calls / task | ms / task | mean ms |",
      "|---|---:|---:|---:|",
      ...rows
        .slice(0, 12)
        .map(
          (r) =>
            `| \`${cell(r.query)}\` | ${(r.calls / tasks).toFixed(2)} | ${(r.ms / tasks).toFixed(3)} | ${(r.ms / Math.max(r.calls, 1)).toFixed(3)} |`,
        ),
    );
  }
  if (lines.length > 0) console.log(lines.join("\n"));
}

/**
 * CPU time (user + system, microseconds) of a cluster's server processes now: every backend and
 * background process PostgreSQL lists, read from /proc/<pid>/stat. The bench's connections are
 * long-lived, so their backends' time accumulates across samples.
 */
async function readPgCpuMicros(sql: postgres.Sql): Promise<number> {
  const rows = await sql<{ pid: number }[]>`select pid from pg_stat_activity`;
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  for (const { pid } of rows) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += ((Number(fields[11]) + Number(fields[12])) / ticks) * 1e6;
    } catch {
      // A backend that exited meanwhile.
    }
  }
  return total;
}

async function sampleTarget(target: Target): Promise<Sample> {
  const [child, pgCpuMicros] = await Promise.all([
    target.child.sample(),
    target.pgCpuMicros?.() ?? Promise.resolve(0),
  ]);
  return { ...child, pgCpuMicros };
}

/**
 * Warms every target up, then runs the tasks in four quarters, taking turns (ABBA order) so that
 * whatever else the machine does falls on every target alike; memory at 0, 25, 50, 75, 100 %.
 */
async function measureInterleaved(targets: Target[], options: LoadOptions): Promise<Measured[]> {
  const load = (target: Target, total: number) =>
    driveLoad({
      url: `${target.child.url}/a2a`,
      headers: target.headers,
      total,
      concurrency: options.concurrency,
    });
  const state = targets.map((target) => ({
    target,
    segments: [] as Segment[],
    memory: [] as Sample[],
  }));
  for (const s of state) {
    console.error(`${s.target.name}: ${options.warmup} warm-up tasks`);
    await load(s.target, options.warmup);
    s.memory.push(await sampleTarget(s.target));
    await s.target.statements?.reset();
  }
  let done = 0;
  for (let quarter = 0; quarter < 4; quarter++) {
    const size = Math.round(((quarter + 1) * options.tasks) / 4) - done;
    done += size;
    const order = quarter % 2 === 0 ? state : [...state].reverse();
    for (const s of order) {
      console.error(`${s.target.name}: tasks ${done - size + 1}-${done}`);
      s.segments.push(await load(s.target, size));
      s.memory.push(await sampleTarget(s.target));
    }
  }
  return state.map(({ target, segments, memory }) => {
    const latencies = segments.flatMap((x) => x.latencies).sort((a, b) => a - b);
    const seconds = segments.reduce((sum, x) => sum + x.seconds, 0);
    const firstFailure = segments.find((x) => x.firstFailure)?.firstFailure;
    return {
      name: target.name,
      tasks: latencies.length,
      seconds,
      perSecond: latencies.length / seconds,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      failures: segments.reduce((sum, x) => sum + x.failures, 0),
      ...(firstFailure ? { firstFailure } : {}),
      rss: memory.map((m) => m.rss),
      heap: memory.map((m) => m.heapUsed),
      cpuMsPerTask:
        ((memory.at(-1)?.cpuMicros ?? 0) - (memory[0]?.cpuMicros ?? 0)) / 1000 / latencies.length,
      pgCpuMsPerTask:
        ((memory.at(-1)?.pgCpuMicros ?? 0) - (memory[0]?.pgCpuMicros ?? 0)) /
        1000 /
        latencies.length,
      roundTripsPerTask:
        ((memory.at(-1)?.roundTrips ?? 0) - (memory[0]?.roundTrips ?? 0)) / latencies.length,
    };
  });
}

/** A copy of policies/ with the instant model priced at $0 (callers have cost budgets). */
async function copyPolicies(scratch: string): Promise<string> {
  const dir = path.join(scratch, "policies");
  await cp(path.join(repoRoot, "policies"), dir, { recursive: true });
  const models = path.join(dir, "models.yaml");
  const text = await readFile(models, "utf8");
  await writeFile(
    models,
    text.replace(
      /^models:\n/m,
      `models:\n  "${modelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
    ),
  );
  return dir;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);

function printTables(results: Measured[], options: LoadOptions) {
  const reference = results.find((r) => r.name.startsWith("a2a-js"));
  const peergate = results.find((r) => r.name.startsWith("peergate"));
  const load = os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(" ");
  const lines = [
    `### A2A SendMessage: ${options.tasks} tasks each, ${options.concurrency} connections, after ${options.warmup} warm-up tasks (${os.cpus().length} CPUs, Node ${process.versions.node}, load average at the end ${load})`,
    "",
    "| server | tasks/s | p50 ms | p99 ms | failed | RSS MiB at 0 / 25 / 50 / 75 / 100 % | RSS growth MiB | live heap MiB at 0 / 100 % | server CPU ms / task | PostgreSQL CPU ms / task | SQL round trips / task |",
    "|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|",
    ...results.map(
      (r) =>
        `| ${r.name} | ${r.perSecond.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.failures} | ${r.rss.map(mib).join(" / ")} | ${mib((r.rss.at(-1) ?? 0) - (r.rss[0] ?? 0))} | ${mib(r.heap[0] ?? 0)} / ${mib(r.heap.at(-1) ?? 0)} | ${r.cpuMsPerTask.toFixed(2)} | ${r.pgCpuMsPerTask.toFixed(2)} | ${r.roundTripsPerTask.toFixed(1)} |`,
    ),
  ];
  const diy = results.find((r) => r.name.startsWith("do-it-yourself"));
  const guaranteed = results.find((r) => r.name.startsWith("guaranteed do-it-yourself"));
  const ratio = (label: string, a: Measured, b: Measured) =>
    `${label}: throughput ${(a.perSecond / b.perSecond).toFixed(2)}×, server CPU per task ${(a.cpuMsPerTask / b.cpuMsPerTask).toFixed(1)}×, PostgreSQL CPU per task ${(a.pgCpuMsPerTask / Math.max(b.pgCpuMsPerTask, 1e-9)).toFixed(1)}×, round trips per task ${a.roundTripsPerTask.toFixed(1)} vs ${b.roundTripsPerTask.toFixed(1)}`;
  if (diy && peergate) lines.push("", ratio("peergate / do-it-yourself", peergate, diy));
  if (guaranteed && peergate) {
    lines.push("", ratio("peergate / guaranteed do-it-yourself", peergate, guaranteed));
  }
  const behind = results.find((r) => r.name.startsWith("variant: guaranteed"));
  if (behind && guaranteed) {
    lines.push("", ratio("start's COMMIT behind / guaranteed do-it-yourself", behind, guaranteed));
  }
  if (guaranteed && diy) {
    lines.push("", ratio("guaranteed do-it-yourself / do-it-yourself", guaranteed, diy));
  }
  if (reference && peergate) {
    lines.push(
      "",
      `peergate / reference: throughput ${(peergate.perSecond / reference.perSecond).toFixed(2)}×, p50 ${(peergate.p50Ms / reference.p50Ms).toFixed(2)}×, p99 ${(peergate.p99Ms / reference.p99Ms).toFixed(2)}×, RSS at 100 % ${((peergate.rss.at(-1) ?? 0) / (reference.rss.at(-1) ?? 1)).toFixed(2)}×, server CPU per task ${(peergate.cpuMsPerTask / reference.cpuMsPerTask).toFixed(1)}×`,
    );
  }
  console.log(lines.join("\n"));
  for (const r of results) {
    if (r.firstFailure) console.log(`\n${r.name}: first failure: ${r.firstFailure}`);
  }
}

async function startReferenceTarget(profileDir?: string): Promise<Target> {
  const child = await startChild("reference", {}, profileDir);
  return {
    name: "a2a-js reference (express, in-memory store)",
    child,
    headers: () => ({}),
    stop: () => child.stop(),
  };
}

/**
 * peergate with `callers` peer callers. With `pushOrigin`, every caller is granted that URL prefix
 * for push notifications and the egress guard allows loopback (where the bench's receiver is).
 */
async function startPeergateTarget(
  callers: number,
  profileDir?: string,
  pushOrigin?: string,
  /** Another checkout whose server runs instead of this one's (`--compare DIR`). */
  checkout?: string,
): Promise<Target> {
  const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
  const cluster = await startPostgresCluster();
  const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-"));
  let model: Child | undefined;
  let peergate: Child | undefined;
  const watcher = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
  const statements = await statementsOf(cluster, watcher);
  const stop = async () => {
    await peergate?.stop();
    await model?.stop();
    await watcher.end({ timeout: 2 });
    cluster.remove();
    await rm(scratch, { recursive: true, force: true });
  };
  try {
    const admin = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe("create database peergate_bench");
    await admin.end();
    const databaseUrl = cluster.adminUrl.replace(/\/postgres$/, "/peergate_bench");
    model = await startChild("model");
    const adminToken = `bench-admin-${randomUUID()}`;
    peergate = await startChild(
      "peergate",
      {
        DATABASE_URL: databaseUrl,
        PEERGATE_HOST: "127.0.0.1",
        PEERGATE_PORT: "0",
        PEERGATE_DATA_DIR: path.join(scratch, "data"),
        PEERGATE_POLICIES_DIR: await copyPolicies(scratch),
        PEERGATE_WORKSPACE: path.join(scratch, "workspace"),
        PEERGATE_ADMIN_TOKEN: adminToken,
        PEERGATE_MODEL: modelId,
        PEERGATE_MODEL_BASE_URL: model.url,
        PEERGATE_MODEL_API_KEY: "bench",
        PEERGATE_LOG_LEVEL: "info",
        ...(pushOrigin ? { PEERGATE_PUSH_ALLOW_ADDRESSES: "127.0.0.1" } : {}),
      },
      profileDir,
      checkout ? path.join(checkout, "bench/a2a.ts") : self,
    );
    const tokens: string[] = [];
    // Budgets above the defaults widen a caller: they need the operator token, which the
    // operator makes with `peergate operator-token create` (here straight to the database).
    const made = spawnSync(
      process.execPath,
      [path.join(import.meta.dirname, "../src/main.ts"), "operator-token", "create", "--json"],
      { env: { PATH: process.env.PATH ?? "", DATABASE_URL: databaseUrl }, encoding: "utf8" },
    );
    if (made.status !== 0) throw new Error(`operator-token create: ${made.stderr}`);
    const { operatorToken } = JSON.parse(made.stdout) as { operatorToken: string };
    for (let i = 0; i < callers; i++) {
      const created = await fetch(`${peergate.url}/admin/v1/callers`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${adminToken}`,
          "content-type": "application/json",
          "x-peergate-operator-token": operatorToken,
        },
        body: JSON.stringify({
          name: `bench-peer-${i + 1}`,
          kind: "peer",
          tier: "public",
          // Room for the whole run: the default budgets would stop it at 500 runs a day and 2
          // at once.
          budgets: benchBudgets,
        }),
      });
      if (created.status !== 201) {
        throw new Error(`caller: ${created.status} ${await created.text()}`);
      }
      const { credential } = (await created.json()) as { credential: { secret: string } };
      tokens.push(credential.secret);
      if (pushOrigin) {
        // A push grant widens the caller: the operator token again.
        const granted = await fetch(
          `${peergate.url}/admin/v1/callers/bench-peer-${i + 1}/push-hosts`,
          {
            method: "PUT",
            headers: {
              authorization: `Bearer ${adminToken}`,
              "content-type": "application/json",
              "x-peergate-operator-token": operatorToken,
            },
            body: JSON.stringify({ hosts: [pushOrigin] }),
          },
        );
        if (granted.status !== 200) {
          throw new Error(`push hosts: ${granted.status} ${await granted.text()}`);
        }
      }
    }
    return {
      name: `peergate${checkout ? ` from ${checkout}` : ""}, ${callers === 1 ? "1 caller" : `${callers} callers`} (bearer, ceiling, PostgreSQL, openai-compatible stub)`,
      child: peergate,
      headers: (connection) => ({ authorization: `Bearer ${tokens[connection % callers]}` }),
      pgCpuMicros: () => readPgCpuMicros(watcher),
      statements,
      databaseUrl,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function startDiyTarget(
  callers: number,
  profileDir?: string,
  guaranteed: false | "guaranteed" | "commit-behind" = false,
): Promise<Target> {
  const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
  const cluster = await startPostgresCluster();
  const watcher = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
  const statements = await statementsOf(cluster, watcher);
  let model: Child | undefined;
  let diy: Child | undefined;
  const stop = async () => {
    await diy?.stop();
    await model?.stop();
    await watcher.end({ timeout: 2 });
    cluster.remove();
  };
  try {
    await watcher.unsafe("create database diy_bench");
    model = await startChild("model");
    const tokens = Array.from({ length: callers }, () => `diy-${randomUUID()}`);
    diy = await startChild(
      guaranteed === "commit-behind"
        ? "diy-guaranteed-commit-behind"
        : guaranteed
          ? "diy-guaranteed"
          : "diy",
      {
        DIY_DATABASE_URL: cluster.adminUrl.replace(/\/postgres$/, "/diy_bench"),
        DIY_MODEL_BASE_URL: model.url,
        DIY_TOKENS: tokens.join(","),
      },
      profileDir,
    );
    const who = callers === 1 ? "1 caller" : `${callers} callers`;
    return {
      name:
        guaranteed === "commit-behind"
          ? `variant: guaranteed do-it-yourself, ${who}, the start's COMMIT sent behind its statement`
          : guaranteed
            ? `guaranteed do-it-yourself, ${who} (the same + exact budgets, run rows, audit rows, end once)`
            : `do-it-yourself, ${who} (a2a-js + PostgreSQL TaskStore + token table + generateText)`,
      child: diy,
      headers: (connection) => ({ authorization: `Bearer ${tokens[connection % callers]}` }),
      pgCpuMicros: () => readPgCpuMicros(watcher),
      statements,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

// ---------------------------------------------------------------- push delivery (--push)

type PushReceiver = {
  url: string;
  origin: string;
  /** When each delivery id first arrived (epoch ms, sub-millisecond). */
  arrivals: Map<number, number>;
  /** Tasks whose terminal update arrived (the last of each task's deliveries, in order). */
  finished: Set<string>;
  repeats: () => number;
  close(): Promise<void>;
};

const terminalStates = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
]);

/** A receiver on loopback that answers every push with 204 and notes when it read it. */
async function startPushReceiver(): Promise<PushReceiver> {
  const arrivals = new Map<number, number>();
  const finished = new Set<string>();
  let repeats = 0;
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = performance.timeOrigin + performance.now();
      const id = Number(request.headers["x-a2a-notification-id"]);
      if (arrivals.has(id)) repeats += 1;
      else arrivals.set(id, at);
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        task?: { id?: string; status?: { state?: string } };
      };
      if (terminalStates.has(body.task?.status?.state ?? "")) finished.add(String(body.task?.id));
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url: `${origin}hooks/a2a`,
    origin,
    arrivals,
    finished,
    repeats: () => repeats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type OpenLoop = {
  taskIds: string[];
  latencies: number[];
  failures: number;
  firstFailure?: string;
  /** From the first request sent to the last answer read. */
  seconds: number;
};

/**
 * Open loop: request `i` goes out at `i / rate` seconds whether or not the earlier ones were
 * answered (a push receiver sees what arrives at that rate, not what the server can keep up with).
 */
async function driveOpenLoop(options: {
  url: string;
  headers: Record<string, string>;
  total: number;
  rate: number;
  pushUrl: string;
}): Promise<OpenLoop> {
  const target = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true });
  const result: OpenLoop = { taskIds: [], latencies: [], failures: 0, seconds: 0 };
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: i,
        method: "SendMessage",
        params: {
          message: {
            messageId: randomUUID(),
            role: "ROLE_USER",
            parts: [{ text: `task ${i}: say pong` }],
          },
          configuration: {
            taskPushNotificationConfig: { url: options.pushUrl, token: `bench-${i}` },
          },
        },
      });
      const t0 = performance.now();
      const fail = (why: string) => {
        result.failures += 1;
        result.firstFailure ??= why;
        resolve();
      };
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: "POST",
          agent,
          headers: {
            ...options.headers,
            "content-type": "application/json",
            "a2a-version": "1.0",
            "content-length": Buffer.byteLength(body),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            result.latencies.push(performance.now() - t0);
            const text = Buffer.concat(chunks).toString("utf8");
            const id = (JSON.parse(text) as { result?: { task?: { id?: string } } }).result?.task
              ?.id;
            if (res.statusCode !== 200 || !id || !text.includes("TASK_STATE_COMPLETED")) {
              return fail(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`);
            }
            result.taskIds.push(id);
            resolve();
          });
        },
      );
      req.on("error", (error) => fail(String(error)));
      req.end(body);
    });
  const started = performance.now();
  const sent: Promise<void>[] = [];
  for (let i = 0; i < options.total; i++) {
    const wait = started + (i * 1000) / options.rate - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    sent.push(one(i));
  }
  await Promise.all(sent);
  result.seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return result;
}

type PushMeasured = {
  rate: number;
  seconds: number;
  tasks: number;
  /** Tasks answered per second over the load (what the server kept up with). */
  tasksPerSecond: number;
  events: number;
  delivered: number;
  eventsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  repeats: number;
  sendP99Ms: number;
  failures: number;
  firstFailure?: string;
};

/** Waits (polling: this is a bench, not a test) until every task's last update arrived. */
async function waitForFinished(receiver: PushReceiver, taskIds: string[], ms: number) {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline && taskIds.some((id) => !receiver.finished.has(id))) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function measurePush(options: {
  rate: number;
  seconds: number;
  warmup: number;
  profileDir?: string | undefined;
}): Promise<PushMeasured> {
  const receiver = await startPushReceiver();
  let target: Target | undefined;
  try {
    target = await startPeergateTarget(1, options.profileDir, receiver.origin);
    const load = (total: number) =>
      driveOpenLoop({
        url: `${target?.child.url}/a2a`,
        headers: target?.headers(0) ?? {},
        total,
        rate: options.rate,
        pushUrl: receiver.url,
      });
    console.error(`push: ${options.warmup} warm-up tasks`);
    const warm = await load(options.warmup);
    await waitForFinished(receiver, warm.taskIds, 60_000);
    const total = Math.round(options.rate * options.seconds);
    console.error(`push: ${total} tasks at ${options.rate}/s`);
    const repeatsBefore = receiver.repeats();
    const started = performance.timeOrigin + performance.now();
    const run = await load(total);
    await waitForFinished(receiver, run.taskIds, 60_000);
    const sql = postgres(target.databaseUrl ?? "", { max: 1, onnotice: () => {} });
    const rows = await sql<{ id: string; created_ms: number }[]>`
      select id, extract(epoch from created_at)::float8 * 1000 as created_ms
      from push_deliveries where task_id = any(${run.taskIds})`;
    await sql.end({ timeout: 2 });
    const latencies: number[] = [];
    let last = started;
    for (const row of rows) {
      const at = receiver.arrivals.get(Number(row.id));
      if (at === undefined) continue;
      latencies.push(at - row.created_ms);
      last = Math.max(last, at);
    }
    latencies.sort((a, b) => a - b);
    const sends = [...run.latencies].sort((a, b) => a - b);
    return {
      rate: options.rate,
      seconds: options.seconds,
      tasks: run.taskIds.length,
      tasksPerSecond: run.taskIds.length / run.seconds,
      events: rows.length,
      delivered: latencies.length,
      eventsPerSecond: latencies.length / ((last - started) / 1000),
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: latencies.at(-1) ?? Number.NaN,
      repeats: receiver.repeats() - repeatsBefore,
      sendP99Ms: percentile(sends, 99),
      failures: run.failures,
      ...(run.firstFailure ? { firstFailure: run.firstFailure } : {}),
    };
  } finally {
    await target?.stop();
    await receiver.close();
  }
}

function printPushTable(r: PushMeasured, warmup: number) {
  const load = os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(" ");
  const lines = [
    `### A2A push delivery: ${r.rate} tasks/s for ${r.seconds} s, after ${warmup} warm-up tasks, one push config per task, receiver on loopback (${os.cpus().length} CPUs, Node ${process.versions.node}, load average at the end ${load})`,
    "",
    "| push delivery | tasks | tasks/s answered | SendMessage p99 ms | failed | events stored | events delivered | events delivered/s | p50 update → delivery ms | p99 update → delivery ms | max ms | repeats |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    `| peergate, ${r.rate} tasks/s × ${r.seconds} s | ${r.tasks} | ${r.tasksPerSecond.toFixed(0)} | ${r.sendP99Ms.toFixed(1)} | ${r.failures} | ${r.events} | ${r.delivered} | ${r.eventsPerSecond.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.maxMs.toFixed(1)} | ${r.repeats} |`,
    "",
    `<!-- push-result ${JSON.stringify(r)} -->`,
  ];
  console.log(lines.join("\n"));
  if (r.firstFailure) console.log(`\npush: first failure: ${r.firstFailure}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tasks: { type: "string", default: "50000" },
      concurrency: { type: "string", default: "16" },
      warmup: { type: "string" },
      serve: { type: "string" },
      only: { type: "string" },
      callers: { type: "string", default: "1" },
      "cpu-prof": { type: "string" },
      "cpu-prof-measured": { type: "string" },
      compare: { type: "string" },
      statements: { type: "boolean", default: false },
      push: { type: "boolean", default: false },
      rate: { type: "string", default: "200" },
      seconds: { type: "string", default: "10" },
    },
  });
  if (values.serve === "reference") return runReference();
  if (values.serve === "model") return runModel();
  if (values.serve === "peergate") return runPeergate();
  if (values.serve === "diy") return runDiy(false);
  if (values.serve === "diy-guaranteed") return runDiy(true);
  if (values.serve === "diy-guaranteed-commit-behind") return runDiy(true, true);

  const profileDir = values["cpu-prof"] ? path.resolve(values["cpu-prof"]) : undefined;
  if (values["cpu-prof-measured"]) {
    // Read by each server child (serveChild), which inherits this environment.
    process.env.BENCH_PROFILE_MEASURED = path.resolve(values["cpu-prof-measured"]);
    await mkdir(process.env.BENCH_PROFILE_MEASURED, { recursive: true });
  }
  if (values.push) {
    const rate = Number(values.rate);
    const seconds = Number(values.seconds);
    const warmup = Number(values.warmup ?? Math.min(500, rate));
    if (!(rate > 0 && seconds > 0 && warmup >= 0)) {
      throw new Error("--rate and --seconds take positive numbers");
    }
    printPushTable(await measurePush({ rate, seconds, warmup, profileDir }), warmup);
    return;
  }
  loadStatements = values.statements;
  const tasks = Number(values.tasks);
  const concurrency = Number(values.concurrency);
  const warmup = Number(values.warmup ?? Math.min(1_000, Math.max(100, Math.round(tasks / 20))));
  if (!(tasks >= 4 && concurrency >= 1 && warmup >= 0)) {
    throw new Error("--tasks must be at least 4, --concurrency at least 1");
  }
  const callers = Number(values.callers);
  if (!(Number.isInteger(callers) && callers >= 1)) throw new Error("--callers takes a count");
  // The commit-behind variant runs only when named (an ablation of the start's lock hold).
  const names = ["reference", "diy", "diy-guaranteed", "diy-guaranteed-commit-behind", "peergate"];
  const only = values.only?.split(",").map((name) => name.trim());
  if (only?.some((name) => !names.includes(name))) {
    throw new Error(`--only takes ${names.join(", ")} or a comma-separated list of them`);
  }
  const runs = (name: string) =>
    only === undefined ? name !== "diy-guaranteed-commit-behind" : only.includes(name);
  const options = { tasks, concurrency, warmup };
  const targets: Target[] = [];
  try {
    if (runs("reference")) targets.push(await startReferenceTarget(profileDir));
    if (runs("diy")) targets.push(await startDiyTarget(callers, profileDir));
    if (runs("diy-guaranteed")) {
      targets.push(await startDiyTarget(callers, profileDir, "guaranteed"));
    }
    if (runs("diy-guaranteed-commit-behind")) {
      targets.push(await startDiyTarget(callers, profileDir, "commit-behind"));
    }
    if (runs("peergate")) {
      targets.push(await startPeergateTarget(callers, profileDir));
      if (values.compare) {
        // The same load on another checkout's server, taking turns with this one (A/B).
        const checkout = path.resolve(values.compare);
        targets.push(await startPeergateTarget(callers, profileDir, undefined, checkout));
      }
    }
    const results = await measureInterleaved(targets, options);
    printTables(results, options);
    await printStatements(targets, results);
  } finally {
    for (const target of targets) await target.stop();
  }
}

await main();
