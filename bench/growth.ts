// Growth: does peergate stay flat as its tables grow? `npm exec -- node bench/growth.ts
// [--sizes 10000,1000000] [--repeats 7] [--tasks 200] [--concurrency 4]`.
//
// A throwaway PostgreSQL cluster (test/support/postgres-cluster.ts), its database in a tablespace
// on disk, migrated. At each size the tables are topped up in SQL (INSERT … SELECT FROM generate_series: no round trip per row) to
// that many rows each — runs, tool calls, A2A tasks and their events, push configs (one per 100
// tasks) and deliveries, webhook claims, JWT ids, audit events — beside 1 000 JWT peers and one
// bearer-token caller holding a tenth of everything (100 000 tasks at 1 M). The seeded audit
// events are chained here in batches with the project's own hash (computeAuditHash, in the chain
// order the chainer uses), so `audit verify` walks a chain of the full size; the events the
// server writes during the bench are chained by its own chainer after them.
//
// Then the real server (`peergate serve`, a child process) on that database, measured through
// HTTP, medians of `--repeats`:
// - start-up: spawn to the "listening" line on the big database (a restart: the second start),
//   wall and the server's CPU up to that line (from /proc);
// - SendMessage from the big caller: p50/p99 over `--tasks` blocking tasks on `--concurrency`
//   connections, and the server's CPU per task (from /proc) against an instant model stub;
// - ListTasks of the big caller: the first page, and a page deep in its tasks (the cursor of a
//   client that paged half-way);
// - a JWT request (GetTask by one of the 1 000 JWT peers, a fresh jti each time);
// - the admin lists: callers, runs (newest, one caller's, by status, a deep page), the audit
//   trail (first page, a deep page, by kind, by subject);
// - `peergate audit verify` as the CLI runs it (the server stopped): events/s, peak RSS, and the
//   progress lines it printed.
// EXPLAIN of the SQL behind the lookups: a sequential scan of a grown table is printed.
// Prints a markdown table (each figure per size, the ratio largest/smallest, its target and a
// verdict) and `<!-- growth-result {json} -->` for bench/run-all.ts. `--sizes 300 --repeats 1
// --tasks 5` is the smoke run (seconds).
//
// One file over 500 lines on purpose: the seed, the measures and the EXPLAIN checks must agree on
// the same made-up rows (ids, callers, xact ids), so they are read beside each other.
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { chown, cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { hashSecret } from "../src/auth/secrets.ts";
import {
  chainedPageStatement,
  computeAuditHash,
  flushAuditChain,
  genesisHash,
  verifyAuditChain,
} from "../src/db/audit.ts";
import { type Db, openDatabase, selectRows } from "../src/db/client.ts";
import { migrateDatabase } from "../src/db/migrate.ts";
import { createOpenAiStub } from "../test/support/openai-stub.ts";
import { findPostgres, startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { type ServeChild, spawnServeChild } from "../test/support/serve-process.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10000,1000000" },
    repeats: { type: "string", default: "7" },
    tasks: { type: "string", default: "200" },
    concurrency: { type: "string", default: "4" },
    starts: { type: "string", default: "2" },
  },
});
const sizes = values.sizes
  .split(",")
  .map(Number)
  .sort((a, b) => a - b);
for (const size of sizes) {
  if (!Number.isInteger(size) || size < 100 || size % 100 !== 0) {
    throw new Error(`--sizes: ${size} is not a multiple of 100`);
  }
}
const repeats = Math.max(1, Number(values.repeats));
const tasksPerSize = Math.max(1, Number(values.tasks));
const concurrency = Math.max(1, Number(values.concurrency));
/** Server starts per size; the last is measured (2: a restart, Node's compile cache warm). */
const starts = Math.max(1, Number(values.starts));

/** A lookup is flat when its figure at the largest size is within this factor of the smallest. */
const flatBound = 2;
/** `audit verify` is linear when its events/s stays within this factor, its peak RSS too. */
const linearBound = 1.5;

const repoRoot = path.resolve(import.meta.dirname, "..");
const mainScript = path.join(repoRoot, "src/main.ts");
const modelId = "openai-compatible:bench-instant";
const answerText = "pong";
const bigCaller = "00000000-0000-4000-8000-00000000b16c";
const bigToken = `pg_${"b".repeat(43)}`;
const adminToken = `pga_${"a".repeat(43)}`;
const jwtPeers = 1_000;
/** The JWT peer the bench signs for (any of the 1 000 would do: the lookup is by issuer). */
const jwtPeer = 100;
/** A task of that peer (g = 99: 1 + 99 % 1000 = 100, and 99 is not a big-caller row). */
const jwtPeerTask = 99;
/** The seeded rows' clock: row g was written g seconds after this. */
const epoch = "2026-01-01T00:00:00Z";

const scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-growth-"));
const keys = await generateKeyPair("ES256", { extractable: true });
const publicJwk = await exportJWK(keys.publicKey);

const progress = (line: string) => console.error(`growth: ${line}`);

// ---------------------------------------------------------------- seeding

async function count(db: Db, table: string): Promise<number> {
  const [row] = await selectRows<{ n: unknown }>(db, sql.raw(`select count(*) as n from ${table}`));
  return Number(row?.n ?? 0);
}

