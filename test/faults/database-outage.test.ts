// The database stopped (a crash: `pg_ctl stop -m immediate`) or frozen (SIGSTOP on the postmaster
// and every backend) under a real peergate instance on a real PostgreSQL, mid-request and
// mid-run. Every surface must fail closed — 503 with the `unavailable` problem, never a 2xx and
// never a run started — and readiness must say so; none may hang past the statement deadline.
// Once the database is back, everything works again and nothing written before the fault is
// lost: the callers are there, the runs are recorded (a run the fault cut short as
// `interrupted`, with its audit event), and the audit chain verifies.
import { rm } from "node:fs/promises";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultStatementTimeoutMs } from "../../src/db/client.ts";
import type { Notifications } from "../../src/db/notifications.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { type PostgresCluster, startPostgresCluster } from "../support/postgres-cluster.ts";
import {
  a2a,
  addCaller,
  call,
  copyPolicies,
  createSharedSecrets,
  type Instance,
  type Reply,
  type ScriptedModel,
  sendMessageBody,
  startInstance,
  startScriptedModel,
  taskRunId,
  verifyAudit,
} from "./support.ts";

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `a PostgreSQL outage under a real instance${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let cluster: PostgresCluster;
    let model: ScriptedModel;
    let policiesDir: string;
    let instance: Instance;
    let sql: postgres.Sql;
    let peerToken: string;
    let webhookToken: string;
    /** Settled by the mid-run tests once the database is down or frozen. */
    let faultInPlace = Promise.withResolvers<void>();
    let notifications: Notifications | undefined;

    beforeAll(async () => {
      cluster = await startPostgresCluster({ crashSafe: true });
      model = await startScriptedModel({
        // A model that answers only once the fault is in place, so it lands while the run works.
        "slow-step": [{ text: "thinking …", until: () => faultInPlace.promise }],
      });
      policiesDir = await copyPolicies();
      instance = await startInstance({
        databaseUrl: cluster.adminUrl,
        policiesDir,
        modelBaseUrl: model.baseUrl,
        ...createSharedSecrets(),
        // Kept to read whether the instance still trusts its caller cache (it does while healthy).
        serverOptions: {
          wrapNotifications: (hub) => {
            notifications = hub;
            return hub;
          },
        },
      });
      sql = postgres(cluster.adminUrl, { max: 2, onnotice: () => {} });
      peerToken = (await addCaller(instance, { name: "alice", kind: "peer" })).credential.secret;
      webhookToken = (
        await addCaller(instance, {
          name: "hook",
          kind: "webhook",
          promptTemplate: "Summarise: {{payload}}",
        })
      ).credential.secret;
    }, 60_000);

    afterAll(async () => {
      cluster?.resume();
      await sql?.end({ timeout: 1 });
      await instance?.stop();
      await model?.close();
      cluster?.remove();
      if (policiesDir) await rm(policiesDir, { recursive: true, force: true });
    }, 30_000);

    const countRuns = async () => Number((await sql`select count(*)::int as n from runs`)[0]?.n);
    const callerNames = async () =>
      (await sql`select name from callers order by name`).map((r) => r.name as string);

    /** Everything a client can ask while the database is away, at once. */
    const askEverything = (tag: string): Promise<Record<string, Reply>> => {
      const asks: Record<string, Promise<Reply>> = {
        "a2a send, valid token": a2a(instance.url, peerToken, sendMessageBody(`hello ${tag}`)),
        "a2a stream, valid token": a2a(
          instance.url,
          peerToken,
          sendMessageBody(`stream ${tag}`, { method: "SendStreamingMessage" }),
        ),
        "a2a send, unknown token": a2a(
          instance.url,
          `pg_${"x".repeat(43)}`,
          sendMessageBody(`guess ${tag}`),
        ),
        "webhook fire, valid token": call(`${instance.url}/webhooks/hook`, {
          body: { event: tag },
          headers: { authorization: `Bearer ${webhookToken}` },
        }),
        "admin list callers": instance.admin("GET", "/callers"),
        "admin add caller": instance.admin("POST", "/callers", {
          name: `during-${tag}`,
          kind: "peer",
        }),
        "admin revoke caller": instance.admin("POST", "/callers/hook/revoke", {}),
        "admin audit verify": instance.admin("GET", "/audit/verify"),
      };
      return Promise.all(
        Object.entries(asks).map(async ([name, reply]) => [name, await reply] as const),
      ).then(Object.fromEntries);
    };

    /**
     * Every request was answered (none hangs: a hung one would fail the test on its timeout) with
     * 503. How long the client takes to give up on a hung database: bench/deadlines.ts.
     */
    const expectFailedClosed = (replies: Record<string, Reply>) => {
      const seen = Object.fromEntries(
        Object.entries(replies).map(([name, r]) => [
          name,
          { status: r.status, code: r.body?.code },
        ]),
      );
      const expected = Object.fromEntries(
        Object.keys(replies).map((name) => [name, { status: 503, code: "unavailable" }]),
      );
      expect(seen).toEqual(expected);
      for (const r of Object.values(replies)) expect(r.headers.get("retry-after")).toBe("1");
    };

    const expectWorkingAgain = async () => {
      await eventually("readiness after the database came back", async () =>
        (await call(`${instance.url}/readyz`)).status === 200 ? true : undefined,
      );
      const reply = await eventually("a send to succeed again", async () => {
        const r = await a2a(instance.url, peerToken, sendMessageBody("are you back?"));
        return r.status === 200 ? r : undefined;
      });
      expect(reply.body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
      const audit = await verifyAudit(instance);
      expect(audit.ok).toBe(true);
      return audit;
    };

    it("crashed: every surface answers 503 at once, no run starts, and all of it works again after", async () => {
      // Warm the caller directory, so a valid token is in its cache when the database dies.
      expect((await a2a(instance.url, peerToken, sendMessageBody("warm up"))).status).toBe(200);
      const runsBefore = await countRuns();
      const callersBefore = await callerNames();
      const auditBefore = await verifyAudit(instance);
      const modelCalls = model.stub.requests.length;

      cluster.crash();
      // Right after the crash (the token still cached) and again once the cache has given up.
      expectFailedClosed(await askEverything("crash-early"));
      const ready = await call(`${instance.url}/readyz`);
      expect(ready.status).toBe(503);
      await eventually(
        "the instance's caller cache to stop trusting itself",
        () => notifications?.healthy === false,
      );
      expectFailedClosed(await askEverything("crash-late"));
      expect(model.stub.requests.length).toBe(modelCalls);

      cluster.start();
      const audit = await expectWorkingAgain();
      expect(audit.count).toBeGreaterThan(auditBefore.count);
      // Nothing the outage refused happened anyway; nothing from before it is gone.
      expect(await callerNames()).toEqual(callersBefore);
      expect(await countRuns()).toBe(runsBefore + 1);
      const hook = await instance.admin("GET", "/callers/hook");
      expect(hook.body.caller.tier).not.toBe("none");
    }, 60_000);

    it("frozen: every request fails closed at its statement deadline, none hangs, and nothing refused happens later", async () => {
      const runsBefore = await countRuns();
      const callersBefore = await callerNames();
      const modelCalls = model.stub.requests.length;

      cluster.pause();
      let replies: Record<string, Reply>;
      let ready: Reply;
      try {
        [replies, ready] = await Promise.all([
          askEverything("freeze"),
          call(`${instance.url}/readyz`),
        ]);
      } finally {
        cluster.resume();
      }
      expect(ready.status).toBe(503);
      expectFailedClosed(replies);
      expect(model.stub.requests.length).toBe(modelCalls);

      await expectWorkingAgain();
      // The statements that were waiting on the frozen server ran when it woke: once none is
      // left running, none may have committed what its request was told had failed.
      await eventually("the statements held by the freeze to finish", async () => {
        const [busy] = await sql`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and state not in ('idle') and pid <> pg_backend_pid()
            and backend_type = 'client backend'`;
        return busy?.n === 0;
      });
      expect(await callerNames()).toEqual(callersBefore);
      expect(await countRuns()).toBe(runsBefore + 1);
      const hook = await instance.admin("GET", "/callers/hook");
      expect(hook.body.caller.tier).not.toBe("none");
    }, 60_000);

    for (const fault of ["crash", "freeze"] as const) {
      it(`${fault} mid-run and mid-request: the waiting request gets 503, the runs are recorded interrupted with their audit events`, async () => {
        const runsBefore = await countRuns();
        const countBefore = model.countOf("slow-step");
        faultInPlace = Promise.withResolvers<void>();
        // One run answered at once (its client gone), one request waiting for its run's end.
        const detached = await a2a(
          instance.url,
          peerToken,
          sendMessageBody(`scenario:slow-step ${fault} detached`, { returnImmediately: true }),
        );
        expect(detached.status).toBe(200);
        const waiting = a2a(
          instance.url,
          peerToken,
          sendMessageBody(`scenario:slow-step ${fault} waiting`),
        );
        // Both runs work and the model is thinking: now the database goes.
        await eventually("both model calls", () =>
          model.countOf("slow-step") === countBefore + 2 ? true : undefined,
        );
        if (fault === "crash") cluster.crash();
        else cluster.pause();
        faultInPlace.resolve();
        let waited: Reply;
        try {
          // The model answers meanwhile; nothing can be recorded.
          waited = await waiting;
        } finally {
          if (fault === "crash") cluster.start();
          else cluster.resume();
        }
        expect({ status: waited.status, code: waited.body?.code }).toEqual({
          status: 503,
          code: "unavailable",
        });

        const runs = (await sql`select id, status from runs order by created_at desc limit 2`).map(
          (r) => ({ id: r.id as string, status: r.status as string }),
        );
        expect(runs.map((r) => r.id)).toContain(taskRunId(detached.body.result.task));
        const settled = await eventually(
          "both runs to leave `working`",
          async () => {
            const rows =
              await sql`select id, status from runs where id in ${sql(runs.map((r) => r.id))}`;
            return rows.every((r) => r.status !== "working") ? rows : undefined;
          },
          { withinMs: defaultStatementTimeoutMs + 15_000 },
        );
        expect(settled.map((r) => r.status)).toEqual(["interrupted", "interrupted"]);
        for (const { id } of runs) {
          const events = await instance.admin(
            "GET",
            `/audit?kind=run.interrupted&subject=run:${id}`,
          );
          expect(events.body.events).toHaveLength(1);
        }
        expect(model.countOf("slow-step")).toBe(countBefore + 2);
        expect(await countRuns()).toBe(runsBefore + 2);
        await expectWorkingAgain();
      }, 60_000);
    }
  },
);
