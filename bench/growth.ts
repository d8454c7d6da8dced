// Growth: do the hot queries stay flat as the tables grow? `npm exec -- node bench/growth.ts
// [--sizes 10000,1000000] [--repeats 7]`. A throwaway PostgreSQL cluster (as bench/audit.ts
// starts it), migrated; at each size the tables are topped up in SQL (INSERT … SELECT FROM
// generate_series, no round trip per row) to that many rows each — runs, tool calls, A2A tasks,
// webhook claims, JWT ids, audit events (chained by the real chainer) — beside 1 000 JWT peers
// and one caller holding a tenth of the tasks (100 000 at 1 M). Then, medians of `--repeats`:
// - ListTasks for that caller (the task store's page and its total, as src/a2a/task-store.ts
//   sends them), the admin lists (callers, runs, a page of the audit trail), and the JWT peer
//   lookup by issuer (what a JWT request reads);
// - `audit verify` time per 10 000 events (the streaming walk of src/db/audit.ts);
// - disk per 10 000 rows (pg_total_relation_size, indexes and TOAST included) of each table;
// - EXPLAIN of each query: a sequential scan on a grown table is printed.
// Prints a markdown table with, per row, the ratio of the largest size to the smallest and a
// flatness verdict (within `flatBound`), and `<!-- growth-result {json} -->` for bench/run-all.ts.
// SendMessage latency and CPU per task are bench/a2a.ts's; start-up is not measured here.
import path from "node:path";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { flushAuditChain, readAuditPage, verifyAuditChain } from "../src/db/audit.ts";
import { type Db, openDatabase, selectRows } from "../src/db/client.ts";
import { migrateDatabase } from "../src/db/migrate.ts";
import { listRuns } from "../src/services/runs/list-runs.ts";
import { startPostgresCluster } from "../test/support/postgres-cluster.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10000,1000000" },
    repeats: { type: "string", default: "7" },
  },
});
const sizes = values.sizes
  .split(",")
  .map(Number)
  .sort((a, b) => a - b);
const repeats = Number(values.repeats);
/** A query is flat when its time at the largest size is within this factor of the smallest. */
const flatBound = 2;
/** `audit verify` is linear when its time per 10 000 events stays within this factor. */
const linearBound = 1.5;

const bigCaller = "00000000-0000-4000-8000-00000000b16c";
const jwtPeers = 1_000;

