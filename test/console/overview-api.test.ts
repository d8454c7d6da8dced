// GET /admin/v1/overview through the real server, on PGlite and on PostgreSQL: runs and tokens per
// caller in time buckets, refusals and authentication failures in the same buckets, the runs live
// now, the approvals waiting with their age, and today's budget use against each caller's limits.
// Read only and bounded: a window past 30 days or a bucket count past 96 is refused by field.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  userMessage,
  waitFor,
  waitForRun,
} from "../e2e/support.ts";
import { postgresSkipReason } from "../support/databases.ts";

const scenarios = {
  hello: [{ text: "Hello.", usage: { prompt: 100, completion: 20 } }],
  refused: [
    {
      text: "I will write.",
      calls: [{ id: "call_out", name: "write_file", arguments: '{"path":"x.txt","content":"x"}' }],
      usage: { prompt: 10, completion: 5 },
    },
    { text: "I may not.", usage: { prompt: 10, completion: 5 } },
  ],
  park: [
    {
      text: "Writing.",
      calls: [{ id: "call_park", name: "write_file", arguments: '{"path":"p.txt","content":"p"}' }],
    },
    { text: "Wrote." },
  ],
};

let model: ScriptedModel;
let policiesDir: string;
beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await copyPolicies();
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `GET /admin/v1/overview [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      beforeAll(async () => {
        peergate = await startPeergateOn(kind, {
          policiesDir,
          modelBaseUrl: model.baseUrl,
          // Failed authentications are summarised in the trail per short window here.
          server: { authThrottle: { maxFailures: 1000, windowMs: 200 } },
        });
      }, 120_000);
      afterAll(async () => peergate?.stop());

      it("draws runs, tokens, refusals, auth failures, live runs, approvals and budgets", async () => {
        const busy = await addCaller(peergate, {
          name: "busy",
          kind: "peer",
          budgets: { daily: { tokens: 10_000, runs: 50 } },
        });
        const quiet = await addCaller(peergate, { name: "quiet", kind: "peer" });
        // With the operator token at once: a widening tried without it is an auth failure too.
        const operatorToken = await createOperatorToken({
          services: peergate.server.services,
          actor: "system",
        });
        const made = await peergate.admin(
          "POST",
          "/callers",
          {
            name: "writer",
            kind: "peer",
            tier: "internal",
            allow: ["write_file"],
            approvalPolicy: "read-only",
          },
          { "x-peergate-operator-token": operatorToken },
        );
        expect(made.status).toBe(201);
        const writer = { secret: made.body.credential.secret as string };

        const send = async (secret: string, text: string) =>
          asTask(
            await (await peergate.client(secret)).sendMessage({
              message: userMessage(text),
            } as never),
          );
        for (const _ of [1, 2]) {
          const task = await send(busy.secret, "scenario:hello hi");
          await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        }
        const refused = await send(quiet.secret, "scenario:refused write please");
        await waitForRun(peergate, readTaskRunId(refused), ["completed"]);
        const parked = await send(writer.secret, "scenario:park write please");
        await waitForRun(peergate, readTaskRunId(parked), ["parked"]);
        for (const _ of [1, 2, 3]) {
          const reply = await fetch(`${peergate.url}/a2a`, {
            method: "POST",
            headers: { authorization: "Bearer pg_wrong", "content-type": "application/json" },
            body: "{}",
          });
          expect(reply.status).toBe(401);
        }

        const overview = await waitFor(
          async () => {
            const got = await peergate.admin("GET", "/overview?hours=1&buckets=12");
            expect(
              got.status,
              `${JSON.stringify(got.body)} ${peergate.logs.slice(-3).join("\n")}`,
            ).toBe(200);
            const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
            return sum(got.body.refusals.authFailures) >= 3 ? got.body : undefined;
          },
          30_000,
          "the auth failures' summary in the overview",
        );

        expect(overview.buckets).toHaveLength(12);
        expect(overview.bucketSeconds).toBe(300);
        const series = new Map<string, any>(overview.runs.map((s: any) => [s.callerName, s]));
        expect(series.get("busy").total.runs).toBe(2);
        expect(series.get("busy").total.tokens).toBe(240);
        expect(series.get("busy").runs).toHaveLength(12);
        expect(series.get("busy").runs.reduce((a: number, b: number) => a + b, 0)).toBe(2);
        expect(series.get("quiet").total.runs).toBe(1);
        expect(series.get("writer").total.runs).toBe(1);
        const trail = JSON.stringify(
          (await peergate.admin("GET", "/audit?kind=auth.failed")).body.events.map(
            (e: any) => e.data,
          ),
        );
        expect(
          overview.refusals.tools.reduce((a: number, b: number) => a + b, 0),
          "tools",
        ).toBe(1);
        expect(
          overview.refusals.authFailures.reduce((a: number, b: number) => a + b, 0),
          trail,
        ).toBe(3);

        expect(overview.live.find((l: any) => l.status === "parked").count).toBe(1);
        expect(overview.liveByCaller).toEqual([
          { callerName: "writer", submitted: 0, working: 0, parked: 1, inputRequired: 0 },
        ]);
        expect(overview.approvals.count).toBe(1);
        const [waiting] = overview.approvals.oldest;
        expect(waiting).toMatchObject({
          runId: readTaskRunId(parked),
          callerName: "writer",
          tool: "write_file",
        });
        expect(waiting.ageSeconds).toBeGreaterThanOrEqual(0);
        expect(Date.parse(waiting.expiresAt)).toBeGreaterThan(Date.parse(waiting.requestedAt));

        const budget = overview.budgets.callers.find((b: any) => b.callerName === "busy");
        expect(budget).toMatchObject({ tokens: 240, runs: 2, running: 0 });
        expect(budget.limits).toMatchObject({ tokens: 10_000, runs: 50 });
        expect(overview.budgets.day).toBe(new Date(overview.now).toISOString().slice(0, 10));

        // A revoked caller has no budget to use: it leaves the budget table.
        await peergate.admin("POST", "/callers/quiet/revoke", {});
        const after = await peergate.admin("GET", "/overview?hours=1&buckets=12");
        expect(after.body.budgets.callers.map((b: any) => b.callerName)).not.toContain("quiet");
      }, 180_000);

      it("refuses a window or bucket count out of bounds, by field", async () => {
        for (const query of [
          "hours=0",
          "hours=721",
          "buckets=1",
          "buckets=97",
          "hours=x",
          "extra=1",
        ]) {
          const got = await peergate.admin("GET", `/overview?${query}`);
          expect(got.status, query).toBe(400);
          expect(got.body.problems.length, query).toBeGreaterThan(0);
        }
      });
    },
  );
}
