// Audit appends across instances: `npm exec -- node bench/audit.ts [--seconds S] [--workers W]
// [--instances N] [--code DIR]` (defaults 10 s, 16 workers per instance, 2 instances; `--code`
// measures another checkout's src/, e.g. an export of an older commit, against the same load).
//
// A throwaway PostgreSQL cluster (fsync off, as bench/a2a.ts starts it), migrated by the
// measured code. N instance processes, each with its own connection pool (10 connections) and,
// when the code has one, its own audit chainer (src/db/audit-chainer.ts), run W closed-loop
// workers for S seconds; each worker appends one event per transaction of its own
// (BEGIN, appendAuditEvent, COMMIT), the way a request records what it did. Reported:
// - appends/s: committed appends over the measured seconds, all instances together;
// - chaining lag: from an append's COMMIT returning to its event being seen chained by a monitor
//   that polls `seq > last` every 10 ms (so it includes up to 10 ms of polling). Code that chains
//   under a lock at append time (the old path) has no lag: its events are chained at COMMIT.
// - CPU per append, of the instance processes and of all PostgreSQL processes (from /proc),
//   including the chaining of the events (sampled once all are chained);
// - that the chain verifies at the end, and how many events it holds;
// - first, as a reference measured in the same run: the same loop and transactions with a plain
//   INSERT into an unindexed table instead of an append — what this machine allows at all.
// Prints a markdown table and `<!-- audit-result {json} -->` for bench/run-all.ts.
import { type ChildProcess, fork } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { percentile } from "./load.ts";

const self = new URL(import.meta.url).pathname;
const repoRoot = path.resolve(import.meta.dirname, "..");

const { values } = parseArgs({
  options: {
    role: { type: "string", default: "parent" },
    code: { type: "string", default: repoRoot },
    url: { type: "string" },
    seconds: { type: "string", default: "10" },
    workers: { type: "string", default: "16" },
    instances: { type: "string", default: "2" },
    name: { type: "string", default: "instance" },
  },
});
const code = path.resolve(values.code);
const seconds = Number(values.seconds);
const workers = Number(values.workers);

type ParentMessage = { type: "go"; bare: boolean } | { type: "stop" };
type ChildMessage =
  | { type: "ready"; chainer: boolean }
  | { type: "done"; appends: number; failed: number; ids: number[]; committedAt: number[] }
  | { type: "stopped" };

const now = () => performance.timeOrigin + performance.now();

async function instance(): Promise<void> {
  const { openDatabase } = await import(path.join(code, "src/db/client.ts"));
  const { appendAuditEvent } = await import(path.join(code, "src/db/audit.ts"));
  const { sql } = await import("drizzle-orm");
  const chainerFile = path.join(code, "src/db/audit-chainer.ts");
  const database = await openDatabase({ kind: "postgres", url: values.url as string });
  let chainer: { stop(): Promise<void> } | undefined;
  if (existsSync(chainerFile)) {
    const { startAuditChainer } = await import(chainerFile);
    const { silentLogger } = await import(path.join(code, "src/log.ts"));
    chainer = startAuditChainer({ database, logger: silentLogger });
  }
  const send = (message: ChildMessage) => process.send?.(message);
  process.on("message", async (message: ParentMessage) => {
    if (message.type === "go") {
      const ids: number[] = [];
      const committedAt: number[] = [];
      let failed = 0;
      const end = now() + seconds * 1000;
      const worker = async (w: number) => {
        for (let i = 0; now() < end; i++) {
          try {
            const event = {
              actor: `caller:${values.name}-${w}`,
              kind: "tool.called",
              subject: `run:${values.name}-${w}-${i}`,
              data: { name: "read_file", argsSha256: "ab".repeat(32), i },
            };
            // The reference: the same transaction with a plain INSERT into an unindexed table.
            const appended = message.bare
              ? await database.db.transaction(
                  async (tx: { execute(q: unknown): Promise<unknown> }) => {
                    await tx.execute(
                      sql`insert into bench_bare (data) values (${JSON.stringify(event)}::jsonb)`,
                    );
                    return { id: -1 };
                  },
                )
              : await database.db.transaction((tx: unknown) => appendAuditEvent(tx, event));
            committedAt.push(now());
            ids.push(appended.id ?? -1);
          } catch {
            failed += 1;
          }
        }
      };
      await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
      send({ type: "done", appends: ids.length, failed, ids, committedAt });
    } else {
      await chainer?.stop();
      await database.close();
      send({ type: "stopped" });
      process.exit(0);
    }
  });
  send({ type: "ready", chainer: chainer !== undefined });
}

