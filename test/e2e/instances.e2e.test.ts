// Two peergate instances on one real PostgreSQL, as an operator would run them behind a balancer.
// A run parks on instance A waiting for an operator; the operator approves it through instance B's
// admin API (admin token + operator token, naming the call and its digest); the run resumes on B,
// the file is written, and the A2A task the client follows on A completes. And a caller revoked
// on B mid-run: its run on A stops, its open stream on A ends, and both instances refuse it. And
// a caller revoked on B while its run is parked, A2A task waiting on A: the revocation closes the
// run through the one function that closes parked runs (the call closed, a run.revoked audit
// event), and A learns it from the caller event, which names the runs it closed, and marks the
// task REJECTED.
import { access, readFile } from "node:fs/promises";
import path from "node:path";
import { Task, TaskState } from "@a2a-js/sdk";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aTasks } from "../../src/db/schema.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  addCaller,
  asTask,
  collectStream,
  copyPolicies,
  type Peergate,
  readScenario,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startScriptedModel,
  startTwoInstances,
  textOf,
  userMessage,
  waitForRun,
} from "./support.ts";

const approvedText = "Wrote approved.txt once the operator agreed.";

const scenarios = {
  park: [
    {
      text: "I will write the file.",
      calls: [
        {
          id: "call_park",
          name: "write_file",
          arguments: JSON.stringify({
            path: "approved.txt",
            content: "approved by the operator\n",
          }),
        },
      ],
    },
    { text: approvedText },
  ],
  // Parks, and is never approved: its caller is revoked while it waits.
  "park-revoke": [
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
  // One tool call, then a model call that never finishes on its own.
  hang: [{ calls: [{ id: "call_first", name: "get_time", arguments: "{}" }] }, { hang: true }],
};

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `two instances on one PostgreSQL${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let model: ScriptedModel;
    let a: Peergate;
    let b: Peergate;
    let stopInstances: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      model = await startScriptedModel(scenarios);
      // A migrates the empty database first; B then finds it migrated.
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

    /** A caller `name` whose writes wait for an operator, and its task on A, parked on a write. */
    async function parkOnA(name: string, text: string) {
      const peer = await addCaller(a, {
        name,
        kind: "peer",
        tier: "public",
        allow: ["write_file"],
        approvalPolicy: "read-only",
      });
      const client = await a.client(peer.secret);
      const parked = asTask(await client.sendMessage({ message: userMessage(text) } as never));
      return { client, parked };
    }

    it("parks on A, is approved on B with both tokens, resumes on B and completes on A", async () => {
      const { client, parked } = await parkOnA(
        "parker",
        "scenario:park Write approved.txt, please.",
      );

      // Not terminal: the task waits, and says for whom.
      expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      expect(textOf(parked.status?.message?.parts)).toMatch(
        /^Waiting for an operator to approve the call to `write_file`\. Nothing is needed from you/,
      );
      const target = path.join(a.workspace, "approved.txt");
      await expect(access(target)).rejects.toThrow();

      const runId = readTaskRunId(parked);
      const shown = await b.admin("GET", `/runs/${runId}`);
      expect(shown.status).toBe(200);
      expect(shown.body.run).toMatchObject({
        status: "parked",
        callerName: "parker",
        // What approving runs: the hidden half of the write the model called.
        pending: { callId: "call_park", tool: "execute_write_file", calledTool: "write_file" },
      });
      const { callId, argsDigest } = shown.body.run.pending as {
        callId: string;
        argsDigest: string;
      };
      expect(argsDigest).toMatch(/^[0-9a-f]{64}$/);

      // The admin token alone cannot grant anything.
      const noOperator = await b.admin("POST", `/runs/${runId}/approve`, { callId, argsDigest });
      expect(noOperator.status).toBe(401);

      const operatorToken = await createOperatorToken({
        services: b.server.services,
        actor: "system",
      });
      const asOperator = { "x-peergate-operator-token": operatorToken };
      // A stale or wrong digest approves nothing.
      const wrongDigest = await b.admin(
        "POST",
        `/runs/${runId}/approve`,
        { callId, argsDigest: "0".repeat(64) },
        asOperator,
      );
      expect(wrongDigest.status).toBe(409);
      expect((await b.admin("GET", `/runs/${runId}`)).body.run.status).toBe("parked");
      await expect(access(target)).rejects.toThrow();

      const approved = await b.admin(
        "POST",
        `/runs/${runId}/approve`,
        { callId, argsDigest },
        asOperator,
      );
      expect(approved.status).toBe(202);
      expect(approved.body).toEqual({ runId, status: "resumed" });

      const run = await waitForRun(b, runId, ["completed"]);
      expect(run.segments).toBe(2);
      expect(run.text).toBe(approvedText);
      expect(await readFile(target, "utf8")).toBe("approved by the operator\n");
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_park", "completed"]]);
      // The resumed segment's model call came after the approval and saw the write's result.
      const calls = model.requestsOf("park");
      expect(calls).toHaveLength(2);

      // A second approval of the same call finds nothing to approve (first answer won).
      const again = await a.admin(
        "POST",
        `/runs/${runId}/approve`,
        { callId, argsDigest },
        asOperator,
      );
      expect(again.status).toBe(409);

      // The client, still talking to A, sees the task completed with the answer.
      const done = await eventually("the task to complete on A", async () => {
        const task = await client.getTask({ id: parked.id } as never);
        return task.status?.state === TaskState.TASK_STATE_COMPLETED ? task : undefined;
      });
      expect(textOf(done.status?.message?.parts)).toBe(approvedText);
      expect(done.artifacts.map((x) => textOf(x.parts))).toEqual([approvedText]);

      const audit = await a.admin("GET", `/audit?subject=run:${runId}&limit=100`);
      const events = audit.body.events as { kind: string; actor: string }[];
      const kinds = events.map((e) => e.kind);
      // Parked by A's engine, finished by another instance's: B took the run over.
      const parkedBy = events.find((e) => e.kind === "run.parked")?.actor;
      const finishedBy = events.find((e) => e.kind === "run.completed")?.actor;
      expect(parkedBy).toMatch(/^instance:/);
      expect(finishedBy).toMatch(/^instance:/);
      expect(finishedBy).not.toBe(parkedBy);
      expect(events.find((e) => e.kind === "run.approved")?.actor).toBe("operator");
      expect(kinds).toEqual(
        expect.arrayContaining(["run.started", "run.parked", "run.approved", "run.completed"]),
      );
      expect(kinds).toContain("run.answer-refused");
    });

    it("revoked on B mid-run: the run on A stops, its stream ends, both instances refuse the caller", async () => {
      const peer = await addCaller(a, { name: "revokee", kind: "peer", tier: "public" });
      const client = await a.client(peer.secret);
      const before = model.requestsOf("hang").length;

      let runId: string | undefined;
      const streaming = collectStream(
        client.sendMessageStream({ message: userMessage("scenario:hang Think hard.") } as never),
        (event) => {
          if (event.payload?.$case === "task") runId = readTaskRunId(event.payload.value);
        },
      );
      // The second model call is the one that hangs: the run is mid-flight.
      await eventually("the model call that hangs", () =>
        model.requestsOf("hang").length >= before + 2 ? true : undefined,
      );
      expect(runId).toBeDefined();

      const revoked = await b.admin("POST", "/callers/revokee/revoke", { reason: "e2e" });
      expect(revoked.status).toBe(200);

      // A's stream for the caller is closed where it stood: no answer, no terminal state after it.
      const { events } = await streaming;
      const states = events.flatMap((e) =>
        e.payload?.$case === "statusUpdate" ? [e.payload.value.status?.state] : [],
      );
      expect(states.length).toBeGreaterThan(0);
      expect(states.every((s) => s === TaskState.TASK_STATE_WORKING)).toBe(true);
      expect(events.some((e) => e.payload?.$case === "artifactUpdate")).toBe(false);

      const run = await waitForRun(a, runId as string, ["revoked"]);
      expect(run.error).toMatchObject({ code: "caller-revoked" });
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_first", "completed"]]);

      // Both instances refuse the caller now: 401 with WWW-Authenticate, never a JSON-RPC answer.
      for (const instance of [a, b]) {
        const response = await fetch(`${instance.url}/a2a`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${peer.secret}`,
            "content-type": "application/json",
            "a2a-version": "1.0",
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "SendMessage",
            params: {
              message: {
                messageId: crypto.randomUUID(),
                role: "ROLE_USER",
                parts: [{ text: "scenario:hang again" }],
              },
            },
          }),
        });
        expect(response.status).toBe(401);
        expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
      await expect(
        client.sendMessage({ message: userMessage("scenario:hang once more") } as never),
      ).rejects.toThrow();
      // No model call was made for the refused requests.
      expect(model.requestsOf("hang").filter((r) => readScenario(r) === "hang")).toHaveLength(
        before + 2,
      );
    });

    it("revoked on B while parked: the run ends revoked, its call closed and audited, A's task REJECTED", async () => {
      const { parked } = await parkOnA(
        "parked-revokee",
        "scenario:park-revoke Write never.txt, please.",
      );
      expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const runId = readTaskRunId(parked);

      const revoked = await b.admin("POST", "/callers/parked-revokee/revoke", { reason: "e2e" });
      expect(revoked.status).toBe(200);
      expect(revoked.body).toMatchObject({ waitingRunsRevoked: 1 });

      const run = await waitForRun(a, runId, ["revoked"]);
      expect(run.error).toMatchObject({ code: "caller-revoked" });
      expect(run.pending ?? null).toBeNull();
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_park", "not-started"]]);

      const audit = await a.admin("GET", `/audit?subject=run:${runId}&limit=100`);
      const kinds = (audit.body.events as { kind: string }[]).map((e) => e.kind);
      expect(kinds.filter((k) => k === "run.revoked")).toHaveLength(1);

      // The caller cannot read its task any more; the task itself is settled on A.
      const state = await eventually("the A2A task to be rejected", async () => {
        const [row] = await a.server.database.db
          .select({ task: a2aTasks.task })
          .from(a2aTasks)
          .where(eq(a2aTasks.id, parked.id));
        const task = row ? Task.fromJSON(row.task) : undefined;
        return task?.status?.state === TaskState.TASK_STATE_REJECTED
          ? task.status.state
          : undefined;
      });
      expect(state).toBe(TaskState.TASK_STATE_REJECTED);
    });
  },
);