async function topUp(db: Db, size: number): Promise<void> {
  const have = async (table: string) =>
    Number(
      (await selectRows<{ n: unknown }>(db, sql.raw(`select count(*) as n from ${table}`)))[0]?.n,
    );
  if ((await have("callers")) === 0) {
    await db.execute(
      sql`insert into callers (id, name, kind, tier) values (${bigCaller}, 'big', 'peer', 'public')`,
    );
    await db.execute(sql`
      insert into callers (name, kind, tier, jwt)
      select 'jwt-' || g, 'peer', 'public',
             jsonb_build_object('issuer', 'https://peer-' || g || '.example', 'audience', 'peergate',
                                'algorithms', jsonb_build_array('ES256'), 'jwksUrl', 'https://peer-' || g || '.example/jwks')
        from generate_series(1, ${jwtPeers}::int) g`);
  }
  const from = (await have("runs")) + 1;
  if (from > size) return;
  // Runs (ended), one tool call each; a tenth of the tasks are the big caller's.
  await db.execute(sql`
    insert into runs (id, caller_id, origin, approval_policy, tool_set, status, a2a_task_id,
                      messages, created_at, finished_at)
    select md5('run' || g)::uuid,
           case when g % 10 = 0 then ${bigCaller}::uuid
                else (select id from callers where name = 'jwt-' || (1 + g % ${jwtPeers}::int)) end,
           'a2a', 'auto', '{read_file}', 'completed', 'task-' || g,
           jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'hello ' || g)),
           now() - (${size}::int - g) * interval '1 second', now() - (${size}::int - g) * interval '1 second'
      from generate_series(${from}::int, ${size}::int) g`);
  await db.execute(sql`
    insert into tool_calls (run_id, call_id, tool, args_digest, status)
    select md5('run' || g)::uuid, 'call-1', 'read_file', md5('args' || g), 'completed'
      from generate_series(${from}::int, ${size}::int) g`);
  await db.execute(sql`
    insert into a2a_tasks (id, caller_id, context_id, task, created_at, updated_at)
    select 'task-' || g, r.caller_id, 'ctx-' || (g / 4),
           jsonb_build_object('id', 'task-' || g, 'contextId', 'ctx-' || (g / 4), 'kind', 'task',
             'status', jsonb_build_object('state', 'TASK_STATE_COMPLETED',
                                          'timestamp', to_char(r.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
             'history', jsonb_build_array(jsonb_build_object('role', 'ROLE_USER', 'messageId', md5('m' || g),
                                          'parts', jsonb_build_array(jsonb_build_object('text', 'hello ' || g))))),
           r.created_at, r.created_at
      from generate_series(${from}::int, ${size}::int) g join runs r on r.id = md5('run' || g)::uuid`);
  await db.execute(sql`
    insert into webhook_deliveries (caller_id, delivery_id, body_sha256, received_at)
    select ${bigCaller}::uuid, 'delivery-' || g, md5('body' || g), now() - (${size}::int - g) * interval '1 second'
      from generate_series(${from}::int, ${size}::int) g`);
  await db.execute(sql`
    insert into jwt_replays (issuer, jti, expires_at)
    select 'https://peer-1.example', 'jti-' || g, now() + interval '5 minutes'
      from generate_series(${from}::int, ${size}::int) g`);
  await db.execute(sql`
    insert into audit_events (actor, kind, subject, data)
    select 'caller:big', 'tool.called', 'run:' || md5('run' || g)::uuid,
           jsonb_build_object('name', 'read_file', 'argsSha256', md5('args' || g), 'i', g)
      from generate_series(${from}::int, ${size}::int) g`);
  await db.execute(sql`analyze`);
  await flushAuditChain(db, { timeoutMs: 3_600_000, batchSize: 5_000 });
}