async function seedCallers(db: Db): Promise<void> {
  const budgets = {
    concurrentRuns: 1_000,
    daily: { runs: 1_000_000_000, tokens: 1_000_000_000_000, costUsd: 1_000_000 },
  };
  await db.execute(sql`
    insert into callers (id, name, kind, tier, budgets)
    values (${bigCaller}::uuid, 'big', 'peer', 'public', ${JSON.stringify(budgets)}::jsonb)`);
  await db.execute(sql`
    insert into credentials (caller_id, kind, secret_hash, prefix)
    values (${bigCaller}::uuid, 'token', ${hashSecret(bigToken)}, 'pg_bbbb…')`);
  // 1 000 JWT peers, each its own issuer (one key between them: the lookup is by issuer).
  await db.execute(sql`
    insert into callers (id, name, kind, tier, budgets, jwt)
    select md5('peer' || n)::uuid, 'jwt-' || n, 'peer', 'public', ${JSON.stringify(budgets)}::jsonb,
           jsonb_build_object('issuer', 'https://peer-' || n || '.example', 'audience', 'peergate',
                              'algorithms', jsonb_build_array('ES256'), 'maxAgeSeconds', 300,
                              'jwk', ${JSON.stringify(publicJwk)}::jsonb)
      from generate_series(1, ${jwtPeers}::int) n`);
}

const grownTables = [
  "runs",
  "tool_calls",
  "a2a_tasks",
  "a2a_task_events",
  "push_configs",
  "push_deliveries",
  "webhook_deliveries",
  "jwt_replays",
  "audit_events",
  "audit_chain",
];

/**
 * Rows `from`..`size` of every grown table, in SQL, in one transaction. Bulk-load style: the
 * grown tables' secondary indexes are dropped first and built again after (their definitions as
 * the migrations made them, read from pg_indexes), and foreign-key and audit triggers are off for
 * the load (session_replication_role = replica): every seeded reference points at a seeded row.
 */
