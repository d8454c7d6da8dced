// The real @a2a-js/sdk client against the real routes, in A2A 1.0 and in the client's v0.3
// compat mode: send, stream, get, list, cancel, resubscribe, the extended card, multi-turn.

import { randomUUID } from "node:crypto";
import { type ListTasksRequest, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { revokedTaskMessage } from "../../src/a2a/run-executor.ts";
import type { SettleRunInput } from "../../src/a2a/service.ts";
import { a2aTasks } from "../../src/db/schema.ts";
import type { SettledRun } from "../../src/services/runs/engine.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness, userMessage } from "./support.ts";

function textOf(parts: { content?: { $case: string; value: unknown } }[] | undefined): string {
  return (parts ?? [])
    .map((p) => (p.content?.$case === "text" ? String(p.content.value) : ""))
    .join("");
}

async function collect(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

function stateOf(event: StreamResponse): TaskState | undefined {
  const payload = event.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
}

/** A ListTasks request in the client's protobuf shape (unset enums must be 0, not undefined). */
function listRequest(overrides: Partial<ListTasksRequest> = {}): ListTasksRequest {
  return {
    tenant: "",
    contextId: "",
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageToken: "",
    statusTimestampAfter: undefined,
    ...overrides,
  };
}

function asTask(result: unknown): Task {
  expect(result).toHaveProperty("status");
  return result as Task;
}

describeEachDatabase(
  "A2A interop with the a2a-js client",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "bob", "carol", "dave"]);
    });
    afterAll(async () => {
      await h.close();
    });

    for (const mode of ["1.0", "0.3"] as const) {
      describe(`client speaking ${mode}`, () => {
        let client: Client;
        beforeAll(async () => {
          client = mode === "1.0" ? await h.client("alice") : await h.legacyClient("alice");
          expect(client.protocolVersion).toBe(mode);
        });

        it("sends a message and gets the completed task with the answer as an artifact", async () => {
          const task = asTask(
            await client.sendMessage({ message: userMessage("hello there") } as never),
          );
          expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
          expect(task.artifacts).toHaveLength(1);
          expect(task.artifacts[0]?.name).toBe("answer");
          expect(textOf(task.artifacts[0]?.parts)).toBe("echo: hello there");
          expect(textOf(task.status?.message?.parts)).toBe("echo: hello there");
          const start = h.engine.starts.at(-1);
          expect(start?.caller.name).toBe("alice");
          expect(start?.origin).toBe("a2a");
          expect(start?.a2a).toEqual({ taskId: task.id, contextId: task.contextId });
          expect(start?.messages.at(-1)).toEqual({ role: "user", content: "hello there" });
        });

        it("streams the task, a status per tool call, the answer and the terminal state", async () => {
          const events = await collect(
            client.sendMessageStream({ message: userMessage("stream please") } as never),
          );
          expect(events[0]?.payload?.$case).toBe("task");
          const toolUpdates = events.filter(
            (e) =>
              e.payload?.$case === "statusUpdate" &&
              textOf(e.payload.value.status?.message?.parts).includes("read_file"),
          );
          expect(toolUpdates.map((e) => stateOf(e))).toEqual([
            TaskState.TASK_STATE_WORKING,
            TaskState.TASK_STATE_WORKING,
          ]);
          const text = events
            .filter((e) => e.payload?.$case === "artifactUpdate")
            .map((e) => (e.payload?.$case === "artifactUpdate" ? e.payload.value : undefined));
          expect(text.at(-1)?.lastChunk).toBe(true);
          expect(textOf(text.at(-1)?.artifact?.parts)).toBe("echo: stream please");
          expect(stateOf(events.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_COMPLETED);
        });

        it("gets a task by id, with historyLength applied", async () => {
          const sent = asTask(
            await client.sendMessage({ message: userMessage("remember me") } as never),
          );
          const got = await client.getTask({ id: sent.id, historyLength: 1 } as never);
          expect(got.id).toBe(sent.id);
          expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
          expect(got.history).toHaveLength(1);
          const full = await client.getTask({ id: sent.id } as never);
          expect(textOf(full.history[0]?.parts)).toBe("remember me");
        });

        it("cancels a running task; the engine is asked to stop the run", async () => {
          const stream = client.sendMessageStream({ message: userMessage("slow work") } as never);
          const first = await stream.next();
          const task =
            first.value?.payload?.$case === "task" ? first.value.payload.value : undefined;
          expect(task).toBeDefined();
          const canceled = await client.cancelTask({ id: task?.id ?? "" } as never);
          expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
          const rest: StreamResponse[] = [];
          for await (const event of stream) rest.push(event);
          expect(stateOf(rest.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_CANCELED);
          expect(h.engine.cancels.at(-1)?.reason).toBe("canceled by the caller");
          const stored = await client.getTask({ id: task?.id ?? "" } as never);
          expect(stored.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        });

        it("resubscribes to a running task and sees it finish", async () => {
          const stream = client.sendMessageStream({ message: userMessage("gate open") } as never);
          const first = await stream.next();
          const taskId = first.value?.payload?.$case === "task" ? first.value.payload.value.id : "";
          const again = client.resubscribeTask({ id: taskId } as never);
          const snapshot = await again.next();
          expect(snapshot.value?.payload?.$case).toBe("task");
          h.engine.release(taskId, "all done");
          const rest = await collect(again);
          expect(stateOf(rest.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_COMPLETED);
          const original = await collect(stream);
          expect(stateOf(original.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_COMPLETED);
          const done = await client.getTask({ id: taskId } as never);
          expect(textOf(done.artifacts[0]?.parts)).toBe("all done");
        });

        it("reads the card's two credential schemes and the media types it takes", async () => {
          const card = await client.getAgentCard();
          expect(card.defaultInputModes).toEqual(["text/plain", "application/json"]);
          expect(card.defaultOutputModes).toEqual(["text/plain"]);
          const formats = Object.fromEntries(
            Object.entries(card.securitySchemes).map(([name, scheme]) => [
              name,
              scheme.scheme?.$case === "httpAuthSecurityScheme"
                ? scheme.scheme.value.bearerFormat
                : undefined,
            ]),
          );
          expect(formats).toEqual({ bearer: "opaque", jwt: "JWT" });
          expect(card.securityRequirements.map((r) => Object.keys(r.schemes))).toEqual([
            ["bearer"],
            ["jwt"],
          ]);
          // A data part, listed as application/json, reaches the run.
          const task = asTask(
            await client.sendMessage({
              message: userMessage("", {
                parts: [
                  {
                    content: { $case: "data", value: { city: "Lyon" } },
                    mediaType: "application/json",
                    filename: "",
                    metadata: undefined,
                  },
                ],
              }),
            } as never),
          );
          expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
          expect(h.engine.starts.at(-1)?.messages.at(-1)?.content).toContain('"city": "Lyon"');
        });

        it("gets the extended card with the caller's skills", async () => {
          const card = await client.getAgentCard();
          expect(card.name).toBe("test-peer");
          expect(card.version).toBe("2.3.4");
          expect(card.skills.map((s) => s.id)).toEqual(["echo", "time"]);
        });

        it("continues a conversation: a new message in the same context sees the earlier turn", async () => {
          const first = asTask(
            await client.sendMessage({ message: userMessage("my name is Ada") } as never),
          );
          const second = asTask(
            await client.sendMessage({
              message: userMessage("what is my name?", { contextId: first.contextId }),
            } as never),
          );
          expect(second.contextId).toBe(first.contextId);
          expect(second.id).not.toBe(first.id);
          expect(h.engine.starts.at(-1)?.messages).toEqual([
            { role: "user", content: "my name is Ada" },
            { role: "assistant", content: "echo: my name is Ada" },
            { role: "user", content: "what is my name?" },
          ]);
        });
      });
    }

    it("lists only the caller's own tasks (1.0), filtered by context and paged", async () => {
      const client = await h.client("carol");
      const a = asTask(await client.sendMessage({ message: userMessage("one") } as never));
      await client.sendMessage({
        message: userMessage("two", { contextId: a.contextId }),
      } as never);
      await client.sendMessage({ message: userMessage("three") } as never);
      const bob = await h.client("bob");
      await bob.sendMessage({ message: userMessage("bob's") } as never);

      const all = await client.listTasks(listRequest({ pageSize: 2 }));
      expect(all.totalSize).toBe(3);
      expect(all.tasks).toHaveLength(2);
      expect(all.nextPageToken).not.toBe("");
      const rest = await client.listTasks(
        listRequest({ pageSize: 2, pageToken: all.nextPageToken }),
      );
      expect(rest.tasks).toHaveLength(1);
      const ids = new Set([...all.tasks, ...rest.tasks].map((t) => t.id));
      expect(ids.size).toBe(3);
      expect(all.tasks[0]?.artifacts).toEqual([]);

      const inContext = await client.listTasks(
        listRequest({ contextId: a.contextId, includeArtifacts: true }),
      );
      expect(inContext.tasks).toHaveLength(2);
      expect(inContext.tasks.every((t) => t.contextId === a.contextId)).toBe(true);
      expect(inContext.tasks[0]?.artifacts).toHaveLength(1);

      const completed = await client.listTasks(
        listRequest({ status: TaskState.TASK_STATE_COMPLETED }),
      );
      expect(completed.totalSize).toBe(3);
      const failed = await client.listTasks(listRequest({ status: TaskState.TASK_STATE_FAILED }));
      expect(failed.totalSize).toBe(0);
    });

    it("shows a parked run as WORKING with a message that an operator must approve", async () => {
      const client = await h.client("dave");
      const task = asTask(await client.sendMessage({ message: userMessage("park here") } as never));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const note = textOf(task.status?.message?.parts);
      expect(note).toContain("operator");
      expect(note).toContain("web_fetch");
      const stored = await client.getTask({ id: task.id } as never);
      expect(stored.status?.state).toBe(TaskState.TASK_STATE_WORKING);

      // The operator approves; the run finishes elsewhere and is settled into the task.
      const runId = (stored.metadata?.peergate as { runId?: string } | undefined)?.runId;
      expect(runId).toMatch(/^[0-9a-f-]{36}$/);
      await h.a2a.settleRun({
        callerId: h.callers.get("dave")?.id ?? "",
        a2a: { taskId: task.id },
        outcome: { runId: runId ?? "", status: "completed", text: "fetched and done" },
      });
      const done = await client.getTask({ id: task.id } as never);
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(textOf(done.artifacts[0]?.parts)).toBe("fetched and done");
    });

    it("a run ended with no request attached (its caller revoked): GetTask reads the run's end", async () => {
      const client = await h.client("dave");
      const task = asTask(await client.sendMessage({ message: userMessage("park it") } as never));
      const runId = (task.metadata?.peergate as { runId?: string } | undefined)?.runId ?? "";
      // The executor returned at the park: the revocation's end reaches the task through the
      // engine's settled runs alone, as it would from the instance that revoked the caller.
      const endedAt = new Date("2026-02-01T10:00:00.000Z");
      const revoked: SettledRun = {
        runId,
        callerId: h.callers.get("dave")?.id ?? "",
        origin: "a2a",
        a2a: { taskId: task.id, contextId: task.contextId },
        outcome: {
          runId,
          status: "revoked",
          messages: [],
          error: { code: "caller-revoked", message: "the caller was revoked" },
          endedAt,
        },
      };
      await h.a2a.settleRun(revoked);
      const ended = await client.getTask({ id: task.id } as never);
      expect(ended.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
      expect(ended.status?.timestamp).toBe(endedAt.toISOString());
      expect(textOf(ended.status?.message?.parts)).toBe(revokedTaskMessage);
      expect(ended.history.filter((m) => m.messageId === `${runId}-end`)).toHaveLength(1);
      // A later end of the same task (another instance's late report) changes nothing.
      await h.a2a.settleRun({
        ...revoked,
        outcome: { runId, status: "completed", text: "too late", endedAt },
      });
      expect(await client.getTask({ id: task.id } as never)).toEqual(ended);
    });

    it("cancels a parked task: the engine is asked to drop the run, and a late approval changes nothing", async () => {
      const client = await h.client("dave");
      const task = asTask(await client.sendMessage({ message: userMessage("park me") } as never));
      const runId = (task.metadata?.peergate as { runId?: string } | undefined)?.runId ?? "";
      expect(runId).not.toBe("");
      const canceled = await client.cancelTask({ id: task.id } as never);
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect(h.engine.cancels.map((c) => c.runId)).toContain(runId);
      await h.a2a.settleRun({
        callerId: h.callers.get("dave")?.id ?? "",
        a2a: { taskId: task.id },
        outcome: { runId, status: "completed", text: "too late" },
      });
      const stored = await client.getTask({ id: task.id } as never);
      expect(stored.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect(stored.artifacts).toEqual([]);
    });

    it("takes the engine's settled runs as they are: re-parked, then rejected", async () => {
      expectTypeOf<SettledRun>().toExtend<SettleRunInput>();
      const client = await h.client("dave");
      const task = asTask(
        await client.sendMessage({ message: userMessage("park again") } as never),
      );
      const settled: SettledRun = {
        runId: "r-1",
        callerId: h.callers.get("dave")?.id ?? "",
        origin: "a2a",
        a2a: { taskId: task.id, contextId: task.contextId },
        outcome: { runId: "r-1", status: "parked", messages: [] },
        pendingTool: "write_file",
      };
      await h.a2a.settleRun(settled);
      const reparked = await client.getTask({ id: task.id } as never);
      expect(reparked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      expect(textOf(reparked.status?.message?.parts)).toContain("`write_file`");
      const rejection: SettledRun = {
        ...settled,
        outcome: {
          runId: "r-1",
          status: "rejected",
          messages: [],
          error: { code: "rejected", message: "Not today." },
        },
      };
      await h.a2a.settleRun(rejection);
      const rejected = await client.getTask({ id: task.id } as never);
      expect(rejected.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
      expect(textOf(rejected.status?.message?.parts)).toBe("Not today.");
      // A webhook run has no task: nothing to do.
      const webhookRun: SettledRun = { ...settled, origin: "webhook", a2a: undefined };
      await h.a2a.settleRun(webhookRun);
    });

    it("streams a parked run to WORKING (waiting for an operator) and closes the stream there", async () => {
      const client = await h.client("dave");
      const events = await collect(
        client.sendMessageStream({ message: userMessage("park now") } as never),
      );
      expect(stateOf(events.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_WORKING);
    });

    it("reports a failed run as FAILED with the run's message", async () => {
      const client = await h.client("dave");
      const task = asTask(
        await client.sendMessage({ message: userMessage("fail please") } as never),
      );
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(textOf(task.status?.message?.parts)).toBe(
        "The run stopped: its token budget ran out.",
      );
    });

    describe("a task waiting for input", () => {
      const seed = async (contextId: string) => {
        const id = randomUUID();
        const asked = {
          messageId: randomUUID(),
          role: "ROLE_USER",
          parts: [{ text: "weather please" }],
          contextId,
          taskId: id,
        };
        const question = {
          messageId: randomUUID(),
          role: "ROLE_AGENT",
          parts: [{ text: "Which city?" }],
          contextId,
          taskId: id,
        };
        await ctx.db.insert(a2aTasks).values({
          id,
          callerId: h.callers.get("dave")?.id ?? "",
          contextId,
          task: {
            id,
            contextId,
            status: { state: "TASK_STATE_INPUT_REQUIRED", message: question },
            history: [asked, question],
          },
        });
        return id;
      };

      it("continues from the stored history when a message names the task", async () => {
        const id = await seed("ctx-input");
        const client = await h.client("dave");
        const task = asTask(
          await client.sendMessage({ message: userMessage("Paris", { taskId: id }) } as never),
        );
        expect(task.id).toBe(id);
        expect(task.contextId).toBe("ctx-input");
        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(h.engine.starts.at(-1)?.messages).toEqual([
          { role: "user", content: "weather please" },
          { role: "assistant", content: "Which city?" },
          { role: "user", content: "Paris" },
        ]);
      });

      it("leaves the history as it was when the follow-up is refused with 429", async () => {
        const id = await seed("ctx-limited");
        const res = await h.rpc("dave", sendBody("limit reached", { taskId: id }));
        expect(res.status).toBe(429);
        const client = await h.client("dave");
        const task = await client.getTask({ id } as never);
        expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(task.history.map((m) => textOf(m.parts))).toEqual(["weather please", "Which city?"]);
      });
    });

    it("fails a task whose run cannot start, without leaking the internal message", async () => {
      const client = await h.client("dave");
      const task = asTask(await client.sendMessage({ message: userMessage("boom") } as never));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(JSON.stringify(task)).not.toContain("secret-internal-detail");
    });
  },
  { fresh: "suite" },
);
