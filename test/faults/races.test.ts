// Two instances on one PostgreSQL racing for the same thing, each race repeated 20 times:
//
// - the same webhook delivery sent to both at the same moment (GitHub: same X-GitHub-Delivery;
//   generic webhook: same Idempotency-Key) → exactly one run, the other answer a duplicate naming that run;
// - two approvals of one parked run at once, one through each instance → exactly one wins (202),
//   the other is refused (409), the approved call executes once, one `run.approved` event;
// - a revocation on one instance against a run request for that caller on the other → either the
//   request came first (its run is then stopped by the revocation, never completed) or it is
//   refused; after the revocation has returned, the other instance refuses at once.
import { createHmac, randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import type { StubStep } from "../support/openai-stub.ts";
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

const rounds = 20;
// Room for every round at once: each parked run holds its per-run share of the daily tokens and
// cost (200,000 tokens and $1 by default), so the day must cover all of them parked together.
const roomy = {
  concurrentRuns: 500,
  daily: { runs: 100_000, tokens: rounds * 200_000 * 10, costUsd: rounds * 1 * 10 },
};

const parkScenarios: Record<string, StubStep[]> = {};
for (let i = 0; i < rounds; i++) {
  parkScenarios[`park-${i}`] = [
    {
      text: "Writing it.",
      calls: [
        {
          id: `call_${i}`,
          name: "write_file",
          arguments: JSON.stringify({ path: `approved-${i}.txt`, content: `round ${i}\n` }),
        },
      ],
    },
    { text: `wrote approved-${i}.txt` },
  ];
}

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `two instances racing on one PostgreSQL${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let database: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let sql: postgres.Sql;
    let model: ScriptedModel;
    let policiesDir: string;
    let workspace: string;
    let a: Awaited<ReturnType<typeof startInstance>>;
    let b: Instance;

    beforeAll(async () => {
      database = await createPostgresTestDatabase();
      sql = postgres(database.url, { max: 2, onnotice: () => {} });
      model = await startScriptedModel({
        ...parkScenarios,
        // Never answers: a run that got in is ended by the revocation or not at all.
        slow: [{ text: "never sent", hang: true }],
      });
      policiesDir = await copyPolicies();
      workspace = await mkdtemp(path.join(os.tmpdir(), "peergate-faults-races-"));
      const shared = {
        ...createSharedSecrets(),
        databaseUrl: database.url,
        policiesDir,
        workspace,
        modelBaseUrl: model.baseUrl,
        // The revocation race answers 401 forty times from one address: keep the throttle out of it.
        serverOptions: { authThrottle: { maxFailures: 100_000, windowMs: 60_000 } },
      };
      a = await startInstance(shared);
      b = await startInstance(shared);
    }, 60_000);

    afterAll(async () => {
      await Promise.allSettled([a?.stop(), b?.stop()]);
      await sql?.end({ timeout: 1 });
      await model?.close();
      await database?.drop();
      if (workspace) await rm(workspace, { recursive: true, force: true });
      if (policiesDir) await rm(policiesDir, { recursive: true, force: true });
    }, 30_000);

    it(`the same webhook delivery sent to both at once starts one run (${rounds} GitHub and ${rounds} generic deliveries)`, async () => {
      const github = await addCaller(a, {
        name: "gh",
        kind: "github",
        promptTemplate: "Triage: {{payload}}",
        budgets: roomy,
      });
      const ghSecret = github.credential.secret as string;
      const hookToken = (
        await addCaller(a, {
          name: "hook",
          kind: "webhook",
          promptTemplate: "Do: {{payload}}",
          budgets: roomy,
        })
      ).credential.secret as string;

      const outcomes: string[] = [];
      for (let i = 0; i < rounds; i++) {
        for (const kind of ["github", "generic"] as const) {
          const body = JSON.stringify({
            action: "opened",
            issue: { number: i, title: `race ${i}` },
            kind,
          });
          const deliveryId = randomUUID();
          const headers: Record<string, string> =
            kind === "github"
              ? {
                  "x-github-event": "issues",
                  "x-github-delivery": deliveryId,
                  "x-hub-signature-256": `sha256=${createHmac("sha256", ghSecret).update(body).digest("hex")}`,
                }
              : // A generic webhook's retry is one fire only under its Idempotency-Key.
                { authorization: `Bearer ${hookToken}`, "idempotency-key": deliveryId };
          const target = kind === "github" ? "/webhooks/github/gh" : "/webhooks/hook";
          const replies = await Promise.all(
            [a, b].map((instance) =>
              call(`${instance.url}${target}`, {
                body,
                headers: { "content-type": "application/json", ...headers },
              }),
            ),
          );
          const statuses = replies.map((r) => r.status).sort();
          expect(
            statuses,
            `${kind} round ${i}: ${JSON.stringify(replies.map((r) => r.body))}`,
          ).toEqual([200, 202]);
          const winner = replies.find((r) => r.status === 202) as Reply;
          const loser = replies.find((r) => r.status === 200) as Reply;
          expect(loser.body).toMatchObject({ status: "duplicate", runId: winner.body.runId });
          outcomes.push(replies[0] === winner ? "a" : "b");
        }
      }
      // One delivery row and one run per delivery, nothing more.
      const [counts] = await sql`
      select
        (select count(*)::int from webhook_deliveries) as deliveries,
        (select count(*)::int from runs r join callers c on c.id = r.caller_id where c.name in ('gh', 'hook')) as runs`;
      expect(counts).toEqual({ deliveries: rounds * 2, runs: rounds * 2 });
      // Both instances won some: the race was a race.
      expect(new Set(outcomes).size).toBe(2);
    }, 60_000);

    it(`two approvals of one parked run at once: exactly one wins (${rounds} runs)`, async () => {
      const peer = await addCaller(a, {
        name: "parker",
        kind: "peer",
        tier: "public",
        allow: ["write_file"],
        approvalPolicy: "read-only",
        budgets: roomy,
      });
      const token = peer.credential.secret as string;
      const runIds = await Promise.all(
        Array.from({ length: rounds }, async (_, i) => {
          const sent = await a2a(a.url, token, sendMessageBody(`scenario:park-${i} please`));
          expect(sent.body.result?.task?.status?.state).toBe("TASK_STATE_WORKING");
          return taskRunId(sent.body.result.task) as string;
        }),
      );
      const operatorToken = await createOperatorToken({
        services: a.server.services,
        actor: "system",
      });
      const asOperator = { "x-peergate-operator-token": operatorToken };

      const winners: string[] = [];
      for (const [i, runId] of runIds.entries()) {
        const shown = await b.admin("GET", `/runs/${runId}`);
        expect(shown.body.run.status).toBe("parked");
        const { callId, argsDigest } = shown.body.run.pending;
        const answers = await Promise.all(
          [a, b].map((instance) =>
            instance.admin("POST", `/runs/${runId}/approve`, { callId, argsDigest }, asOperator),
          ),
        );
        expect(answers.map((r) => r.status).sort(), `round ${i}`).toEqual([202, 409]);
        winners.push(answers[0]?.status === 202 ? "a" : "b");
      }

      for (const [i, runId] of runIds.entries()) {
        const run = await eventually(`run ${i} to complete`, async () => {
          const r = await a.admin("GET", `/runs/${runId}`);
          return r.body.run.status === "completed" ? r.body.run : undefined;
        });
        // The approved call ran once: one record, completed, and one file with its content.
        expect(
          run.toolCalls.filter((c: { status: string }) => c.status === "completed"),
        ).toHaveLength(1);
        expect(await readFile(path.join(workspace, `approved-${i}.txt`), "utf8")).toBe(
          `round ${i}\n`,
        );
        const approvals = await a.admin("GET", `/audit?kind=run.approved&subject=run:${runId}`);
        expect(approvals.body.events).toHaveLength(1);
      }
      expect(new Set(winners).size).toBe(2);
    }, 90_000);

    it(`a revocation on one instance against a run request on the other: one winner, never a run after (${rounds} rounds)`, async () => {
      const seen = { requestFirst: 0, refused: 0 };
      for (let i = 0; i < rounds; i++) {
        const name = `rev-${i}`;
        const token = (await addCaller(a, { name, kind: "peer", budgets: roomy })).credential
          .secret as string;
        // B knows the caller (its cache holds the token) before the race.
        const warm = await a2a(b.url, token, {
          jsonrpc: "2.0",
          id: 1,
          method: "ListTasks",
          params: {},
        });
        expect(warm.status).toBe(200);

        // Both at once, each started first in turn: either may win, and both outcomes are held
        // to the rules below.
        const sendRequest = () => a2a(b.url, token, sendMessageBody(`scenario:slow round ${i}`));
        const revoke = () => a.admin("POST", `/callers/${name}/revoke`, { reason: "race" });
        let request: ReturnType<typeof sendRequest>;
        let revoking: ReturnType<typeof revoke>;
        if (i % 2 === 0) {
          request = sendRequest();
          revoking = revoke();
        } else {
          revoking = revoke();
          request = sendRequest();
        }
        const revoked = await revoking;
        expect(revoked.status).toBe(200);
        // Once the revocation has returned, B refuses the caller: no run can start.
        const after = await a2a(b.url, token, sendMessageBody(`after round ${i}`));
        expect(after.status, JSON.stringify(after.body)).toBe(401);
        const raced = await request;

        const runs = await sql`
        select r.status, r.error from runs r join callers c on c.id = r.caller_id where c.name = ${name}`;
        if (raced.status === 401) {
          seen.refused += 1;
          expect(runs).toHaveLength(0);
        } else {
          // The request got in first; the revocation stopped its run (the model never answers).
          seen.requestFirst += 1;
          expect(raced.status).toBe(200);
          expect(runs).toHaveLength(1);
          expect(runs[0]?.status).toBe("revoked");
          expect(runs[0]?.error).toMatchObject({ code: "caller-revoked" });
          expect(raced.body.result?.task?.status?.state).not.toBe("TASK_STATE_COMPLETED");
        }
      }
      console.log("revocation race", seen);
      expect(seen.requestFirst + seen.refused).toBe(rounds);
      const audit = await verifyAudit(a);
      expect(audit.ok).toBe(true);
    }, 90_000);
  },
);