async function topUp(db: Db, from: number, size: number): Promise<void> {
  const indexes = await selectRows<{ name: string; definition: string }>(
    db,
    sql`select i.indexname as name, i.indexdef as definition from pg_indexes i
         where i.schemaname = 'public'
           and i.tablename in (${sql.join(
             grownTables.map((t) => sql`${t}`),
             sql`, `,
           )})
           and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`,
  );
  await db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    await tx.execute(sql`set local maintenance_work_mem = '256MB'`);
    for (const index of indexes) await tx.execute(sql.raw(`drop index "${index.name}"`));
    await insertRows(tx as unknown as Db, from, size);
    const t0 = performance.now();
    for (const index of indexes) await tx.execute(sql.raw(index.definition));
    progress(
      `  ${indexes.length} secondary indexes built in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    // The load ran without triggers, so the task counts they keep are set as the migration that
    // made them sets them: each caller's tasks counted once (drizzle/0016_task_counts.sql).
    await tx.execute(sql`insert into a2a_task_counts (caller_id, tasks)
      select caller_id, count(*) from a2a_tasks group by caller_id
      on conflict (caller_id) do update set tasks = excluded.tasks`);
  });
}

/** How far each top-up moves the audit events already there below the ones it seeds. */
const seededXactGap = 1_000_000_000_000;

/** Row g of each grown table: run g, its tool call, task, event, push delivery, audit event… */
async function insertRows(db: Db, from: number, size: number): Promise<void> {
  const range = sql`generate_series(${from}::int, ${size}::int) g`;
  const at = sql`(${epoch}::timestamptz + g * interval '1 second')`;
  const caller = sql`(case when g % 10 = 0 then ${bigCaller}::uuid
                          else md5('peer' || (1 + g % ${jwtPeers}::int))::uuid end)`;
  const status = sql`(case when g % 100 = 7 then 'failed' when g % 100 = 13 then 'canceled'
                          else 'completed' end)`;
  const step = async (name: string, statement: ReturnType<typeof sql>) => {
    const t0 = performance.now();
    await db.execute(statement);
    progress(`  ${name} ${from}..${size} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  };
  await step(
    "runs",
    sql`insert into runs (id, caller_id, origin, a2a_task_id, a2a_context_id, status,
                          approval_policy, tool_set, segments, budget_used, messages, model_id,
                          result, error, created_at, updated_at, started_at, finished_at)
    select md5('run' || g)::uuid, ${caller}, 'a2a', md5('task' || g)::uuid::text,
           md5('ctx' || (g / 4))::uuid::text, ${status}, 'auto', '{read_file,list_files,web_fetch}', 1,
           jsonb_build_object('tokens', 350 + g % 500, 'costUsd', 0.0004, 'durationMs', 900 + g % 300, 'steps', 2),
           jsonb_build_array(
             jsonb_build_object('role', 'user', 'content', 'task ' || g || ': summarise the open issues in the tracker'),
             jsonb_build_object('role', 'assistant', 'content', jsonb_build_array(jsonb_build_object(
               'type', 'tool-call', 'toolCallId', 'call-1', 'toolName', 'read_file',
               'input', jsonb_build_object('path', 'notes/' || g || '.md')))),
             jsonb_build_object('role', 'tool', 'content', jsonb_build_array(jsonb_build_object(
               'type', 'tool-result', 'toolCallId', 'call-1', 'toolName', 'read_file',
               'output', jsonb_build_object('type', 'text', 'value', repeat('note ', 20))))),
             jsonb_build_object('role', 'assistant', 'content', 'There are ' || (g % 17) || ' open issues.')),
           ${modelId},
           case when g % 100 in (7, 13) then null else jsonb_build_object('text', 'There are ' || (g % 17) || ' open issues.') end,
           case when g % 100 = 7 then jsonb_build_object('code', 'model-error', 'message', 'the model answered 500') end,
           ${at}, ${at}, ${at}, ${at} + interval '900 milliseconds'
      from ${range}`,
  );
  await step(
    "tool calls",
    sql`insert into tool_calls (run_id, call_id, tool, args_digest, status, decision, created_at,
                                started_at, finished_at)
    select md5('run' || g)::uuid, 'call-1', 'read_file', encode(sha256(('args' || g)::bytea), 'hex'),
           'completed', jsonb_build_object('rule', 'tier', 'reason', 'in the ceiling'),
           ${at}, ${at}, ${at} + interval '20 milliseconds'
      from ${range}`,
  );
  const taskJson = sql`jsonb_build_object(
      'id', md5('task' || g)::uuid::text, 'contextId', md5('ctx' || (g / 4))::uuid::text,
      'status', jsonb_build_object('state', case when g % 100 = 7 then 'TASK_STATE_FAILED'
                                                 when g % 100 = 13 then 'TASK_STATE_CANCELED'
                                                 else 'TASK_STATE_COMPLETED' end,
                                   'timestamp', to_char(${at} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
      'history', jsonb_build_array(
        jsonb_build_object('messageId', md5('m' || g)::uuid::text, 'role', 'ROLE_USER',
                           'parts', jsonb_build_array(jsonb_build_object('text', 'task ' || g || ': summarise the open issues in the tracker'))),
        jsonb_build_object('messageId', md5('a' || g)::uuid::text, 'role', 'ROLE_AGENT',
                           'parts', jsonb_build_array(jsonb_build_object('text', 'There are ' || (g % 17) || ' open issues.')))),
      'artifacts', jsonb_build_array(jsonb_build_object('artifactId', md5('art' || g)::uuid::text,
                           'parts', jsonb_build_array(jsonb_build_object('text', 'There are ' || (g % 17) || ' open issues.')))))`;
  await step(
    "A2A tasks",
    sql`insert into a2a_tasks (id, caller_id, context_id, task, event_seq, created_at, updated_at)
    select md5('task' || g)::uuid::text, ${caller}, md5('ctx' || (g / 4))::uuid::text, ${taskJson}, 1,
           ${at}, ${at} + interval '900 milliseconds'
      from ${range}`,
  );
  await step(
    "task events",
    sql`insert into a2a_task_events (task_id, seq, caller_id, event, created_at)
    select md5('task' || g)::uuid::text, 1, ${caller},
           jsonb_build_object('statusUpdate', jsonb_build_object('taskId', md5('task' || g)::uuid::text,
             'contextId', md5('ctx' || (g / 4))::uuid::text,
             'status', jsonb_build_object('state', 'TASK_STATE_COMPLETED'))),
           ${at} + interval '900 milliseconds'
      from ${range}`,
  );
  // One push config per 100 tasks (block b = (g - 1) / 100, made with its first row).
  await step(
    "push configs",
    sql`insert into push_configs (id, task_id, caller_id, config_id, config, wire_version, created_at)
    select md5('pc' || ((g - 1) / 100))::uuid, md5('task' || g)::uuid::text, ${caller}, 'hook',
           jsonb_build_object('url', 'https://hooks.example.com/a2a/' || g), '1.0', ${at}
      from ${range} where g % 100 = 1`,
  );
  await step(
    "push deliveries",
    sql`insert into push_deliveries (push_config_id, task_id, caller_id, task, state, attempts,
                                     next_attempt_at, created_at, finished_at)
    select md5('pc' || ((g - 1) / 100))::uuid, md5('task' || g)::uuid::text, ${caller},
           jsonb_build_object('id', md5('task' || g)::uuid::text,
                              'status', jsonb_build_object('state', 'TASK_STATE_COMPLETED')),
           'delivered', 1, ${at}, ${at}, ${at} + interval '50 milliseconds'
      from ${range}`,
  );
  await step(
    "webhook claims",
    sql`insert into webhook_deliveries (caller_id, delivery_id, body_sha256, received_at, run_id)
    select ${bigCaller}::uuid, md5('delivery' || g)::uuid::text, encode(sha256(('body' || g)::bytea), 'hex'),
           ${at}, md5('run' || g)::uuid
      from ${range}`,
  );
  await step(
    "JWT ids",
    sql`insert into jwt_replays (issuer, jti, expires_at)
    select 'https://peer-' || (1 + g % ${jwtPeers}::int) || '.example', md5('jti' || g)::uuid::text,
           ${at} + interval '5 minutes'
      from ${range}`,
  );
  // Each seeded event its own transaction, as a server writes them (a run's few events per
  // transaction), not the whole top-up's: the filtered pages walk a kind's events by xact_id and
  // sort each transaction's by seq, so one transaction of a million events would be sorted whole.
  // The ids are made up (xact_id is not hashed): the events already there (earlier top-ups and
  // what the server wrote since) move far down, order kept, and the new ones take ids in g's
  // order between them and every real id, so the chain order stays the xact order and what the
  // server appends later chains after the seeded head.
  await step(
    "audit events: earlier transactions moved down",
    sql`update audit_events set xact_id = xact_id - ${seededXactGap}::bigint`,
  );
  await step(
    "audit events",
    sql`insert into audit_events (actor, kind, subject, data, created_at, xact_id)
    select case when g % 3 = 1 then 'caller:' || ${caller} else 'instance:bench' end,
           case when g % 3 = 0 then 'run.started' when g % 3 = 1 then 'tool.called'
                when g % 100 = 7 then 'run.failed' else 'run.completed' end,
           'run:' || md5('run' || g)::uuid,
           case when g % 3 = 1
                then jsonb_build_object('tool', 'read_file', 'callId', 'call-1',
                                        'argsSha256', encode(sha256(('args' || g)::bytea), 'hex'))
                else jsonb_build_object('callerId', ${caller}, 'origin', 'a2a') end,
           ${at}, g::bigint - ${seededXactGap / 10}::bigint
      from ${range}`,
  );
}

