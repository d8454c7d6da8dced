// Answers racing to resume one input-required task, through the real server on PGlite and on
// PostgreSQL: exactly one resumes the run, every other is refused with -32004 (the task is no
// longer waiting for input), none is answered 200 and dropped, and the task's history holds the
// winning answer alone.
//
// On PostgreSQL the race is held open on purpose: the test locks the run's row, sends the answers,
// waits until every one of them waits for that lock (pg_stat_activity), then lets go, so every
// answer passed every check made before the claim and the claim alone decides. PGlite serves one
// connection, so there the answers are sent at once and interleave as they may: the outcome
// asked for is the same.

import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectRows } from "../../src/db/client.ts";
import { runs } from "../../src/db/schema.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  addCaller,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  waitForRun,
} from "./support.ts";

const answers = 4;

const scenarios = {
  race: [
    {
      calls: [
        {
          id: "call_ask",
          name: "ask_caller",
          arguments: JSON.stringify({ question: "Which colour?" }),
        },
      ],
    },
    { text: "Done." },
  ],
};

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await copyPolicies();
  const agentFile = path.join(policiesDir, "agent.yaml");
  const agent = await readFile(agentFile, "utf8");
  const opted = agent.replace(/^tools: \[(.*)\]$/m, "tools: [$1, ask_caller]");
  expect(opted).not.toBe(agent);
  await writeFile(agentFile, opted);
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `answers racing for one input-required task [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      let secret: string;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, { policiesDir, modelBaseUrl: model.baseUrl });
        secret = (await addCaller(peergate, { name: `racer-${kind}`, kind: "peer" })).secret;
      });
      afterAll(async () => peergate?.stop());

      const rpc = async (params: unknown) => {
        const response = await fetch(`${peergate.url}/a2a`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "A2A-Version": "1.0",
            Authorization: `Bearer ${secret}`,
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params }),
        });
        return { status: response.status, body: (await response.json()) as any };
      };
      const message = (text: string, extra: Record<string, unknown> = {}) => ({
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra },
      });

      it("one answer resumes the run; every other gets -32004, none is dropped", {
        timeout: 120_000,
      }, async () => {
        const asked = await rpc(message("scenario:race Paint it."));
        const task = asked.body.result.task;
        expect(task.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
        const runId = task.metadata.peergate.runId as string;
        const db = peergate.server.database.db;

        let release = () => {};
        const gate = new Promise<void>((resolve) => {
          release = resolve;
        });
        let holding: Promise<void> | undefined;
        if (kind === "postgres") {
          let locked = () => {};
          const lockTaken = new Promise<void>((resolve) => {
            locked = resolve;
          });
          holding = db.transaction(async (tx) => {
            await tx.select({ id: runs.id }).from(runs).where(eq(runs.id, runId)).for("update");
            locked();
            await gate;
          });
          await lockTaken;
        }
        const sent = Array.from({ length: answers }, (_, i) =>
          rpc(message(`Colour ${i}.`, { taskId: task.id, contextId: task.contextId })),
        );
        if (kind === "postgres") {
          // Every answer is past its checks and waits for the run's row.
          await eventually(
            "every answer to wait for the run's row",
            async () => {
              const [row] = await selectRows<{ n: number }>(
                db,
                sql`select count(*)::int as n from pg_stat_activity
                    where datname = current_database() and wait_event_type = 'Lock'`,
              );
              return Number(row?.n) >= answers ? true : undefined;
            },
            { withinMs: 60_000 },
          );
        }
        release();
        await holding;
        const replies = await Promise.all(sent);

        expect(replies.map((r) => r.status)).toEqual(Array(answers).fill(200));
        const accepted = replies.filter((r) => r.body.result !== undefined);
        const refused = replies.filter((r) => r.body.error !== undefined);
        expect(accepted).toHaveLength(1);
        expect(refused).toHaveLength(answers - 1);
        for (const reply of refused) {
          expect(reply.body.error.code).toBe(-32004);
          expect(reply.body.error.message).toMatch(/not waiting for input|terminal state/);
        }
        const winner = accepted[0]?.body.result.task;
        expect(winner.status.state).toBe("TASK_STATE_COMPLETED");

        const run = await waitForRun(peergate, runId, ["completed"]);
        expect(run.segments).toBe(2);
        // The model read one answer: the winner's.
        const resumed = model.requestsOf("race").at(-1);
        const said = JSON.stringify(resumed?.messages ?? []);
        expect(said.match(/Colour \d\./g)).toHaveLength(1);
        // The task's history holds the question's turn and the winning answer, no loser's.
        const got = await fetch(`${peergate.url}/a2a`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "A2A-Version": "1.0",
            Authorization: `Bearer ${secret}`,
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 2,
            method: "GetTask",
            params: { id: task.id },
          }),
        });
        const current = ((await got.json()) as any).result;
        const texts = (current.history as { role: string; parts: { text?: string }[] }[])
          .filter((m) => m.role === "ROLE_USER")
          .map((m) => m.parts.map((p) => p.text ?? "").join(""));
        expect(texts.filter((t) => /^Colour \d\.$/.test(t))).toHaveLength(1);
      });
    },
  );
}
