// Soak benchmark: `npm exec -- node bench/soak.ts [--minutes 10] [--capacity-seconds 20]
// [--load 0.5] [--concurrency 16] [--window-seconds S] [--warmup-seconds S]`. `--minutes 0.5` is a
// quick smoke.
//
// `peergate serve` as a real child process on a throwaway PostgreSQL (started here), its model an
// instant OpenAI-compatible stub on loopback (test/support/openai-stub.ts, in this process). The
// load mixes what callers and operators do:
//
//   a2a-send     blocking SendMessage (a run per message)         → 200 and a completed task
//   a2a-stream   SendStreamingMessage, the SSE read to its end    → 200 and a completed task
//   a2a-get      GetTask of a task this caller made earlier       → 200 and the task
//   webhook      a generic webhook fire with a new body           → 202 and a run id
//   churn        every 5 s: create a peer (admin API), send as it once, revoke it, then send
//                as it again from 127.0.0.2                       → 201, 200, 200, then 401
//
// First the capacity: a closed loop of `--concurrency` connections runs the mix for
// `--capacity-seconds` and counts what it completes per second. Then a warm-up at the soak's rate
// (a quarter of the soak, at most 30 s; not measured, but its answers must be intended too), then
// the soak: an open loop starts operations at `--load` (default 50 %) of that rate for
// `--minutes`, whatever the answers' latency (at most 512 in flight; what could not start is
// reported). Reported per window (60 s, or a twelfth of a run under 3 minutes): p50/p99 latency,
// the answers by status, the server process's RSS (/proc/<pid>/status) and the machine's load
// average (a shared machine's other processes show there); at the end the audit chain is verified
// through the admin API.
//
// Verdicts (the issue's targets): no unintended answer (anything but the statuses listed above;
// the 401 after a revocation and a 429 are the intended refusals); p99 stable (the last third of
// the windows' p99 within 1.5× of the first third's); RSS growth from the start to the end of the
// soak under 10 %; the audit chain verifies. Prints markdown, and the figures as JSON in an HTML
// comment (`<!-- soak-result … -->`) for bench/run-all.ts. Everything binds to 127.0.0.1.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createOpenAiStub } from "../test/support/openai-stub.ts";
import { startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { percentile } from "./load.ts";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    "capacity-seconds": { type: "string", default: "20" },
    load: { type: "string", default: "0.5" },
    concurrency: { type: "string", default: "16" },
    "window-seconds": { type: "string" },
    "warmup-seconds": { type: "string" },
  },
});
const minutes = Number(values.minutes);
const capacitySeconds = Number(values["capacity-seconds"]);
const loadShare = Number(values.load);
const concurrency = Number(values.concurrency);
if (!(minutes > 0 && capacitySeconds > 0 && loadShare > 0 && loadShare <= 1 && concurrency >= 1)) {
  throw new Error(
    "--minutes and --capacity-seconds must be > 0, --load in (0, 1], --concurrency ≥ 1",
  );
}
const soakMs = minutes * 60_000;
// At the soak's rate before anything is measured: the server's heap and caches settle (its RSS
// jumps in the first tens of seconds at a new load) and the first window is not a cold start.
const warmupMs =
  values["warmup-seconds"] !== undefined
    ? Number(values["warmup-seconds"]) * 1000
    : Math.min(30_000, soakMs / 4);
const windowMs =
  values["window-seconds"] !== undefined
    ? Number(values["window-seconds"]) * 1000
    : minutes >= 3
      ? 60_000
      : Math.max(5_000, soakMs / 12);
const churnEveryMs = 5_000;
const maxInFlight = 512;

const repoRoot = path.resolve(import.meta.dirname, "..");
const modelId = "openai-compatible:soak-instant";
const answerText = "pong";

// ---------------------------------------------------------------- the system under load

const cluster = await startPostgresCluster();
const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-soak-"));
const stub = createOpenAiStub({ record: false });
stub.respondWith(() => ({ text: answerText, usage: { prompt: 40, completion: 1 } }));
const modelUrl = await stub.listen();
let serve: ChildProcess | undefined;
let stopping = false;

