// A caller revoked on one instance while its run is parked, A2A task waiting on another: the
// revocation closes the run through the one function that closes parked runs (the call closed,
// a run.rejected audit event), and the instance holding the A2A task learns it from the caller
// event, which names the runs it closed, and marks the task REJECTED.
import { Task, TaskState } from "@a2a-js/sdk";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aTasks } from "../../src/db/schema.ts";
import { postgresSkipReason } from "../support/databases.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startScriptedModel,
  startTwoInstances,
  userMessage,
  waitFor,
  waitForRun,
} from "./support.ts";

const scenarios = {
  park: [
    {
      text: "I will write the file.",
      calls: [
        {
          id: "call_park",
          name: "write_file",
          arguments: JSON.stringify({ path: "never.txt", content: "no\n" }),
        },
      ],
    },
  ],
};

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `revoking a caller with a parked run${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let model: ScriptedModel;
    let a: Peergate;
    let b: Peergate;
    let stopInstances: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      model = await startScriptedModel(scenarios);
      ({
        a,
        b,
        stop: stopInstances,
      } = await startTwoInstances({
        policiesDir: await copyPolicies(),
        modelBaseUrl: model.baseUrl,
      }));
    });
    afterAll(async () => {
      await stopInstances?.();
      await model?.close();
      await removeTempDirs();
    });

    it("rejects the run, closes its call, audits it, and A's task says REJECTED", async () => {
      const peer = await addCaller(a, {
        name: "parked-revokee",
        kind: "peer",
        tier: "public",
        allow: ["write_file"],
        approvalPolicy: "read-only",
      });
      const client = await a.client(peer.secret);
      const parked = asTask(
        await client.sendMessage({
          message: userMessage("scenario:park Write never.txt, please."),
        } as never),
      );
      expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const runId = readTaskRunId(parked);

      const revoked = await b.admin("POST", "/callers/parked-revokee/revoke", { reason: "e2e" });
      expect(revoked.status).toBe(200);
      expect(revoked.body).toMatchObject({ parkedRunsRejected: 1 });

      const run = await waitForRun(a, runId, ["rejected"]);
      expect(run.error).toMatchObject({ code: "caller-revoked" });
      expect(run.pending ?? null).toBeNull();
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_park", "not-started"]]);

      const audit = await a.admin("GET", `/audit?subject=run:${runId}&limit=100`);
      const kinds = (audit.body.events as { kind: string }[]).map((e) => e.kind);
      expect(kinds.filter((k) => k === "run.rejected")).toHaveLength(1);

      // The caller cannot read its task any more; the task itself is settled on A.
      const state = await waitFor(
        async () => {
          const [row] = await a.server.database.db
            .select({ task: a2aTasks.task })
            .from(a2aTasks)
            .where(eq(a2aTasks.id, parked.id));
          const task = row ? Task.fromJSON(row.task) : undefined;
          return task?.status?.state === TaskState.TASK_STATE_REJECTED
            ? task.status.state
            : undefined;
        },
        10_000,
        "the A2A task to be rejected",
      );
      expect(state).toBe(TaskState.TASK_STATE_REJECTED);
    });
  },
);