/** CPU time (user + system, microseconds) the processes have used so far, from /proc. */
async function cpuMicros(pids: number[]): Promise<number> {
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  for (const pid of pids) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += ((Number(fields[11]) + Number(fields[12])) / ticks) * 1e6;
    } catch {
      // Exited meanwhile.
    }
  }
  return total;
}

function once<T extends ChildMessage["type"]>(
  child: ChildProcess,
  type: T,
): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: ChildMessage) => {
      if (message.type !== type) return;
      child.off("message", onMessage);
      resolve(message as Extract<ChildMessage, { type: T }>);
    };
    child.on("message", onMessage);
    child.once("exit", (exitCode) => reject(new Error(`instance exited with ${exitCode}`)));
  });
}

async function parent(): Promise<void> {
  const instances = Number(values.instances);
  const { startPostgresCluster } = await import("../test/support/postgres-cluster.ts");
  const cluster = await startPostgresCluster();
  const children: ChildProcess[] = [];
  try {
    const admin = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe("create database peergate_bench");
    await admin.end();
    const url = cluster.adminUrl.replace(/\/postgres$/, "/peergate_bench");
    const { openDatabase } = await import(path.join(code, "src/db/client.ts"));
    const { migrateDatabase } = await import(path.join(code, "src/db/migrate.ts"));
    const { verifyAuditChain } = await import(path.join(code, "src/db/audit.ts"));
    const database = await openDatabase({ kind: "postgres", url });
    await migrateDatabase(database);
    const setup = postgres(url, { max: 1, onnotice: () => {} });
    await setup`create table bench_bare (id bigserial, data jsonb not null)`;
    await setup.end();

    for (let i = 0; i < instances; i++) {
      const args = ["--role", "instance", "--url", url, "--code", code, "--name", `i${i}`];
      const child = fork(
        self,
        [...args, "--seconds", String(seconds), "--workers", String(workers)],
        {
          execArgv: process.execArgv,
          stdio: ["ignore", "inherit", "inherit", "ipc"],
          env: { ...process.env },
        },
      );
      children.push(child);
    }
    const ready = await Promise.all(children.map((c) => once(c, "ready")));
    const chained = ready.every((r) => r.chainer);

    // The monitor: when each event is first seen chained (seq > the last seen).
    const monitor = postgres(url, { max: 1, onnotice: () => {} });
    // Where the measured code keeps the links: their own table, or (before it) the event row.
    const [split] = await monitor<{ name: string | null }[]>`
      select to_regclass('audit_chain')::text as name`;
    const links = monitor(split?.name ? "audit_chain" : "audit_events");
    const linkedId = monitor(split?.name ? "event_id" : "id");
    const seenAt = new Map<number, number>();
    let lastSeq = 0;
    let watching = chained;
    const watch = (async () => {
      while (watching) {
        const rows = await monitor<{ id: string; seq: string }[]>`
          select ${linkedId} as id, seq from ${links} where seq > ${lastSeq}
           order by seq limit 100000`;
        const t = now();
        for (const r of rows) seenAt.set(Number(r.id), t);
        if (rows.length > 0) lastSeq = Number(rows.at(-1)?.seq);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();

    console.error(
      `audit bench: ${instances} instances × ${workers} workers for ${seconds} s (${path.relative(process.cwd(), code) || "."})`,
    );
    // CPU of the instances and of every PostgreSQL process (backends and background ones).
    const cpu = async () => {
      const rows = await monitor<{ pid: number }[]>`select pid from pg_stat_activity`;
      const [instancesCpu, pgCpu] = await Promise.all([
        cpuMicros(children.flatMap((c) => (c.pid === undefined ? [] : [c.pid]))),
        cpuMicros(rows.map((r) => r.pid)),
      ]);
      return { instances: instancesCpu, pg: pgCpu };
    };
    const perEvent = (
      before: { instances: number; pg: number },
      after: { instances: number; pg: number },
      n: number,
    ) => ({
      instances: (after.instances - before.instances) / Math.max(n, 1),
      pg: (after.pg - before.pg) / Math.max(n, 1),
    });

    // First the reference: the same loop, the same transactions, a plain INSERT.
    const bareCpu0 = await cpu();
    const bareStarted = now();
    for (const c of children) c.send({ type: "go", bare: true } satisfies ParentMessage);
    const bare = await Promise.all(children.map((c) => once(c, "done")));
    const bareRate = bare.reduce((n, d) => n + d.appends, 0) / ((now() - bareStarted) / 1000);
    const bareCpu = perEvent(
      bareCpu0,
      await cpu(),
      bare.reduce((n, d) => n + d.appends, 0),
    );

    const appendCpu0 = await cpu();
    const started = now();
    for (const c of children) c.send({ type: "go", bare: false } satisfies ParentMessage);
    const done = await Promise.all(children.map((c) => once(c, "done")));
    const elapsed = (now() - started) / 1000;
    const appends = done.reduce((n, d) => n + d.appends, 0);
    const failed = done.reduce((n, d) => n + d.failed, 0);

    // Wait until the monitor has seen every committed event chained.
    const lags: number[] = [];
    if (chained) {
      const expected = done.flatMap((d) => d.ids);
      const deadline = now() + 60_000;
      while (expected.some((id) => !seenAt.has(id)) && now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      watching = false;
      await watch;
      for (const d of done) {
        d.ids.forEach((id, k) => {
          const seen = seenAt.get(id);
          lags.push(seen === undefined ? Number.POSITIVE_INFINITY : seen - (d.committedAt[k] ?? 0));
        });
      }
      lags.sort((a, b) => a - b);
    } else {
      // Chained at COMMIT: nothing to drain.
      watching = false;
      await watch;
    }
    // Every event is chained by now: the appends' CPU includes their chaining.
    const appendCpu = perEvent(appendCpu0, await cpu(), appends);
    await monitor.end();
    for (const c of children) c.send({ type: "stop" } satisfies ParentMessage);
    await Promise.all(children.map((c) => once(c, "stopped")));

    const verified = await verifyAuditChain(database.db);
    await database.close();

    const rate = appends / elapsed;
    const lag = (p: number) => (chained ? percentile(lags, p) : 0);
    const us = (n: number) => n.toFixed(0);
    const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(0)} ms` : "never");
    const path_ = chained ? "outbox + chainer" : "lock at append (chained at COMMIT)";
    console.log(
      [
        "| code | instances × workers | appends | failed | appends/s | CPU µs/append: instances | PostgreSQL | chaining lag p50 | p99 | max | chain |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        `| reference: plain INSERT, same transactions | ${instances} × ${workers} | ${bare.reduce((n, d) => n + d.appends, 0)} | ${bare.reduce((n, d) => n + d.failed, 0)} | ${Math.round(bareRate)} | ${us(bareCpu.instances)} | ${us(bareCpu.pg)} | — | — | — | — |`,
        `| ${path_} | ${instances} × ${workers} | ${appends} | ${failed} | ${Math.round(rate)} | ${us(appendCpu.instances)} | ${us(appendCpu.pg)} | ${ms(lag(50))} | ${ms(lag(99))} | ${ms(lag(100))} | ${verified.ok ? `verifies, ${verified.count} events` : `BROKEN at ${verified.seq}`} |`,
      ].join("\n"),
    );
    console.log(
      `<!-- audit-result ${JSON.stringify({
        chained,
        instances,
        workers,
        seconds: elapsed,
        appends,
        failed,
        appendsPerSecond: rate,
        bareInsertsPerSecond: bareRate,
        cpuMicrosPerAppend: appendCpu,
        cpuMicrosPerBareInsert: bareCpu,
        lagP50Ms: lag(50),
        lagP99Ms: lag(99),
        lagMaxMs: lag(100),
        verified: verified.ok,
        events: verified.ok ? verified.count : null,
      })} -->`,
    );
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
    cluster.remove();
  }
}

if (values.role === "instance") await instance();
else await parent();
