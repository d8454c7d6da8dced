// A2A `SendMessage` benchmark: `npm exec -- node bench/a2a.ts [--tasks N] [--concurrency C]`
// (defaults 50000 and 16; `--warmup W`; `--callers K` spreads peergate's connections over K peer
// callers, default 1; `--only reference|peergate`; `--cpu-prof DIR` writes a V8 CPU profile of
// each server child).
//
// Two servers, each in its own child process (so each RSS is that server's alone):
//   reference  the a2a-js SDK's own stack: its express adapter (`jsonRpcHandler`), its in-memory
//              task store, and an executor that answers at once (task, working, answer artifact,
//              completed: the same events peergate publishes).
//   peergate   the real server (`startServer`, what `peergate serve` runs): bearer-token auth, the
//              caller's ceiling, a run per task through the run engine with everything persisted
//              in a real PostgreSQL (a throwaway cluster started here), and the model through the
//              real `@ai-sdk/openai-compatible` provider against an instant chat-completions stub
//              on loopback (a third child process, test/support/openai-stub.ts), logging at info.
// Each gets the same closed-loop load: C keep-alive connections, each sending the next blocking
// `SendMessage` (unique messageId, a new task every time) as soon as the last one answered: W
// warm-up tasks, then N tasks in four quarters, the servers taking turns (ABBA) so that whatever
// else the machine does falls on both alike. RSS (and the live heap after a full GC) is sampled
// at 0, 25, 50, 75 and 100 % of the tasks. Prints a markdown table and the ratio peergate /
// reference.
//
// Everything binds to 127.0.0.1. The load generator shares the machine's CPUs with both servers
// (and PostgreSQL and the model stub): compare the ratio of one run, not absolute numbers across
// machines.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
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
  | { type: "memory"; id: number; rss: number; heapUsed: number; cpuMicros: number };

type ParentMessage = { type: "sample"; id: number } | { type: "stop" };

// ---------------------------------------------------------------- child roles
// Each role imports what it needs when it starts, so a child's RSS holds only its own server.

/**
 * Answers samples from the parent — memory after a full GC, and the CPU time this process has
 * used, less what the forced GCs took — and stops when told.
 */
function serveChild(url: string, stop: () => Promise<void>): void {
  const cpuNow = () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  let forcedGcMicros = 0;
  process.on("message", (message: ParentMessage) => {
    if (message.type === "sample") {
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
      } satisfies ChildMessage);
    } else if (message.type === "stop") {
      void stop().finally(() => process.exit(0));
    }
  });
  process.send?.({ type: "ready", url } satisfies ChildMessage);
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
  const config = loadConfig(env, process.cwd());
  // As `peergate serve` logs: JSON lines on stdout (here /dev/null), one per request at info.
  const logger = createLogger({
    level: config.logLevel,
    write: (line) => process.stdout.write(`${line}\n`),
  });
  const server = await startServer(config, logger, env);
  serveChild(server.url, () => server.stop());
}

// ---------------------------------------------------------------- the driver

type Sample = { rss: number; heapUsed: number; cpuMicros: number };

type Child = {
  url: string;
  sample(): Promise<Sample>;
  stop(): Promise<void>;
};

async function startChild(
  role: "reference" | "peergate" | "model",
  env: Record<string, string> = {},
  profileDir?: string,
): Promise<Child> {
  const flags = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const child: ChildProcess = spawn(
    process.execPath,
    ["--expose-gc", ...flags, self, "--serve", role],
    {
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    },
  );
  const pending = new Map<number, (m: Sample) => void>();
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
      new Promise((resolve) => {
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
  stop(): Promise<void>;
};

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
    s.memory.push(await s.target.child.sample());
  }
  let done = 0;
  for (let quarter = 0; quarter < 4; quarter++) {
    const size = Math.round(((quarter + 1) * options.tasks) / 4) - done;
    done += size;
    const order = quarter % 2 === 0 ? state : [...state].reverse();
    for (const s of order) {
      console.error(`${s.target.name}: tasks ${done - size + 1}-${done}`);
      s.segments.push(await load(s.target, size));
      s.memory.push(await s.target.child.sample());
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
    "| server | tasks/s | p50 ms | p99 ms | failed | RSS MiB at 0 / 25 / 50 / 75 / 100 % | RSS growth MiB | live heap MiB at 0 / 100 % | server CPU ms / task |",
    "|---|---:|---:|---:|---:|---|---:|---|---:|",
    ...results.map(
      (r) =>
        `| ${r.name} | ${r.perSecond.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.failures} | ${r.rss.map(mib).join(" / ")} | ${mib((r.rss.at(-1) ?? 0) - (r.rss[0] ?? 0))} | ${mib(r.heap[0] ?? 0)} / ${mib(r.heap.at(-1) ?? 0)} | ${r.cpuMsPerTask.toFixed(2)} |`,
    ),
  ];
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

async function startPeergateTarget(callers: number, profileDir?: string): Promise<Target> {
  const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
  const cluster = await startPostgresCluster();
  const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-"));
  let model: Child | undefined;
  let peergate: Child | undefined;
  const stop = async () => {
    await peergate?.stop();
    await model?.stop();
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
      },
      profileDir,
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
          budgets: {
            concurrentRuns: 1_000,
            daily: { runs: 10_000_000, tokens: 10_000_000_000, costUsd: 1_000_000 },
          },
        }),
      });
      if (created.status !== 201) {
        throw new Error(`caller: ${created.status} ${await created.text()}`);
      }
      const { credential } = (await created.json()) as { credential: { secret: string } };
      tokens.push(credential.secret);
    }
    return {
      name: `peergate, ${callers === 1 ? "1 caller" : `${callers} callers`} (bearer, ceiling, PostgreSQL, openai-compatible stub)`,
      child: peergate,
      headers: (connection) => ({ authorization: `Bearer ${tokens[connection % callers]}` }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
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
    },
  });
  if (values.serve === "reference") return runReference();
  if (values.serve === "model") return runModel();
  if (values.serve === "peergate") return runPeergate();

  const tasks = Number(values.tasks);
  const concurrency = Number(values.concurrency);
  const warmup = Number(values.warmup ?? Math.min(1_000, Math.max(100, Math.round(tasks / 20))));
  if (!(tasks >= 4 && concurrency >= 1 && warmup >= 0)) {
    throw new Error("--tasks must be at least 4, --concurrency at least 1");
  }
  const callers = Number(values.callers);
  if (!(Number.isInteger(callers) && callers >= 1)) throw new Error("--callers takes a count");
  const only = values.only;
  if (only !== undefined && only !== "reference" && only !== "peergate") {
    throw new Error("--only takes reference or peergate");
  }
  const profileDir = values["cpu-prof"] ? path.resolve(values["cpu-prof"]) : undefined;
  const options = { tasks, concurrency, warmup };
  const targets: Target[] = [];
  try {
    if (only !== "peergate") targets.push(await startReferenceTarget(profileDir));
    if (only !== "reference") targets.push(await startPeergateTarget(callers, profileDir));
    printTables(await measureInterleaved(targets, options), options);
  } finally {
    for (const target of targets) await target.stop();
  }
}

await main();