/**
 * Chains the events not chained yet, in the chainer's order (xact_id, id), with the project's own
 * hash: the chain `audit verify` walks, of the full size. Batches of 20 000 links, one INSERT each.
 */
async function chainSeededEvents(db: Db): Promise<number> {
  const [head] = await selectRows<{ seq: unknown; hash: string; xact_id: unknown; id: unknown }>(
    db,
    sql`select c.seq, c.hash, e.xact_id, e.id from audit_chain c join audit_events e on e.id = c.event_id
         order by c.seq desc limit 1`,
  );
  let seq = head ? Number(head.seq) : 0;
  let prevHash = head?.hash ?? genesisHash;
  let after = head ? { xactId: Number(head.xact_id), id: Number(head.id) } : undefined;
  let chained = 0;
  for (;;) {
    const rows = await selectRows<{
      id: unknown;
      xact_id: unknown;
      created_at: unknown;
      actor: string;
      kind: string;
      subject: string | null;
      data: unknown;
    }>(
      db,
      sql`select id, xact_id, created_at, actor, kind, subject, data from audit_events
           where ${after ? sql`(xact_id, id) > (${after.xactId}::bigint, ${after.id}::bigint)` : sql`true`}
           order by xact_id, id limit 20000`,
    );
    if (rows.length === 0) return chained;
    const seqs: number[] = [];
    const ids: number[] = [];
    const prevs: string[] = [];
    const hashes: string[] = [];
    for (const row of rows) {
      seq += 1;
      const createdAt = row.created_at;
      const hash = computeAuditHash(prevHash, {
        seq,
        createdAt: createdAt instanceof Date ? createdAt : new Date(createdAt as string),
        actor: row.actor,
        kind: row.kind,
        subject: row.subject,
        data: typeof row.data === "string" ? JSON.parse(row.data) : row.data,
      });
      seqs.push(seq);
      ids.push(Number(row.id));
      prevs.push(prevHash);
      hashes.push(hash);
      prevHash = hash;
    }
    await db.execute(
      sql`insert into audit_chain (seq, event_id, prev_hash, hash)
          select * from unnest(string_to_array(${seqs.join(",")}, ',')::bigint[],
                               string_to_array(${ids.join(",")}, ',')::bigint[],
                               string_to_array(${prevs.join(",")}, ','),
                               string_to_array(${hashes.join(",")}, ','))`,
    );
    const last = rows.at(-1);
    after = { xactId: Number(last?.xact_id), id: Number(last?.id) };
    chained += rows.length;
  }
}

// ---------------------------------------------------------------- the server

