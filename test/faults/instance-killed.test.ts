// `peergate serve` killed with SIGKILL while a run works — a real child process on a real
// PostgreSQL, its run between two model calls (the first answered and charged, a tool called, the
// second hanging in the model). Nothing of the dead process can clean up. The next instance
// started on that database must mark the run `interrupted` (once its heartbeat is stale: 30 s),
// with a `run.interrupted` audit event naming the dead owner, the tool call that completed kept
// as completed, the tokens of the answered step charged to the run and to the caller's day, the
// wall time up to the last heartbeat charged too, and the audit chain intact.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  a2a,
  addCaller,
  copyPolicies,
  createSharedSecrets,
  instanceEnv,
  type ScriptedModel,
  type ServeProcess,
  sendMessageBody,
  spawnServe,
  startScriptedModel,
  taskRunId,
  verifyAudit,
} from "./support.ts";

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `an instance killed with SIGKILL mid-run${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let database: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let sql: postgres.Sql;
    let model: ScriptedModel;
    let policiesDir: string;
    let dataDir: string;
    const processes: ServeProcess[] = [];

    beforeAll(async () => {
      database = await createPostgresTestDatabase();
      sql = postgres(database.url, { max: 2, onnotice: () => {} });
      model = await startScriptedModel({
        killed: [
          {
            text: "Let me look at the clock.",
            calls: [{ id: "call_time", name: "get_time", arguments: "{}" }],
            usage: { prompt: 100, completion: 20 },
          },
          // The second model call never finishes: the run is in flight when the process dies.
          { text: "It is", hang: true },
        ],
      });
      policiesDir = await copyPolicies();
      dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-faults-killed-"));
    });

    afterAll(async () => {
      for (const p of processes) await p.kill();
      await sql?.end({ timeout: 1 });
      await model?.close();
      await database?.drop();
      await rm(dataDir, { recursive: true, force: true });
      await rm(policiesDir, { recursive: true, force: true });
    });

    it("the next instance marks the run interrupted, charges its budget and keeps the chain intact", async () => {
      const secrets = createSharedSecrets();
      const env = instanceEnv({
        databaseUrl: database.url,
        dataDir,
        policiesDir,
        modelBaseUrl: model.baseUrl,
        ...secrets,
      });
      const first = await spawnServe(env, secrets.adminToken);
      processes.push(first);
      const token = (await addCaller(first, { name: "alice", kind: "peer", tier: "public" }))
        .credential.secret as string;

      const sent = await a2a(
        first.url,
        token,
        sendMessageBody("scenario:killed what time is it?", { returnImmediately: true }),
      );
      expect(sent.status).toBe(200);
      const runId = taskRunId(sent.body.result.task) as string;
      await eventually("the second model call", () =>
        model.countOf("killed") === 2 ? true : undefined,
      );
      // Before the kill: the first step's tokens are charged (flushed before its tool ran).
      const [before] =
        await sql`select status, owner_instance_id, budget_used from runs where id = ${runId}`;
      expect(before?.status).toBe("working");
      const deadOwner = before?.owner_instance_id as string;
      expect(deadOwner).toBeTruthy();
      // One heartbeat lands after the run started (every 5 s), so the charged wall time is not
      // zero: recovery charges up to the last heartbeat.
      const beatMs = await eventually(
        "a heartbeat of the run after it started",
        async () => {
          const [row] = await sql`select extract(epoch from heartbeat_at
              - coalesce(segment_started_at, started_at)) * 1000 as ms from runs where id = ${runId}`;
          const ms = Number(row?.ms);
          return ms > 0 ? ms : undefined;
        },
        { withinMs: 60_000 },
      );

      await first.kill();
      expect(await first.exited).toBe("SIGKILL");

      const second = await spawnServe(env, secrets.adminToken);
      processes.push(second);
      // The caller is served meanwhile: the orphan holds one of its two concurrent runs.
      const meanwhile = await a2a(second.url, token, sendMessageBody("still there?"));
      expect(meanwhile.status).toBe(200);
      expect(meanwhile.body.result.task.status.state).toBe("TASK_STATE_COMPLETED");

      const run = await eventually(
        "the orphaned run to be marked interrupted",
        async () => {
          const r = await second.admin("GET", `/runs/${runId}`);
          return r.body?.run?.status === "interrupted" ? r.body.run : undefined;
        },
        { withinMs: 45_000 },
      );
      expect(run.error).toMatchObject({ code: "interrupted" });
      expect(run.budgetUsed).toMatchObject({ tokens: 120, steps: 1 });
      expect(run.budgetUsed.durationMs).toBeGreaterThanOrEqual(Math.floor(beatMs));
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_time", "completed"]]);

      const events = await second.admin("GET", `/audit?kind=run.interrupted&subject=run:${runId}`);
      expect(events.body.events).toHaveLength(1);
      expect(events.body.events[0].data).toMatchObject({
        runId,
        previousOwner: deadOwner,
        used: { tokens: 120 },
      });
      expect(events.body.events[0].actor).not.toBe(`instance:${deadOwner}`);

      // The caller's day carries both runs and the killed run's tokens.
      const [day] = await sql`
      select d.runs, d.tokens from daily_usage d join callers c on c.id = d.caller_id
      where c.name = 'alice'`;
      expect(day).toMatchObject({ runs: 2 });
      expect(Number(day?.tokens)).toBe(120 + 25);
      const audit = await verifyAudit(second);
      expect(audit.ok).toBe(true);
      await second.stop();
      expect(await second.exited).toBe(0);
    }, 90_000);
  },
);