async function median(work: () => Promise<unknown>): Promise<number> {
  await work();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    await work();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

/** The plan's sequential scans, on tables that grow. */
async function seqScans(db: Db, query: ReturnType<typeof sql>): Promise<string[]> {
  const rows = await selectRows<{ "QUERY PLAN": string }>(db, sql`explain ${query}`);
  return rows
    .map((r) => r["QUERY PLAN"])
    .filter((line) =>
      /Seq Scan on (runs|tool_calls|a2a_tasks|audit_events|audit_chain|webhook_deliveries|jwt_replays)\b/.test(
        line,
      ),
    )
    .map((line) => line.trim());
}

const listTasksPage = sql`select task, id, updated_at from a2a_tasks where caller_id = ${bigCaller}::uuid
  order by updated_at desc, id desc limit 51`;
const listTasksTotal = sql`select count(*) from a2a_tasks where caller_id = ${bigCaller}::uuid`;
const jwtLookup = sql`select * from callers where kind = 'peer' and jwt is not null
  and jwt->>'issuer' = 'https://peer-500.example'`;

type Measure = { name: string; ms: number; kind: "flat" | "linear"; seqScans: string[] };

async function measure(
  db: Db,
  size: number,
): Promise<{ measures: Measure[]; disk: Record<string, number> }> {
  const measures: Measure[] = [];
  const add = async (name: string, work: () => Promise<unknown>, plan?: ReturnType<typeof sql>) => {
    measures.push({
      name,
      ms: await median(work),
      kind: "flat",
      seqScans: plan ? await seqScans(db, plan) : [],
    });
  };
  const tasks = Math.round(size / 10);
  await add(
    `ListTasks page of 50 (caller with ${tasks} tasks)`,
    () => db.execute(listTasksPage),
    listTasksPage,
  );
  await add(
    `ListTasks total (caller with ${tasks} tasks)`,
    () => db.execute(listTasksTotal),
    listTasksTotal,
  );
  await add(`JWT peer by issuer (${jwtPeers} JWT peers)`, () => db.execute(jwtLookup), jwtLookup);
  await add("admin: runs list (50 newest)", () => listRuns({ ctx: { db }, input: { limit: 50 } }));
  await add("admin: runs list of one caller (50 newest)", () =>
    listRuns({ ctx: { db }, input: { limit: 50, callerId: bigCaller } }),
  );
  await add("admin: callers list (all)", () =>
    db.execute(sql`select * from callers order by name`),
  );
  await add("admin: audit page (100 after the first)", () =>
    readAuditPage(db, { after: 1, limit: 100 }),
  );
  await add("admin: audit page (100 near the end)", () =>
    readAuditPage(db, { after: size - 200, limit: 100 }),
  );
  const t0 = performance.now();
  const verified = await verifyAuditChain(db, { flush: false, batchSize: 5_000 });
  const verifyMs = performance.now() - t0;
  if (!verified.ok) throw new Error(`the seeded chain does not verify: ${verified.problem}`);
  measures.push({
    name: "audit verify, per 10 000 events",
    ms: (verifyMs / verified.count) * 10_000,
    kind: "linear",
    seqScans: [],
  });
  const disk: Record<string, number> = {};
  for (const table of [
    "a2a_tasks",
    "runs",
    "tool_calls",
    "audit_events",
    "audit_chain",
    "webhook_deliveries",
    "jwt_replays",
  ]) {
    const [row] = await selectRows<{ bytes: unknown }>(
      db,
      sql`select pg_total_relation_size(${table}::regclass) as bytes`,
    );
    disk[table] = (Number(row?.bytes) / size) * 10_000;
  }
  return { measures, disk };
}

const cluster = await startPostgresCluster();
const results: {
  size: number;
  measures: Measure[];
  disk: Record<string, number>;
  seedMs: number;
}[] = [];
try {
  const database = await openDatabase({
    kind: "postgres",
    url: cluster.adminUrl,
    statementTimeoutMs: 3_600_000,
  });
  await migrateDatabase(database);
  for (const size of sizes) {
    const t0 = performance.now();
    console.error(`seeding to ${size} rows per table…`);
    await topUp(database.db, size);
    const seedMs = performance.now() - t0;
    console.error(`seeded in ${(seedMs / 1000).toFixed(1)} s; measuring`);
    results.push({ size, seedMs, ...(await measure(database.db, size)) });
  }
  await database.close();
} finally {
  cluster.remove();
}

const first = results[0];
const last = results.at(-1);
if (!first || !last) throw new Error("no sizes");
const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const rows = first.measures.map((m, i) => {
  const end = last.measures[i] as Measure;
  const ratio = end.ms / m.ms;
  const bound = m.kind === "linear" ? linearBound : flatBound;
  const verdict = results.length < 2 ? "one size: no ratio" : ratio <= bound ? "flat" : "**grows**";
  const scans = [...new Set(results.flatMap((r) => r.measures[i]?.seqScans ?? []))];
  return {
    name: m.name.replace(/\(caller with \d+ tasks\)/, "(caller with a tenth of the tasks)"),
    times: results.map((r) => r.measures[i]?.ms ?? Number.NaN),
    ratio,
    bound,
    verdict,
    scans,
  };
});
const header = results.map((r) => `${r.size.toLocaleString("en")} rows (ms)`);
console.log(
  `| query | ${header.join(" | ")} | ratio largest/smallest | bound | verdict | seq scans |`,
);
console.log(`|---|${header.map(() => "---:").join("|")}|---:|---:|---|---|`);
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.times.map(fmt).join(" | ")} | ${results.length < 2 ? "-" : r.ratio.toFixed(2)} | ${r.bound} | ${r.verdict} | ${r.scans.length ? r.scans.join("; ") : "none"} |`,
  );
}
console.log("");
console.log(`| table | disk per 10 000 rows at ${last.size.toLocaleString("en")} rows |`);
console.log("|---|---:|");
for (const [table, bytes] of Object.entries(last.disk)) {
  console.log(`| ${table} | ${(bytes / 1_048_576).toFixed(2)} MiB |`);
}
console.log("");
console.log(
  `Seeding: ${results.map((r) => `${r.size.toLocaleString("en")} rows per table in ${(r.seedMs / 1000).toFixed(1)} s`).join("; ")}.`,
);
console.log(`<!-- growth-result ${JSON.stringify({ sizes, rows, disk: last.disk })} -->`);
void path;
