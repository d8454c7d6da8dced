// How long the database client takes to give up, against the deadline it was given:
// `npm exec -- node bench/deadlines.ts [--runs N]` (default 5 runs of each case, the median
// printed). The tests assert only that each case fails closed with the deadline's error
// (test/db/client.test.ts, test/db/outage.test.ts); how long that took is measured here, where a
// loaded machine makes a figure slower instead of turning a test red.
//
// Cases:
// - a ping to a port that accepts and never answers (deadline 300 ms);
// - a ping to a frozen PostgreSQL (SIGSTOP; deadline 500 ms);
// - a transaction whose statement waits out its deadline (2 000 ms) on a frozen PostgreSQL: one
//   deadline, not two (BEGIN and the statement each waiting one out would take twice as long).
// Each row gives the median against the deadline and a verdict (under 1.75 × the deadline).
// Prints `<!-- deadlines-result {json} -->` for bench/run-all.ts.
import net from "node:net";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { type Database, openDatabase } from "../src/db/client.ts";
import { startPostgresCluster } from "../test/support/postgres-cluster.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const runs = Math.max(1, Number(values.runs));

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/** How long `work` took to reject (it must reject: a case that succeeds is a broken bench). */
async function timeRejection(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  const failed = await work().then(
    () => false,
    () => true,
  );
  if (!failed) throw new Error("the case succeeded; it should have waited out its deadline");
  return performance.now() - started;
}

type Row = { case: string; deadlineMs: number; medianMs: number; runs: number };
const rows: Row[] = [];

async function measure(name: string, deadlineMs: number, once: () => Promise<number>) {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await once());
  rows.push({ case: name, deadlineMs, medianMs: median(times), runs });
}

// A port that accepts and never answers.
const sockets: net.Socket[] = [];
const silent = net.createServer((socket) => sockets.push(socket));
await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
const silentPort = (silent.address() as net.AddressInfo).port;
await measure("ping, a port that never answers", 300, async () => {
  const database = await openDatabase({
    kind: "postgres",
    url: `postgres://postgres@127.0.0.1:${silentPort}/peergate`,
  });
  try {
    return await timeRejection(() => database.ping(300));
  } finally {
    await database.close();
  }
});
for (const socket of sockets) socket.destroy();
silent.close();

const cluster = await startPostgresCluster();
const opened: Database[] = [];
try {
  const pinged = await openDatabase({ kind: "postgres", url: cluster.adminUrl });
  opened.push(pinged);
  await measure("ping, a frozen PostgreSQL", 500, async () => {
    await pinged.ping();
    cluster.pause();
    try {
      return await timeRejection(() => pinged.ping(500));
    } finally {
      cluster.resume();
    }
  });

  const deadlineMs = 2_000;
  const client = await openDatabase({
    kind: "postgres",
    url: cluster.adminUrl,
    statementTimeoutMs: deadlineMs,
  });
  opened.push(client);
  await client.db.execute(sql`create table if not exists deadline_probe (n int)`);
  await measure("a transaction's statement, a frozen PostgreSQL", deadlineMs, async () => {
    // The ping leaves a connection idle in the pool: BEGIN and the statement reach the server.
    await client.ping();
    cluster.pause();
    try {
      return await timeRejection(() =>
        client.db.transaction(async (tx) => {
          await tx.execute(sql`insert into deadline_probe values (1)`);
        }),
      );
    } finally {
      cluster.resume();
    }
  });
} finally {
  await Promise.allSettled(opened.map((d) => d.close()));
  cluster.remove();
}

console.log(`| case | deadline | median (${runs} runs) | × deadline | under 1.75 × |`);
console.log("|---|---:|---:|---:|---|");
for (const row of rows) {
  const ratio = row.medianMs / row.deadlineMs;
  console.log(
    `| ${row.case} | ${row.deadlineMs} ms | ${row.medianMs.toFixed(0)} ms | ${ratio.toFixed(2)} | ${ratio < 1.75 ? "yes" : "no"} |`,
  );
}
console.log(`<!-- deadlines-result ${JSON.stringify(rows)} -->`);
