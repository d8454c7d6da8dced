// Push notification delivery benchmark: `npm exec -- node bench/push.ts [--rate R] [--seconds S]
// [--backlog B]` (defaults 200 tasks/s for 10 s, and a backlog of 4000 deliveries).
//
// The push path alone, on a real PostgreSQL (a throwaway cluster started here): the A2A task store
// writes task updates (each one commits its outbox rows in the same transaction), a push worker
// claims them from the database (FOR UPDATE SKIP LOCKED, woken by NOTIFY at commit), checks the
// caller's grant and the egress guard, POSTs each to a receiver on loopback and records the
// outcome with its audit event. Every task has one push config and two stored updates (submitted,
// then completed): two deliveries.
//
//   paced    R new tasks per second (open loop), for S seconds: deliveries per second, and the
//            time from the start of the task update's write to the receiver reading the request
//            (p50, p99). Target (issue 16): p99 < 100 ms at 200 tasks/s.
//   backlog  B deliveries queued first, then one worker drains them: deliveries per second.
//
// The load generator, the worker and the receiver share this process and the machine's CPUs
// with PostgreSQL, so the latency is an upper bound of what a server whose worker has a process
// of its own would show.
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { CallerUser, createCallContext } from "../src/a2a/call-context.ts";
import { createPushStore } from "../src/a2a/push-store.ts";
import { createPushEgress } from "../src/a2a/push-targets.ts";
import { startPushWorker } from "../src/a2a/push-worker.ts";
import { createTaskStore } from "../src/a2a/task-store.ts";
import { parseSecretKey } from "../src/auth/sealed-secrets.ts";
import { openDatabase } from "../src/db/client.ts";
import { migrateDatabase } from "../src/db/migrate.ts";
import { openNotifications } from "../src/db/notifications.ts";
import { callerPushHosts, callers } from "../src/db/schema.ts";
import { silentLogger } from "../src/log.ts";
import { startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { percentile } from "./load.ts";

const { values } = parseArgs({
  options: {
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "10" },
    backlog: { type: "string", default: "4000" },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const backlog = Number(values.backlog);

const cluster = await startPostgresCluster();
const database = await openDatabase({ kind: "postgres", url: cluster.adminUrl });
let worker: ReturnType<typeof startPushWorker> | undefined;
let notifications: Awaited<ReturnType<typeof openNotifications>> | undefined;
const latencies: number[] = [];
let received = 0;
let expected = 0;
let onAll: (() => void) | undefined;
const receiver = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      task: { metadata?: { sentAt?: number } };
    };
    const sentAt = body.task.metadata?.sentAt;
    if (typeof sentAt === "number")
      latencies.push(performance.timeOrigin + performance.now() - sentAt);
    received += 1;
    response.writeHead(204).end();
    if (received >= expected) onAll?.();
  });
});

try {
  await migrateDatabase(database);
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  const { port } = receiver.address() as AddressInfo;
  const hookUrl = `http://127.0.0.1:${port}/hook`;
  const [caller] = await database.db
    .insert(callers)
    .values({ name: "bench", kind: "peer", tier: "public" })
    .returning();
  if (!caller) throw new Error("no caller");
  await database.db
    .insert(callerPushHosts)
    .values({ callerId: caller.id, entry: `http://127.0.0.1:${port}/` });
  const secretKey = parseSecretKey("a".repeat(64));
  if (!secretKey) throw new Error("no secret key");
  const context = createCallContext(new CallerUser(caller.id, caller), "1.0");
  const tasks = createTaskStore(database.db, { progressFlushMs: 50 });
  const configs = createPushStore(database.db, secretKey);
  const egress = createPushEgress({ allowAddresses: ["127.0.0.1"] });

  /** A task with a push config; returns a function that stores its `index`-th update. */
  async function prepareTask() {
    const id = randomUUID();
    await configs.save(id, context, {
      tenant: "",
      id: "",
      taskId: id,
      url: hookUrl,
      token: "bench-token",
      authentication: undefined,
    });
    return (state: "TASK_STATE_SUBMITTED" | "TASK_STATE_COMPLETED") =>
      tasks.save(
        {
          id,
          contextId: id,
          status: { state: state as never, message: undefined, timestamp: undefined },
          artifacts: [],
          history: [],
          metadata: { sentAt: performance.timeOrigin + performance.now() },
        },
        context,
      );
  }

  async function waitForAll(count: number): Promise<void> {
    expected = count;
    if (received >= expected) return;
    await new Promise<void>((resolve) => {
      onAll = resolve;
    });
  }

  notifications = await openNotifications({ database, logger: silentLogger });
  const startWorker = () =>
    startPushWorker({ database, secretKey, egress, logger: silentLogger, notifications });

  // paced
  const total = Math.round(rate * seconds);
  const prepared = [];
  for (let i = 0; i < total; i += 1) prepared.push(await prepareTask());
  worker = startWorker();
  received = 0;
  latencies.length = 0;
  const started = performance.now();
  const writes: Promise<void>[] = [];
  for (let i = 0; i < total; i += 1) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const store = prepared[i] as Awaited<ReturnType<typeof prepareTask>>;
    writes.push(
      store("TASK_STATE_SUBMITTED")
        .then(() => new Promise((r) => setTimeout(r, 20)))
        .then(() => store("TASK_STATE_COMPLETED")),
    );
  }
  await Promise.all(writes);
  const writeSeconds = (performance.now() - started) / 1000;
  await waitForAll(total * 2);
  const pacedSeconds = (performance.now() - started) / 1000;
  const sorted = [...latencies].sort((a, b) => a - b);
  const paced = {
    rate: received / pacedSeconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
  await worker.stop();
  worker = undefined;

  // backlog
  const backlogTasks = Math.ceil(backlog / 2);
  const queued = [];
  for (let i = 0; i < backlogTasks; i += 1) queued.push(await prepareTask());
  for (const store of queued) {
    await store("TASK_STATE_SUBMITTED");
    await store("TASK_STATE_COMPLETED");
  }
  received = 0;
  const drainStart = performance.now();
  worker = startWorker();
  await waitForAll(backlogTasks * 2);
  const drainRate = received / ((performance.now() - drainStart) / 1000);

  console.log(
    "| push delivery | events delivered/s | p50 update → delivery | p99 update → delivery |",
  );
  console.log("|---|---:|---:|---:|");
  console.log(
    `| paced, ${rate} tasks/s × ${seconds} s (${total * 2} events) | ${Math.round(paced.rate)} | ${paced.p50.toFixed(1)} ms | ${paced.p99.toFixed(1)} ms |`,
  );
  console.log(
    `| backlog of ${backlogTasks * 2} events, drained | ${Math.round(drainRate)} | – | – |`,
  );
  console.log(
    `\nThe paced updates took ${writeSeconds.toFixed(1)} s to store (${seconds} s planned).`,
  );
  console.log(
    `\nTarget p99 < 100 ms at 200 tasks/s: ${paced.p99 < 100 && rate >= 200 ? "met" : "not met"} (p99 ${paced.p99.toFixed(1)} ms at ${rate} tasks/s).`,
  );
  await tasks.close();
} finally {
  await worker?.stop();
  await notifications?.close();
  receiver.close();
  await database.close();
  cluster.remove();
}