async function cleanUp(): Promise<void> {
  stopping = true;
  if (serve && serve.exitCode === null && serve.signalCode === null) {
    const exited = new Promise((resolve) => serve?.once("exit", resolve));
    serve.kill("SIGTERM");
    const timer = setTimeout(() => serve?.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
  await stub.close();
  cluster.remove();
  await rm(scratch, { recursive: true, force: true });
}

async function copyPolicies(): Promise<string> {
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

/** `peergate serve`, logging at info (as operators run it) into a pipe this process drains. */
async function startServe(env: Record<string, string>): Promise<{ url: string; pid: number }> {
  const child = spawn(process.execPath, [path.join(repoRoot, "src/main.ts"), "serve"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  serve = child;
  const tail: string[] = [];
  return new Promise((resolve, reject) => {
    let buffer = "";
    let ready = false;
    child.stdout?.on("data", (chunk: Buffer) => {
      if (ready) return; // drained, not kept
      buffer += chunk.toString();
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        tail.push(line);
        try {
          const record = JSON.parse(line) as { msg?: string; url?: string };
          if (record.msg === "listening" && record.url && child.pid) {
            ready = true;
            resolve({ url: record.url, pid: child.pid });
          }
        } catch {
          // not a log line
        }
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => process.stderr.write(chunk));
    child.once("exit", (code) => {
      if (!ready) reject(new Error(`peergate serve exited with ${code}:\n${tail.join("\n")}`));
      else if (!stopping) console.error(`peergate serve exited with ${code} during the soak`);
    });
  });
}

/** Resident set size of a process, from /proc (Linux). */
function readRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? Number.NaN) * 1024;
}

// ---------------------------------------------------------------- HTTP

const mainAgent = new http.Agent({ keepAlive: true, maxSockets: maxInFlight });
/** Requests that must not share the load's source address (the throttle counts per address). */
const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 4, localAddress: "127.0.0.2" });

type Answer = { status: number; text: string };

function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; agent?: http.Agent },
): Promise<Answer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: options.method ?? (options.body === undefined ? "GET" : "POST"),
        agent: options.agent ?? mainAgent,
        headers: {
          ...options.headers,
          ...(options.body === undefined
            ? {}
            : {
                "content-type": "application/json",
                "content-length": Buffer.byteLength(options.body),
              }),
        },
        timeout: 60_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer within 60 s")));
    req.on("error", reject);
    req.end(options.body);
  });
}

function rpc(method: string, params: Record<string, unknown>): string {
  return JSON.stringify({ jsonrpc: "2.0", id: randomUUID(), method, params });
}

function message(text: string): Record<string, unknown> {
  return { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] } };
}

// ---------------------------------------------------------------- the mix

type OpName = "a2a-send" | "a2a-stream" | "a2a-get" | "webhook" | "churn";
type Outcome = { op: OpName; ms: number; status: number; intended: boolean; detail?: string };

const opWeights: [OpName, number][] = [
  ["a2a-send", 40],
  ["a2a-stream", 15],
  ["a2a-get", 25],
  ["webhook", 20],
];
const totalWeight = opWeights.reduce((sum, [, w]) => sum + w, 0);

function pickOp(): OpName {
  let r = Math.random() * totalWeight;
  for (const [op, w] of opWeights) {
    r -= w;
    if (r < 0) return op;
  }
  return "a2a-send";
}

type World = {
  url: string;
  adminToken: string;
  operatorToken: string;
  peers: { token: string; tasks: string[] }[];
  webhookToken: string;
};

const roomyBudgets = {
  concurrentRuns: 1_000,
  daily: { runs: 10_000_000, tokens: 10_000_000_000, costUsd: 1_000_000 },
};