/** User + system CPU seconds a process has used so far (Linux /proc; NaN elsewhere). */
function cpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14 and 15 of stat (utime, stime), 11 and 12 after the command name.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function serverEnv(databaseUrl: string, modelUrl: string): Promise<Record<string, string>> {
  const policies = path.join(scratch, "policies");
  await cp(path.join(repoRoot, "policies"), policies, { recursive: true });
  const models = path.join(policies, "models.yaml");
  await writeFile(
    models,
    (await readFile(models, "utf8")).replace(
      /^models:\n/m,
      `models:\n  "${modelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
    ),
  );
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? scratch,
    TMPDIR: process.env.TMPDIR ?? os.tmpdir(),
    DATABASE_URL: databaseUrl,
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: path.join(scratch, "data"),
    PEERGATE_POLICIES_DIR: policies,
    PEERGATE_WORKSPACE: path.join(scratch, "workspace"),
    PEERGATE_ADMIN_TOKEN: adminToken,
    PEERGATE_MODEL: modelId,
    PEERGATE_MODEL_BASE_URL: modelUrl,
    PEERGATE_MODEL_API_KEY: "bench",
    PEERGATE_SANDBOX: "none",
    PEERGATE_LOG_LEVEL: "info",
  };
}

type Started = { server: ServeChild; wallS: number; cpuS: number };

async function startServe(env: Record<string, string>): Promise<Started> {
  const t0 = performance.now();
  const server = await spawnServeChild(env, { readyMs: 300_000 });
  return { server, wallS: (performance.now() - t0) / 1000, cpuS: cpuSeconds(server.child.pid) };
}

async function stopServe(server: ServeChild): Promise<void> {
  server.signalGroup("SIGTERM");
  await server.exited;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(concurrency, 4) });

/** One HTTP request on a keep-alive connection: status and body. */
function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: options.method ?? "GET",
        agent,
        headers: {
          ...options.headers,
          ...(options.body
            ? {
                "content-type": "application/json",
                "content-length": String(Buffer.byteLength(options.body)),
              }
            : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }),
        );
      },
    );
    req.once("error", reject);
    req.end(options.body);
  });
}

const rpc = (method: string, params: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", id: randomUUID(), method, params });

async function a2a(url: string, authorization: string, body: string): Promise<string> {
  const res = await request(`${url}/a2a`, {
    method: "POST",
    headers: { authorization, "a2a-version": "1.0" },
    body,
  });
  if (res.status !== 200 || res.text.includes('"error"')) {
    throw new Error(`A2A: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  }
  return res.text;
}

async function admin(url: string, route: string): Promise<string> {
  const res = await request(`${url}/admin/v1${route}`, {
    headers: { authorization: `Bearer ${adminToken}` },
  });
  if (res.status !== 200) throw new Error(`GET ${route}: HTTP ${res.status} ${res.text}`);
  return res.text;
}

const median = (list: number[]): number => {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const percentile = (list: number[], p: number): number => {
  const sorted = [...list].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
};

/** The median wall time (ms) of `repeats` calls, after one unmeasured. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  await work();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    await work();
    times.push(performance.now() - t0);
  }
  return median(times);
}

async function sendMessages(url: string, total: number) {
  const latencies: number[] = [];
  let next = 0;
  const one = async () => {
    for (let i = next++; i < total; i = next++) {
      const body = rpc("SendMessage", {
        message: {
          messageId: randomUUID(),
          role: "ROLE_USER",
          parts: [{ text: `growth task ${i}: say pong` }],
        },
      });
      const t0 = performance.now();
      const text = await a2a(url, `Bearer ${bigToken}`, body);
      latencies.push(performance.now() - t0);
      if (!text.includes("TASK_STATE_COMPLETED")) {
        throw new Error(`SendMessage: ${text.slice(0, 300)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, one));
  return latencies;
}

// ---------------------------------------------------------------- one size

type Figure = {
  name: string;
  value: number;
  unit: string;
  /** flat: a lookup that must not grow; linear: verify's rate and memory; info: no target. */
  kind: "flat" | "linear" | "info";
  /** Smaller is better (times), or larger (rates). */
  better: "lower" | "higher";
  seqScans?: string[];
};

/** The plan's sequential scans of tables that grow. */
async function seqScans(db: Db, query: ReturnType<typeof sql>): Promise<string[]> {
  const rows = await selectRows<{ "QUERY PLAN": string }>(db, sql`explain ${query}`);
  return rows
    .map((r) => r["QUERY PLAN"])
    .filter((line) =>
      /Seq Scan on (runs|tool_calls|a2a_tasks|a2a_task_counts|a2a_task_events|audit_events|audit_chain|webhook_deliveries|jwt_replays|push_deliveries)\b/.test(
        line,
      ),
    )
    .map((line) => line.trim().replace(/\s+\(cost.*$/, ""));
}

async function measure(
  db: Db,
  env: Record<string, string>,
  size: number,
): Promise<{ figures: Figure[]; disk: Record<string, number> }> {
  const figures: Figure[] = [];
  // With --starts 2: start once, stop, and time the restart.
  for (let i = 1; i < starts; i++) {
    progress("starting the server (an unmeasured start)");
    const first = await startServe(env);
    await stopServe(first.server);
    progress(`unmeasured start ${first.wallS.toFixed(1)} s`);
  }
  progress("starting the server");
  const { server, wallS, cpuS } = await startServe(env);
  try {
    figures.push(
      {
        name: "start-up: spawn → listening (wall)",
        value: wallS,
        unit: "s",
        kind: "flat",
        better: "lower",
      },
      {
        name: "start-up: server CPU until listening",
        value: cpuS,
        unit: "s",
        kind: "flat",
        better: "lower",
      },
    );
    const url = server.url;
    progress("SendMessage");
    await sendMessages(url, Math.min(20, tasksPerSize));
    const cpu0 = cpuSeconds(server.child.pid);
    const latencies = await sendMessages(url, tasksPerSize);
    const cpuPerTask = ((cpuSeconds(server.child.pid) - cpu0) / tasksPerSize) * 1000;
    figures.push(
      {
        name: `SendMessage p50 (${concurrency} connections)`,
        value: percentile(latencies, 50),
        unit: "ms",
        kind: "flat",
        better: "lower",
      },
      {
        name: `SendMessage p99 (${concurrency} connections)`,
        value: percentile(latencies, 99),
        unit: "ms",
        kind: "flat",
        better: "lower",
      },
      {
        name: "SendMessage server CPU per task",
        value: cpuPerTask,
        unit: "ms",
        kind: "flat",
        better: "lower",
      },
    );

    progress("ListTasks, JWT, admin lists");
    const big = `Bearer ${bigToken}`;
    const bigTasks = size / 10;
    const listPage = sql`select task, id, updated_at from a2a_tasks where caller_id = ${bigCaller}::uuid
      order by updated_at desc, id desc limit 51`;
    const listTotal = sql`select tasks from a2a_task_counts where caller_id = ${bigCaller}::uuid`;
    // The total, now read from the kept count, is what counting the caller's tasks says (the
    // seeded ones and those SendMessage added).
    const firstPage = JSON.parse(await a2a(url, big, rpc("ListTasks", { pageSize: 50 }))) as {
      result?: { totalSize?: number };
    };
    const [counted] = await selectRows<{ n: unknown }>(
      db,
      sql`select count(*) as n from a2a_tasks where caller_id = ${bigCaller}::uuid`,
    );
    if (firstPage.result?.totalSize !== Number(counted?.n)) {
      throw new Error(`ListTasks said totalSize ${firstPage.result?.totalSize}, not ${counted?.n}`);
    }
    figures.push({
      name: "ListTasks, first page of 50 (caller with a tenth of the tasks)",
      value: await timed(() => a2a(url, big, rpc("ListTasks", { pageSize: 50 }))),
      unit: "ms",
      kind: "flat",
      better: "lower",
      seqScans: [...(await seqScans(db, listPage)), ...(await seqScans(db, listTotal))],
    });
    const [middle] = await selectRows<{ id: string; updated_at: unknown }>(
      db,
      sql`select id, updated_at from a2a_tasks where caller_id = ${bigCaller}::uuid
           order by updated_at desc, id desc offset ${Math.floor(bigTasks / 2)} limit 1`,
    );
    const updatedAt =
      middle?.updated_at instanceof Date ? middle.updated_at : new Date(String(middle?.updated_at));
    const pageToken = Buffer.from(JSON.stringify([updatedAt.toISOString(), middle?.id])).toString(
      "base64url",
    );
    const deepPage = sql`select task, id, updated_at from a2a_tasks where caller_id = ${bigCaller}::uuid
      and (updated_at, id) < (${updatedAt.toISOString()}::timestamptz, ${middle?.id ?? ""})
      order by updated_at desc, id desc limit 51`;
    figures.push({
      name: "ListTasks, a page half-way through its tasks (cursor)",
      value: await timed(() => a2a(url, big, rpc("ListTasks", { pageSize: 50, pageToken }))),
      unit: "ms",
      kind: "flat",
      better: "lower",
      seqScans: await seqScans(db, deepPage),
    });
    const issuer = `https://peer-${jwtPeer}.example`;
    const taskId = (
      await selectRows<{ id: string }>(
        db,
        sql`select md5('task' || ${jwtPeerTask}::int)::uuid::text as id`,
      )
    )[0]?.id;
    const jwtLookup = sql`select * from callers where jwt is not null and jwt->>'issuer' = ${issuer}`;
    figures.push({
      name: `JWT request: GetTask by one of ${jwtPeers} JWT peers (fresh jti)`,
      value: await timed(async () => {
        const token = await new SignJWT({ jti: randomUUID() })
          .setProtectedHeader({ alg: "ES256" })
          .setIssuer(issuer)
          .setAudience("peergate")
          .setIssuedAt()
          .setExpirationTime("5m")
          .sign(keys.privateKey);
        return a2a(url, `Bearer ${token}`, rpc("GetTask", { id: taskId }));
      }),
      unit: "ms",
      kind: "flat",
      better: "lower",
      seqScans: await seqScans(db, jwtLookup),
    });
    const [midRun] = await selectRows<{ created_at: unknown }>(
      db,
      sql`select created_at from runs order by created_at desc offset ${Math.floor(size / 2)} limit 1`,
    );
    const before = (
      midRun?.created_at instanceof Date ? midRun.created_at : new Date(String(midRun?.created_at))
    ).toISOString();
    const subject = `run:${(await selectRows<{ id: string }>(db, sql`select md5('run' || ${Math.floor(size / 2)}::int)::uuid::text as id`))[0]?.id}`;
    const adminRoutes: { name: string; route: string; plan?: ReturnType<typeof sql> }[] = [
      { name: `admin: callers (all ${jwtPeers + 1})`, route: "/callers" },
      {
        name: "admin: runs, 50 newest",
        route: "/runs?limit=50",
        plan: sql`select * from runs order by created_at desc limit 50`,
      },
      {
        name: "admin: runs of the big caller, 50 newest",
        route: "/runs?caller=big&limit=50",
        plan: sql`select * from runs where caller_id = ${bigCaller}::uuid order by created_at desc limit 50`,
      },
      {
        name: "admin: failed runs (1 %), 50 newest",
        route: "/runs?status=failed&limit=50",
        plan: sql`select * from runs where status = 'failed' order by created_at desc limit 50`,
      },
      {
        name: "admin: runs, a page half-way back (before=)",
        route: `/runs?limit=50&before=${encodeURIComponent(before)}`,
        plan: sql`select * from runs where created_at < ${before}::timestamptz order by created_at desc limit 50`,
      },
      {
        name: "admin: audit, first page of 100",
        route: "/audit?limit=100",
        plan: sql`select * from audit_chain c join audit_events e on e.id = c.event_id where c.seq > 0 order by c.seq limit 100`,
      },
      {
        name: "admin: audit, a page half-way (after=)",
        route: `/audit?limit=100&after=${Math.floor(size / 2)}`,
        plan: sql`select * from audit_chain c join audit_events e on e.id = c.event_id where c.seq > ${Math.floor(size / 2)}::bigint order by c.seq limit 100`,
      },
      {
        name: "admin: audit by kind (run.failed, 0.3 %)",
        route: "/audit?limit=100&kind=run.failed",
        plan: chainedPageStatement({ after: 0, limit: 100, kind: "run.failed" }),
      },
      {
        name: "admin: audit by subject (one run)",
        route: `/audit?limit=100&subject=${encodeURIComponent(subject)}`,
        plan: chainedPageStatement({ after: 0, limit: 100, subject }),
      },
    ];
    for (const entry of adminRoutes) {
      figures.push({
        name: entry.name,
        value: await timed(() => admin(url, entry.route)),
        unit: "ms",
        kind: "flat",
        better: "lower",
        seqScans: entry.plan ? await seqScans(db, entry.plan) : [],
      });
    }
  } finally {
    await stopServe(server);
  }

  // The walk's rate in process (the CLI's wall is mostly its start at the small size), then the
  // CLI itself for its memory and progress lines.
  progress("audit verify (the walk, then the CLI)");
  const t0 = performance.now();
  const walked = await verifyAuditChain(db, { flush: false });
  const walkS = (performance.now() - t0) / 1000;
  if (!walked.ok) throw new Error(`the chain does not verify: ${walked.problem}`);
  const verify = await auditVerify(env);
  figures.push(
    {
      name: "audit verify: events per second (the walk)",
      value: walked.count / walkS,
      unit: "/s",
      kind: "linear",
      better: "higher",
    },
    {
      name: "audit verify: the CLI's wall time",
      value: verify.wallS,
      unit: "s",
      kind: "info",
      better: "lower",
    },
    {
      name: "audit verify: peak RSS of the CLI",
      value: verify.maxRssMiB,
      unit: "MiB",
      kind: "linear",
      better: "lower",
    },
    {
      name: "audit verify: progress lines printed",
      value: verify.progressLines,
      unit: "",
      kind: "info",
      better: "higher",
    },
  );

  const disk: Record<string, number> = {};
  for (const table of [
    "a2a_tasks",
    "a2a_task_events",
    "runs",
    "tool_calls",
    "push_deliveries",
    "audit_events",
    "audit_chain",
    "webhook_deliveries",
    "jwt_replays",
  ]) {
    const [row] = await selectRows<{ bytes: unknown }>(
      db,
      sql`select pg_total_relation_size(${table}::regclass) as bytes`,
    );
    disk[table] = (Number(row?.bytes) / (await count(db, table))) * 10_000;
  }
  return { figures, disk };
}

/** `peergate audit verify --json` as a process: wall time, peak RSS, its progress lines. */
async function auditVerify(env: Record<string, string>) {
  const hook = path.join(scratch, "report-rss.mjs");
  const rssFile = path.join(scratch, "rss");
  await writeFile(
    hook,
    `import { writeFileSync } from "node:fs";
process.on("exit", () => writeFileSync(process.env.BENCH_RSS_FILE, String(process.resourceUsage().maxRSS)));
`,
  );
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    ["--import", hook, mainScript, "audit", "verify", "--json"],
    {
      env: { ...env, BENCH_RSS_FILE: rssFile },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  const wallS = (performance.now() - t0) / 1000;
  if (code !== 0) throw new Error(`audit verify exited with ${code}: ${stdout} ${stderr}`);
  const result = JSON.parse(stdout) as { ok: boolean; count: number };
  const progressLines = stderr.split("\n").filter((line) => line.startsWith("verified ")).length;
  const maxRssMiB = Number(await readFile(rssFile, "utf8")) / 1024;
  return { count: result.count, wallS, maxRssMiB, progressLines };
}

// ---------------------------------------------------------------- main

// The database lives on disk (a tablespace under the temporary directory), not in the cluster's
// /dev/shm: a million rows per table is several GiB, which a shared machine's memory should not hold.
const cluster = await startPostgresCluster();
const tablespace = await mkdtemp(path.join(os.tmpdir(), "peergate-bench-growth-pg-"));
const stub = createOpenAiStub({ record: false });
stub.respondWith(() => ({ text: answerText, usage: { prompt: 40, completion: 1 } }));
const modelUrl = await stub.listen();
const results: {
  size: number;
  figures: Figure[];
  disk: Record<string, number>;
  seedS: number;
  chainS: number;
}[] = [];
try {
  const installation = findPostgres();
  const runAs = "unavailable" in installation ? undefined : installation.runAs;
  if (runAs) {
    const id = (flag: string) =>
      Number(spawnSync("id", [flag, runAs], { encoding: "utf8" }).stdout.trim());
    await chown(tablespace, id("-u"), id("-g"));
  }
  const bootstrap = await openDatabase({ kind: "postgres", url: cluster.adminUrl });
  await bootstrap.db.execute(sql.raw(`create tablespace growth location '${tablespace}'`));
  await bootstrap.db.execute(sql.raw("create database peergate_growth tablespace growth"));
  await bootstrap.close();
  const databaseUrl = cluster.adminUrl.replace(/\/postgres$/, "/peergate_growth");
  const database = await openDatabase({
    kind: "postgres",
    url: databaseUrl,
    statementTimeoutMs: 3_600_000,
  });
  const db = database.db;
  await migrateDatabase(database);
  await seedCallers(db);
  const env = await serverEnv(databaseUrl, modelUrl);
  let seeded = 0;
  for (const size of sizes) {
    progress(`seeding to ${size.toLocaleString("en")} rows per table`);
    const t0 = performance.now();
    // What the server wrote at the last size is chained first: the seeded events follow it.
    await flushAuditChain(db, { timeoutMs: 600_000 });
    await topUp(db, seeded + 1, size);
    seeded = size;
    const t1 = performance.now();
    const chained = await chainSeededEvents(db);
    const t2 = performance.now();
    // Every event is in the chain: one left behind (an xact_id below the head's) would make the
    // trail's pages and `audit verify` measure a different trail.
    const [left] = await selectRows<{ n: unknown }>(
      db,
      sql`select count(*) as n from audit_events e
           where not exists (select 1 from audit_chain c where c.event_id = e.id)`,
    );
    if (Number(left?.n) !== 0) throw new Error(`${left?.n} seeded audit events were not chained`);
    await db.execute(sql`vacuum analyze`);
    const seedS = (t1 - t0) / 1000;
    const chainS = (t2 - t1) / 1000;
    progress(
      `seeded in ${seedS.toFixed(1)} s, ${chained} events chained in ${chainS.toFixed(1)} s`,
    );
    results.push({ size, seedS, chainS, ...(await measure(db, env, size)) });
  }
  await database.close();
} finally {
  agent.destroy();
  await stub.close();
  cluster.remove();
  await rm(scratch, { recursive: true, force: true });
  await rm(tablespace, { recursive: true, force: true });
}

// ---------------------------------------------------------------- the table

const firstSize = results[0];
const lastSize = results.at(-1);
if (!firstSize || !lastSize) throw new Error("no sizes");
const fmt = (n: number) =>
  !Number.isFinite(n)
    ? "-"
    : n >= 100
      ? Math.round(n).toLocaleString("en")
      : n >= 10
        ? n.toFixed(1)
        : n.toFixed(2);
const rows = firstSize.figures.map((figure, i) => {
  const values = results.map((r) => r.figures[i]?.value ?? Number.NaN);
  const end = values.at(-1) as number;
  // The ratio says how much worse the largest size is: time over time, or rate under rate.
  const ratio =
    figure.kind === "info"
      ? Number.NaN
      : figure.better === "lower"
        ? end / figure.value
        : figure.value / end;
  const bound = figure.kind === "linear" ? linearBound : flatBound;
  const target =
    figure.kind === "info"
      ? "—"
      : figure.kind === "linear"
        ? figure.better === "higher"
          ? `linear: ratio ≤ ${linearBound}`
          : `flat memory: ratio ≤ ${linearBound}`
        : `flat: ratio ≤ ${flatBound}`;
  const verdict =
    figure.kind === "info"
      ? figure.name.startsWith("audit verify: progress") && end > 0
        ? "printed"
        : "—"
      : results.length < 2
        ? "one size: no ratio"
        : ratio <= bound
          ? "met"
          : "**not met**";
  // Plans at the largest size: on a few hundred rows a sequential scan is the right plan.
  const scans = [...new Set(lastSize.figures[i]?.seqScans ?? [])];
  return { name: figure.name, unit: figure.unit, values, ratio, target, verdict, scans };
});
const header = results.map((r) => `${r.size.toLocaleString("en")} rows`);
console.log(
  `### Growth: ${header.join(" and ")} per table, ${tasksPerSize} SendMessage tasks on ${concurrency} connections, medians of ${repeats} (${os.cpus().length} CPUs, load average at the end ${os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(" ")})`,
);
console.log("");
console.log(
  `| measure | unit | ${header.join(" | ")} | ratio | target | verdict | seq scans (EXPLAIN) |`,
);
console.log(`|---|---|${header.map(() => "---:").join("|")}|---:|---|---|---|`);
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.unit} | ${r.values.map(fmt).join(" | ")} | ${results.length < 2 || Number.isNaN(r.ratio) ? "-" : r.ratio.toFixed(2)} | ${r.target} | ${r.verdict} | ${r.scans.length ? r.scans.join("; ") : "none"} |`,
  );
}
console.log("");
console.log(`| table | disk per 10 000 rows at ${lastSize.size.toLocaleString("en")} rows |`);
console.log("|---|---:|");
for (const [table, bytes] of Object.entries(lastSize.disk)) {
  console.log(`| ${table} | ${(bytes / 1_048_576).toFixed(2)} MiB |`);
}
console.log("");
console.log(
  `Seeding (SQL) and chaining (JS, the project's hash): ${results.map((r) => `to ${r.size.toLocaleString("en")} rows per table in ${r.seedS.toFixed(1)} s + ${r.chainS.toFixed(1)} s`).join("; ")}.`,
);
console.log(
  `<!-- growth-result ${JSON.stringify({ sizes, rows: rows.map(({ scans, ...r }) => ({ ...r, seqScans: scans })), disk: lastSize.disk })} -->`,
);
