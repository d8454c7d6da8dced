// An instance dying mid-delivery loses no push notification (issue 16). Instance A is a real
// `peergate serve` process; its worker takes the first delivery of a task to the receiver, which
// holds the request open. Instance B starts on the same PostgreSQL while A still holds it, and
// both serve (and deliver) two more tasks. A is then killed with SIGKILL, holding the delivery's
// lease. B takes the delivery over once the lease ran out and delivers it and the rest of the
// task's updates, in order, and a task sent after the kill. In the end every stored update of
// every task was answered 200 exactly once, in stored order per task, and the outbox holds none
// pending.
//
// Nothing here races the clock. A's lease and attempt time limit are longer than the test, so A
// holds the delivery however slowly B starts on a loaded machine (with a short lease, A's attempt
// ended on its own time limit, 500 ms before the lease, and its retry could deliver before the
// kill). The lease then runs out when the test says so: it moves `lease_until` to now, which is
// what the passing of time does to the row, and B's worker, woken by the next task, takes it.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, selectRows } from "../../src/db/client.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually, eventuallyValue, GiveUpError } from "../support/eventually.ts";
import {
  isTerminalPush,
  type PushReceiver,
  readPushedTask,
  startPushReceiver,
} from "./push-receiver.ts";
import {
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  scriptedModelId,
  startPeergate,
  startScriptedModel,
} from "./support.ts";

const skip = postgresSkipReason();
/** A's lease and attempt limit: longer than the test runs, so only the kill ends A's hold. */
const holdsUntilKilledMs = "600000";