async function admin(world: World, method: string, pathname: string, body?: unknown) {
  return request(`${world.url}/admin/v1${pathname}`, {
    method,
    // Roomy budgets widen a caller: the operator token goes along (the server ignores it otherwise).
    headers: {
      authorization: `Bearer ${world.adminToken}`,
      "x-peergate-operator-token": world.operatorToken,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** As the operator does: `peergate operator-token create`, straight to the database. */
function createOperatorToken(env: Record<string, string>): string {
  const made = spawnSync(
    process.execPath,
    [path.join(repoRoot, "src/main.ts"), "operator-token", "create", "--force", "--json"],
    { env, encoding: "utf8" },
  );
  if (made.status !== 0) throw new Error(`operator-token create: ${made.stderr}`);
  return (JSON.parse(made.stdout) as { operatorToken: string }).operatorToken;
}

async function addCaller(world: World, input: Record<string, unknown>): Promise<string> {
  const created = await admin(world, "POST", "/callers", input);
  if (created.status !== 201) throw new Error(`caller: ${created.status} ${created.text}`);
  return (JSON.parse(created.text) as { credential: { secret: string } }).credential.secret;
}

const a2aHeaders = (token: string) => ({
  authorization: `Bearer ${token}`,
  "a2a-version": "1.0",
});

function readTaskId(text: string): string | undefined {
  return /"task":\{"id":"([0-9a-f-]{36})"/.exec(text)?.[1];
}

async function runOp(world: World, op: Exclude<OpName, "churn">, i: number): Promise<Outcome> {
  const peer = world.peers[i % world.peers.length] as World["peers"][number];
  const t0 = performance.now();
  let answer: Answer;
  let ok: (a: Answer) => boolean;
  switch (op) {
    case "a2a-send":
      answer = await request(`${world.url}/a2a`, {
        headers: a2aHeaders(peer.token),
        body: rpc("SendMessage", message(`soak ${i}: say ${answerText}`)),
      });
      ok = (a) => a.status === 200 && a.text.includes("TASK_STATE_COMPLETED");
      if (answer.status === 200) {
        const id = readTaskId(answer.text);
        if (id && peer.tasks.length < 5_000) peer.tasks.push(id);
      }
      break;
    case "a2a-stream":
      answer = await request(`${world.url}/a2a`, {
        headers: a2aHeaders(peer.token),
        body: rpc("SendStreamingMessage", message(`soak ${i}: stream ${answerText}`)),
      });
      ok = (a) => a.status === 200 && a.text.includes("TASK_STATE_COMPLETED");
      break;
    case "a2a-get": {
      const taskId = peer.tasks[Math.floor(Math.random() * peer.tasks.length)];
      if (!taskId) return runOp(world, "a2a-send", i);
      answer = await request(`${world.url}/a2a`, {
        headers: a2aHeaders(peer.token),
        body: rpc("GetTask", { id: taskId }),
      });
      ok = (a) => a.status === 200 && a.text.includes(taskId) && !a.text.includes('"error"');
      break;
    }
    case "webhook":
      answer = await request(`${world.url}/webhooks/soak-hook`, {
        headers: { authorization: `Bearer ${world.webhookToken}` },
        body: JSON.stringify({ event: "soak", n: i, nonce: randomUUID() }),
      });
      ok = (a) => a.status === 202;
      break;
  }
  return outcome(op, t0, answer, ok(answer));
}

function outcome(op: OpName, t0: number, answer: Answer, fine: boolean): Outcome {
  // A 429 is a limit doing its job; every other answer must be the one the operation expects.
  const intended = fine || answer.status === 429;
  return {
    op,
    ms: performance.now() - t0,
    status: answer.status,
    intended,
    ...(intended ? {} : { detail: answer.text.slice(0, 300) }),
  };
}

let churnCount = 0;
/** Create a peer, use it, revoke it, and check the revoked token is refused: four outcomes. */
async function churn(world: World): Promise<Outcome[]> {
  const n = churnCount++;
  const out: Outcome[] = [];
  let t0 = performance.now();
  const created = await admin(world, "POST", "/callers", {
    name: `churn-${n}`,
    kind: "peer",
    budgets: roomyBudgets,
  });
  out.push(outcome("churn", t0, created, created.status === 201));
  if (created.status !== 201) return out;
  const token = (JSON.parse(created.text) as { credential: { secret: string } }).credential.secret;
  t0 = performance.now();
  const used = await request(`${world.url}/a2a`, {
    headers: a2aHeaders(token),
    body: rpc("SendMessage", message(`churn ${n}`)),
  });
  out.push(outcome("churn", t0, used, used.status === 200 && used.text.includes("COMPLETED")));
  t0 = performance.now();
  const revoked = await admin(world, "POST", `/callers/churn-${n}/revoke`, { reason: "soak" });
  out.push(outcome("churn", t0, revoked, revoked.status === 200));
  t0 = performance.now();
  const refused = await request(`${world.url}/a2a`, {
    headers: a2aHeaders(token),
    body: rpc("SendMessage", message(`churn ${n} after revocation`)),
    agent: probeAgent,
  });
  out.push(outcome("churn", t0, refused, refused.status === 401));
  return out;
}

async function safely(work: () => Promise<Outcome | Outcome[]>, op: OpName): Promise<Outcome[]> {
  const t0 = performance.now();
  try {
    const result = await work();
    return Array.isArray(result) ? result : [result];
  } catch (error) {
    return [{ op, ms: performance.now() - t0, status: 0, intended: false, detail: String(error) }];
  }
}

// ---------------------------------------------------------------- phases

async function measureCapacity(world: World): Promise<{ perSecond: number; outcomes: Outcome[] }> {
  const outcomes: Outcome[] = [];
  const deadline = performance.now() + capacitySeconds * 1000;
  const started = performance.now();
  let i = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      const op = pickOp() as Exclude<OpName, "churn">;
      outcomes.push(...(await safely(() => runOp(world, op, i++), op)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { perSecond: outcomes.length / seconds, outcomes };
}

type Window = {
  index: number;
  outcomes: Outcome[];
  rssEnd: number;
  /** The machine's 1-minute load average at the window's end (other processes included). */
  loadEnd: number;
  notStarted: number;
};

async function soak(
  world: World,
  pid: number,
  rate: number,
  durationMs: number,
): Promise<Window[]> {
  const windows: Window[] = [];
  let current: Window = { index: 0, outcomes: [], rssEnd: 0, loadEnd: 0, notStarted: 0 };
  let inFlight = 0;
  let i = 1_000_000;
  const started = performance.now();
  let windowStart = started;
  let due = 0;
  let lastTick = started;
  let nextChurn = started + churnEveryMs / 2;
  const pending = new Set<Promise<void>>();
  const launch = (work: () => Promise<Outcome[]>) => {
    const window = current;
    inFlight += 1;
    const p = work()
      .then((outs) => {
        // An operation counts in the window it started in.
        window.outcomes.push(...outs);
      })
      .finally(() => {
        inFlight -= 1;
        pending.delete(p);
      });
    pending.add(p);
  };
  while (performance.now() - started < durationMs) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    const now = performance.now();
    due += ((now - lastTick) / 1000) * rate;
    lastTick = now;
    while (due >= 1) {
      due -= 1;
      if (inFlight >= maxInFlight) {
        current.notStarted += 1;
        continue;
      }
      const op = pickOp() as Exclude<OpName, "churn">;
      const n = i++;
      launch(() => safely(() => runOp(world, op, n), op));
    }
    if (now >= nextChurn) {
      nextChurn += churnEveryMs;
      launch(() => safely(() => churn(world), "churn"));
    }
    if (now - windowStart >= windowMs) {
      current.rssEnd = readRss(pid);
      current.loadEnd = os.loadavg()[0] ?? Number.NaN;
      windows.push(current);
      console.error(`window ${current.index + 1}: ${current.outcomes.length} operations done`);
      current = {
        index: current.index + 1,
        outcomes: [],
        rssEnd: 0,
        loadEnd: 0,
        notStarted: 0,
      };
      windowStart = now;
    }
  }
  await Promise.all(pending);
  current.rssEnd = readRss(pid);
  current.loadEnd = os.loadavg()[0] ?? Number.NaN;
  if (current.outcomes.length > 0 || windows.length === 0) windows.push(current);
  else if (windows.length > 0) {
    (windows.at(-1) as Window).rssEnd = current.rssEnd;
    (windows.at(-1) as Window).loadEnd = current.loadEnd;
  }
  return windows;
}

// ---------------------------------------------------------------- report

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "—");

function countStatuses(outcomes: Outcome[]): string {
  const counts = new Map<number, number>();
  for (const o of outcomes) counts.set(o.status, (counts.get(o.status) ?? 0) + 1);
  return [...counts.entries()]
    .sort(([a], [b]) => a - b)
    .map(([status, n]) => `${status === 0 ? "no answer" : status}: ${n}`)
    .join(", ");
}

function latencies(outcomes: Outcome[]): number[] {
  return outcomes.map((o) => o.ms).sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const adminToken = `soak-admin-${randomUUID()}`;
  const admin0 = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
  await admin0.unsafe("create database peergate_soak");
  const pgVersion = String((await admin0`show server_version`)[0]?.server_version ?? "?");
  await admin0.end();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: cluster.adminUrl.replace(/\/postgres$/, "/peergate_soak"),
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: path.join(scratch, "data"),
    PEERGATE_POLICIES_DIR: await copyPolicies(),
    PEERGATE_WORKSPACE: path.join(scratch, "workspace"),
    PEERGATE_ADMIN_TOKEN: adminToken,
    PEERGATE_SECRET_KEY: randomBytes(32).toString("hex"),
    PEERGATE_MODEL: modelId,
    PEERGATE_MODEL_BASE_URL: modelUrl,
    PEERGATE_MODEL_API_KEY: "soak",
    PEERGATE_LOG_LEVEL: "info",
  };
  const { url, pid } = await startServe(env);
  const rssReady = readRss(pid);
  const world: World = {
    url,
    adminToken,
    operatorToken: createOperatorToken(env),
    peers: [],
    webhookToken: "",
  };
  for (let p = 0; p < 4; p++) {
    const token = await addCaller(world, {
      name: `soak-peer-${p + 1}`,
      kind: "peer",
      tier: "public",
      budgets: roomyBudgets,
    });
    world.peers.push({ token, tasks: [] });
  }
  world.webhookToken = await addCaller(world, {
    name: "soak-hook",
    kind: "webhook",
    promptTemplate: "Note this event: {{payload}}",
    budgets: roomyBudgets,
  });

  console.error(`capacity: ${concurrency} connections for ${capacitySeconds} s`);
  const capacity = await measureCapacity(world);
  const rate = capacity.perSecond * loadShare;
  console.error(
    `capacity ${capacity.perSecond.toFixed(1)} ops/s; soaking at ${rate.toFixed(1)} ops/s for ${minutes} min`,
  );
  const warmup =
    warmupMs > 0 ? (await soak(world, pid, rate, warmupMs)).flatMap((w) => w.outcomes) : [];
  const rssStart = readRss(pid);
  const windows = await soak(world, pid, rate, soakMs);

  const verify = await admin(world, "GET", "/audit/verify");
  const audit = JSON.parse(verify.text) as { ok: boolean; count?: number; problem?: string };

  // ---- figures
  const all = windows.flatMap((w) => w.outcomes);
  // The warm-up's answers are held to the same rule.
  const unintended = [...warmup, ...all].filter((o) => !o.intended);
  const windowP99 = windows.map((w) => percentile(latencies(w.outcomes), 99));
  const third = Math.max(1, Math.floor(windows.length / 3));
  const median = (list: number[]) => {
    const sorted = [...list].filter(Number.isFinite).sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    if (sorted.length === 0) return Number.NaN;
    return sorted.length % 2 === 1
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  };
  const firstP99 = median(windowP99.slice(0, third));
  const lastP99 = median(windowP99.slice(-third));
  const p99Drift = lastP99 / firstP99;
  const rssEnd = windows.at(-1)?.rssEnd ?? Number.NaN;
  const rssGrowth = (rssEnd - rssStart) / rssStart;
  const notStarted = windows.reduce((sum, w) => sum + w.notStarted, 0);
  const achieved = all.length / (soakMs / 1000);

  const lines: string[] = [];
  lines.push(
    `### Soak: ${minutes} min at ${Math.round(loadShare * 100)} % of measured capacity (peergate serve on PostgreSQL ${pgVersion}, ${os.cpus().length} CPUs, Node ${process.versions.node})`,
    "",
    `Capacity (closed loop, ${concurrency} connections, ${capacitySeconds} s, same mix without churn): **${capacity.perSecond.toFixed(1)} operations/s** (p50 ${ms(percentile(latencies(capacity.outcomes), 50))} ms, p99 ${ms(percentile(latencies(capacity.outcomes), 99))} ms; ${countStatuses(capacity.outcomes)}). Soak target ${rate.toFixed(1)} operations/s; achieved ${achieved.toFixed(1)}/s${notStarted ? `; ${notStarted} not started (${maxInFlight} already in flight)` : ""}. Mix: a2a-send 40, a2a-stream 15, a2a-get 25, webhook 20, plus a churn every ${churnEveryMs / 1000} s (create a peer, use it, revoke it, be refused).`,
    "",
    `| window (${(windowMs / 1000).toFixed(0)} s) | operations | p50 ms | p99 ms | answers by status | unintended | RSS MiB at end | load average at end |`,
    "|---:|---:|---:|---:|---|---:|---:|---:|",
    ...windows.map((w) => {
      const l = latencies(w.outcomes);
      return `| ${w.index + 1} | ${w.outcomes.length} | ${ms(percentile(l, 50))} | ${ms(percentile(l, 99))} | ${countStatuses(w.outcomes)} | ${w.outcomes.filter((o) => !o.intended).length} | ${mib(w.rssEnd)} | ${w.loadEnd.toFixed(2)} |`;
    }),
    "",
    "| operation | count | p50 ms | p99 ms | answers by status |",
    "|---|---:|---:|---:|---|",
    ...(["a2a-send", "a2a-stream", "a2a-get", "webhook", "churn"] as const).map((op) => {
      const of = all.filter((o) => o.op === op);
      const l = latencies(of);
      return `| ${op} | ${of.length} | ${ms(percentile(l, 50))} | ${ms(percentile(l, 99))} | ${countStatuses(of)} |`;
    }),
    "",
    `RSS of the server: ${mib(rssReady)} MiB when ready, ${mib(rssStart)} MiB at the start of the soak (after the capacity phase and ${(warmupMs / 1000).toFixed(0)} s of warm-up at the soak's rate, whose ${warmup.length} answers count toward the unintended ones below), ${mib(rssEnd)} MiB at the end.`,
    "",
    "| check | target | measured | verdict |",
    "|---|---|---|---|",
    `| unintended answers | none (only the intended 401/429) | ${unintended.length} of ${all.length + warmup.length} | ${unintended.length === 0 ? "met" : "**not met**"} |`,
    `| p99 stable | last third of the windows within 1.5× of the first third | ${ms(firstP99)} → ${ms(lastP99)} ms (${p99Drift.toFixed(2)}×) | ${p99Drift <= 1.5 ? "met" : "**not met**"} |`,
    `| RSS growth during the soak | < 10 % | ${(rssGrowth * 100).toFixed(1)} % | ${rssGrowth < 0.1 ? "met" : "**not met**"} |`,
    `| audit chain at the end | verifies | ${audit.ok ? `ok, ${audit.count} events` : `broken: ${audit.problem}`} | ${audit.ok ? "met" : "**not met**"} |`,
  );
  const firstUnintended = unintended.slice(0, 3);
  if (firstUnintended.length > 0) {
    lines.push(
      "",
      "First unintended answers:",
      ...firstUnintended.map((o) => `- ${o.op}: ${o.status || "no answer"} ${o.detail ?? ""}`),
    );
  }
  const result = {
    minutes,
    capacityPerSecond: capacity.perSecond,
    targetPerSecond: rate,
    achievedPerSecond: achieved,
    operations: all.length + warmup.length,
    unintended: unintended.length,
    p99FirstMs: firstP99,
    p99LastMs: lastP99,
    p99Drift,
    rssStartBytes: rssStart,
    rssEndBytes: rssEnd,
    rssGrowth,
    cpus: os.availableParallelism(),
    loadMax: Math.max(...windows.map((w) => w.loadEnd)),
    auditOk: audit.ok,
    auditEvents: audit.count ?? null,
  };
  lines.push("", `<!-- soak-result ${JSON.stringify(result)} -->`);
  console.log(lines.join("\n"));
}

try {
  await main();
} finally {
  mainAgent.destroy();
  probeAgent.destroy();
  await cleanUp();
}