describe.skipIf(skip !== undefined)(
  `push delivery when an instance dies${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let model: ScriptedModel;
    let receiver: PushReceiver;
    let child: ChildProcess | undefined;
    let b: Peergate | undefined;
    let dataDir: string;
    let dropDatabase: (() => Promise<void>) | undefined;
    let shared: Awaited<ReturnType<typeof sharedSettings>>;

    async function sharedSettings() {
      const database = await createPostgresTestDatabase({ migrate: false });
      dropDatabase = database.drop;
      return {
        ...createSharedSecrets(),
        databaseUrl: database.url,
        policiesDir: await copyPolicies(),
        workspace: await createWorkspace(),
        modelBaseUrl: model.baseUrl,
        env: { PEERGATE_PUSH_ALLOW_ADDRESSES: "127.0.0.1" },
      };
    }

    /** `peergate serve` as a process of its own; resolves with its URL once it listens. */
    async function startServeProcess(): Promise<string> {
      dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-e2e-child-"));
      child = spawn(process.execPath, [path.resolve("src/main.ts"), "serve"], {
        env: {
          PATH: process.env.PATH ?? "",
          PEERGATE_HOST: "127.0.0.1",
          PEERGATE_PORT: "0",
          PEERGATE_DATA_DIR: dataDir,
          PEERGATE_POLICIES_DIR: shared.policiesDir,
          PEERGATE_WORKSPACE: shared.workspace,
          PEERGATE_ADMIN_TOKEN: shared.adminToken,
          PEERGATE_SECRET_KEY: shared.secretKey,
          PEERGATE_MODEL: scriptedModelId,
          PEERGATE_MODEL_BASE_URL: shared.modelBaseUrl,
          PEERGATE_MODEL_API_KEY: "e2e-model-key",
          PEERGATE_LOG_LEVEL: "info",
          DATABASE_URL: shared.databaseUrl,
          ...shared.env,
          PEERGATE_PUSH_LEASE_MS: holdsUntilKilledMs,
          PEERGATE_PUSH_TIMEOUT_MS: holdsUntilKilledMs,
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      const spawned = child;
      const collect = (chunk: Buffer) => {
        output += chunk.toString("utf8");
      };
      spawned.stdout?.on("data", collect);
      spawned.stderr?.on("data", collect);
      return eventually(
        "peergate serve to listen",
        () => {
          if (spawned.exitCode !== null) throw new GiveUpError(`peergate serve exited: ${output}`);
          const line = output.split("\n").find((l) => l.includes('"listening"'));
          return line ? /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(line)?.[1] : undefined;
        },
        { withinMs: 60_000 },
      );
    }

    beforeAll(async () => {
      model = await startScriptedModel({ answer: [{ text: "Done on A." }] });
      receiver = await startPushReceiver();
      shared = await sharedSettings();
    });

    afterAll(async () => {
      if (child && child.exitCode === null) child.kill("SIGKILL");
      await b?.stop();
      await Promise.allSettled([model?.close(), receiver?.close()]);
      await dropDatabase?.();
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
      await removeTempDirs();
    });

    it("delivers what the dead instance held, then the rest, in order", async () => {
      const aUrl = await startServeProcess();
      const admin = (method: string, pathname: string, body?: unknown, headers = {}) =>
        fetch(`${aUrl}/admin/v1${pathname}`, {
          method,
          headers: {
            authorization: `Bearer ${shared.adminToken}`,
            "content-type": "application/json",
            ...headers,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      const created = await admin("POST", "/callers", {
        name: "alice",
        kind: "peer",
        tier: "public",
      });
      expect(created.status).toBe(201);
      const secret = ((await created.json()) as { credential: { secret: string } }).credential
        .secret;
      const database = await openDatabase({ kind: "postgres", url: shared.databaseUrl });
      try {
        const operatorToken = await createOperatorToken({
          services: { db: database.db, now: () => new Date() },
          actor: "system",
        });
        const granted = await admin(
          "PUT",
          "/callers/alice/push-hosts",
          { hosts: [receiver.origin] },
          { "x-peergate-operator-token": operatorToken },
        );
        expect(granted.status).toBe(200);

        /** A blocking SendMessage with a push config, to instance `url`; the task's id. */
        const sendTask = async (url: string, label: string) => {
          const reply = (await (
            await fetch(`${url}/a2a`, {
              method: "POST",
              headers: {
                authorization: `Bearer ${secret}`,
                "content-type": "application/json",
                "A2A-Version": "1.0",
              },
              body: JSON.stringify({
                jsonrpc: "2.0",
                id: 1,
                method: "SendMessage",
                params: {
                  message: {
                    messageId: crypto.randomUUID(),
                    role: "ROLE_USER",
                    parts: [{ text: `scenario:answer ${label}` }],
                  },
                  configuration: { taskPushNotificationConfig: { url: receiver.url } },
                },
              }),
            })
          ).json()) as { result: { task: { id: string; status: { state: string } } } };
          expect(reply.result.task.status.state).toBe("TASK_STATE_COMPLETED");
          return reply.result.task.id;
        };
        /**
         * The outbox rows of a task, in stored order: by the bigint column, not the text `id` the
         * select returns (that ordered "10" before "9" when a task's ids crossed a decimal digit).
         */
        const storedDeliveries = (taskId: string) =>
          selectRows<{ id: string; state: string }>(
            database.db,
            sql`select id::text as id, state from push_deliveries p
                where task_id = ${taskId} order by p.id`,
          );
        /** Every stored update of the task was delivered (and recorded so). */
        const waitDelivered = (taskId: string, what: string) =>
          eventuallyValue(
            what,
            () => storedDeliveries(taskId),
            (rows) => rows.length > 0 && rows.every((r) => r.state === "delivered"),
            { withinMs: 60_000 },
          );

        receiver.holdNext();
        const taskId = await sendTask(aUrl, "survive");

        // A's worker is inside the first delivery: the receiver holds it.
        await eventually("a delivery", () => receiver.received.length > 0);
        const held = receiver.received[0];
        expect(held?.answered).toBe(0);
        const heldId = held?.headers["x-a2a-notification-id"];

        // B joins while A holds the lease; both serve and deliver meanwhile.
        b = await startPeergate(shared);
        const viaA = await sendTask(aUrl, "on A while B runs");
        const viaB = await sendTask(b.url, "on B while A runs");
        await waitDelivered(viaA, "the task sent to A to be delivered");
        await waitDelivered(viaB, "the task sent to B to be delivered");
        // A still holds the first delivery, on its first attempt; B left it alone.
        const leases = await selectRows<{ state: string; attempts: number; leased: boolean }>(
          database.db,
          sql`select state, attempts, lease_until > now() as leased from push_deliveries
              where task_id = ${taskId} order by id`,
        );
        expect(leases[0]).toEqual({ state: "pending", attempts: 1, leased: true });
        expect(leases.every((r) => r.state === "pending")).toBe(true);

        const killed = child as ChildProcess;
        const exited = once(killed, "exit");
        killed.kill("SIGKILL");
        await exited;
        receiver.releaseHeld();
        // The dead instance's lease runs out (see the top of the file).
        await selectRows(
          database.db,
          sql`update push_deliveries set lease_until = now()
              where task_id = ${taskId} and lease_until is not null returning id`,
        );
        const afterKill = await sendTask(b.url, "on B after the kill");

        const pushes = await eventually(
          "B to deliver the task's terminal update",
          () => {
            const mine = receiver.received.filter((p) => readPushedTask(p).id === taskId);
            return mine.some((p) => isTerminalPush(p) && p.answered === 200) ? mine : undefined;
          },
          { withinMs: 60_000 },
        );
        const delivered = pushes.filter((p) => p.answered === 200);
        // The held delivery came again, first, with the same id; then the rest, in stored order.
        expect(delivered[0]?.headers["x-a2a-notification-id"]).toBe(heldId);
        const ids = delivered.map((p) => Number(p.headers["x-a2a-notification-id"]));
        expect(new Set(ids).size).toBe(ids.length);
        expect([...ids].sort((x, y) => x - y)).toEqual(ids);
        const last = delivered.at(-1);
        expect(last && readPushedTask(last).state).toBe("TASK_STATE_COMPLETED");

        // Every task: each stored update answered 200 exactly once, in stored order; none left.
        for (const id of [taskId, viaA, viaB, afterKill]) {
          const stored = await waitDelivered(id, `every update of ${id} to be delivered`);
          const answered = receiver.received
            .filter((p) => readPushedTask(p).id === id && p.answered === 200)
            .map((p) => String(p.headers["x-a2a-notification-id"]));
          expect(answered).toEqual(stored.map((r) => r.id));
          expect(
            receiver.received.filter((p) => readPushedTask(p).id === id && p.answered !== 200),
          ).toHaveLength(id === taskId ? 1 : 0);
        }
        const pending = await selectRows<{ count: number }>(
          database.db,
          sql`select count(*)::int as count from push_deliveries where state <> 'delivered'`,
        );
        expect(pending[0]?.count).toBe(0);
      } finally {
        await database.close();
      }
    }, 240_000);
  },
);
