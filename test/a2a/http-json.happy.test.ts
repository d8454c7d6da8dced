// The HTTP+JSON binding (A2A 1.0 §11) with the real @a2a-js/sdk client built from the card with
// its REST transport factory: send, stream, get, list, cancel, subscribe and the extended card,
// and another caller's task answered as a missing one. Raw HTTP for what the client does not
// show: the paths, the media types, the google.rpc.Status bodies and the card's interfaces.
import { randomUUID } from "node:crypto";
import { type ListTasksRequest, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, startHarness, userMessage } from "./support.ts";

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

function stateOf(event: StreamResponse | undefined): TaskState | undefined {
  const payload = event?.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
}

function asTask(result: unknown): Task {
  expect(result).toHaveProperty("status");
  return result as Task;
}

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

/** The ErrorInfo reason of an SDK client error (it rebuilds the google.rpc.Status it got). */
async function reasonOf(promise: Promise<unknown>): Promise<string> {
  const error = (await promise.then(
    () => undefined,
    (e: unknown) => e,
  )) as { reason?: string; name?: string } | undefined;
  expect(error, "the call should have failed").toBeDefined();
  return error?.reason ?? error?.name ?? "";
}

describeEachDatabase(
  "A2A HTTP+JSON binding with the a2a-js client",
  (ctx) => {
    let h: Harness;
    let alice: Client;
    let bob: Client;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "bob"]);
      alice = await h.restClient("alice");
      bob = await h.restClient("bob");
    });
    afterAll(async () => {
      await h.close();
    });

    const http = (
      name: string | undefined,
      method: string,
      path: string,
      init: { body?: string; headers?: Record<string, string> } = {},
    ) =>
      fetch(`${h.baseUrl}${path}`, {
        method,
        headers: {
          "A2A-Version": "1.0",
          ...(name ? { Authorization: `Bearer test-${name}` } : {}),
          ...(init.body === undefined ? {} : { "Content-Type": "application/a2a+json" }),
          ...init.headers,
        },
        ...(init.body === undefined ? {} : { body: init.body }),
      });

    it("is the transport the client chose from the card", async () => {
      const card: any = await (
        await fetch(`${h.baseUrl}/.well-known/agent-card.json`, {
          headers: { "A2A-Version": "1.0" },
        })
      ).json();
      expect(card.supportedInterfaces).toEqual([
        { url: `${h.baseUrl}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${h.baseUrl}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
        { url: h.baseUrl, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
      ]);
      expect(alice.protocolVersion).toBe("1.0");
      expect(
        (alice as unknown as { transport: { protocolName: string } }).transport.protocolName,
      ).toBe("HTTP+JSON");
    });

    it("sends a message and gets the completed task; gets it again with historyLength", async () => {
      const task = asTask(await alice.sendMessage({ message: userMessage("hello rest") } as never));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(textOf(task.artifacts[0]?.parts)).toBe("echo: hello rest");
      expect(h.engine.starts.at(-1)?.caller.name).toBe("alice");
      const got = await alice.getTask({ id: task.id, historyLength: 1 } as never);
      expect(got.id).toBe(task.id);
      expect(got.history).toHaveLength(1);
    });

    it("streams the task to its terminal state", async () => {
      const events = await collect(
        alice.sendMessageStream({ message: userMessage("stream rest") } as never),
      );
      expect(events[0]?.payload?.$case).toBe("task");
      expect(stateOf(events.at(-1))).toBe(TaskState.TASK_STATE_COMPLETED);
    });

    it("lists only the caller's own tasks, paged", async () => {
      await bob.sendMessage({ message: userMessage("bob's own") } as never);
      const page = await alice.listTasks(listRequest({ pageSize: 1 }));
      expect(page.tasks).toHaveLength(1);
      expect(page.nextPageToken).not.toBe("");
      const all = await alice.listTasks(listRequest({ pageSize: 100 }));
      const bobs = await bob.listTasks(listRequest({ pageSize: 100 }));
      const bobIds = new Set(bobs.tasks.map((t) => t.id));
      expect(all.tasks.length).toBeGreaterThan(0);
      expect(all.tasks.some((t) => bobIds.has(t.id))).toBe(false);
      const completed = await alice.listTasks(
        listRequest({ status: TaskState.TASK_STATE_COMPLETED, includeArtifacts: true }),
      );
      expect(completed.tasks.every((t) => t.status?.state === TaskState.TASK_STATE_COMPLETED)).toBe(
        true,
      );
      expect(completed.tasks[0]?.artifacts.length).toBeGreaterThan(0);
    });

    it("cancels a running task and subscribes to one until it finishes", async () => {
      const stream = alice.sendMessageStream({ message: userMessage("slow rest") } as never);
      const first = await stream.next();
      const slowId = first.value?.payload?.$case === "task" ? first.value.payload.value.id : "";
      const canceled = await alice.cancelTask({ id: slowId } as never);
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect(stateOf((await collect(stream)).at(-1))).toBe(TaskState.TASK_STATE_CANCELED);

      const gated = alice.sendMessageStream({ message: userMessage("gate rest") } as never);
      const head = await gated.next();
      const gateId = head.value?.payload?.$case === "task" ? head.value.payload.value.id : "";
      const again = alice.resubscribeTask({ id: gateId } as never);
      expect((await again.next()).value?.payload?.$case).toBe("task");
      h.engine.release(gateId, "rest done");
      expect(stateOf((await collect(again)).at(-1))).toBe(TaskState.TASK_STATE_COMPLETED);
      await collect(gated);
    });

    it("gets the extended card", async () => {
      const card = await alice.getAgentCard();
      expect(card.name).toBe("test-peer");
      expect(card.skills.map((s) => s.id)).toEqual(["echo", "time"]);
    });

    it("answers another caller's task as a missing one, on every task operation", async () => {
      const task = asTask(await alice.sendMessage({ message: userMessage("alice only") } as never));
      const missing = randomUUID();
      for (const id of [task.id, missing]) {
        expect(await reasonOf(bob.getTask({ id } as never))).toBe("TASK_NOT_FOUND");
        expect(await reasonOf(bob.cancelTask({ id } as never))).toBe("TASK_NOT_FOUND");
        expect(await reasonOf(collect(bob.resubscribeTask({ id } as never)))).toBe(
          "TASK_NOT_FOUND",
        );
        expect(
          await reasonOf(
            bob.sendMessage({ message: userMessage("hijack", { taskId: id }) } as never),
          ),
        ).toBe("TASK_NOT_FOUND");
      }
      const stored = await alice.getTask({ id: task.id } as never);
      expect(stored.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      // Byte for byte the same answer for "not yours" and "not there", but for the id.
      const theirs = await http("bob", "GET", `/tasks/${task.id}`);
      const nobodys = await http("bob", "GET", `/tasks/${missing}`);
      expect(theirs.status).toBe(404);
      expect((await theirs.text()).replace(task.id, "ID")).toBe(
        (await nobodys.text()).replace(missing, "ID"),
      );
    });

    describe("on the wire", () => {
      it("answers application/a2a+json, or application/json to a client that accepts only that", async () => {
        const a2a = await http("alice", "GET", "/tasks?pageSize=1");
        expect(a2a.status).toBe(200);
        expect(a2a.headers.get("content-type")).toBe("application/a2a+json");
        expect(a2a.headers.get("cache-control")).toBe("no-store");
        const plain = await http("alice", "GET", "/tasks?pageSize=1", {
          headers: { Accept: "application/json" },
        });
        expect(plain.headers.get("content-type")).toBe("application/json");
        const body = await plain.json();
        expect(body).toMatchObject({ pageSize: 1 });
      });

      it("takes a ProtoJSON SendMessageRequest as application/json too, and answers {task}", async () => {
        const res = await http("alice", "POST", "/message:send", {
          headers: { "Content-Type": "application/json; charset=utf-8" },
          body: JSON.stringify({
            message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "raw" }] },
          }),
        });
        expect(res.status).toBe(200);
        const body: any = await res.json();
        expect(body.task.status.state).toBe("TASK_STATE_COMPLETED");
        expect(body.task.artifacts[0].parts[0].text).toBe("echo: raw");
      });

      it("answers A2A errors as google.rpc.Status with an ErrorInfo, with the spec's HTTP status", async () => {
        const missing = await http("alice", "GET", `/tasks/${randomUUID()}`);
        expect(missing.status).toBe(404);
        expect(missing.headers.get("content-type")).toBe("application/a2a+json");
        expect(await missing.json()).toEqual({
          error: {
            code: 404,
            status: "NOT_FOUND",
            message: expect.stringContaining("Task not found"),
            details: [
              {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                reason: "TASK_NOT_FOUND",
                domain: "a2a-protocol.org",
              },
            ],
          },
        });
        const task = asTask(await alice.sendMessage({ message: userMessage("done") } as never));
        const notCancelable = await http("alice", "POST", `/tasks/${task.id}:cancel`);
        expect(notCancelable.status).toBe(400);
        expect(((await notCancelable.json()) as any).error).toMatchObject({
          status: "FAILED_PRECONDITION",
          details: [{ reason: "TASK_NOT_CANCELABLE" }],
        });
        const pushOff = await http("alice", "GET", `/tasks/${task.id}/pushNotificationConfigs`);
        expect(pushOff.status).toBe(400);
        expect(((await pushOff.json()) as any).error.details[0].reason).toBe(
          "PUSH_NOTIFICATION_NOT_SUPPORTED",
        );
      });

      it("refuses what is not a request: bad JSON, a wrong media type, no version, bad query values", async () => {
        const cases: [string, Promise<Response>, number, string][] = [
          [
            "bad JSON",
            http("alice", "POST", "/message:send", { body: "{nope" }),
            400,
            "INVALID_PARAMS",
          ],
          [
            "a JSON array",
            http("alice", "POST", "/message:send", { body: "[]" }),
            400,
            "INVALID_PARAMS",
          ],
          [
            "a repeated key",
            http("alice", "POST", "/message:send", { body: '{"message":{},"message":{}}' }),
            400,
            "INVALID_PARAMS",
          ],
          ["no body", http("alice", "POST", "/message:send"), 400, "INVALID_PARAMS"],
          [
            "text/plain",
            http("alice", "POST", "/message:send", {
              body: "{}",
              headers: { "Content-Type": "text/plain" },
            }),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
          ],
          [
            "a form",
            http("alice", "POST", "/message:send", {
              body: "a=b",
              headers: { "Content-Type": "application/x-www-form-urlencoded" },
            }),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
          ],
          [
            "no A2A-Version (0.3)",
            fetch(`${h.baseUrl}/tasks`, { headers: { Authorization: "Bearer test-alice" } }),
            400,
            "VERSION_NOT_SUPPORTED",
          ],
          [
            "A2A-Version 2.0",
            http("alice", "GET", "/tasks", { headers: { "A2A-Version": "2.0" } }),
            400,
            "VERSION_NOT_SUPPORTED",
          ],
          [
            "historyLength=abc",
            http("alice", "GET", `/tasks/x?historyLength=abc`),
            400,
            "INVALID_PARAMS",
          ],
          [
            "historyLength=-1",
            http("alice", "GET", `/tasks?historyLength=-1`),
            400,
            "INVALID_PARAMS",
          ],
          [
            "pageSize twice",
            http("alice", "GET", "/tasks?pageSize=1&pageSize=2"),
            400,
            "INVALID_PARAMS",
          ],
          ["pageSize=0", http("alice", "GET", "/tasks?pageSize=0"), 400, "INVALID_PARAMS"],
          [
            "includeArtifacts=yes",
            http("alice", "GET", "/tasks?includeArtifacts=yes"),
            400,
            "INVALID_PARAMS",
          ],
          [
            "taskId in the body differs from the path",
            http("alice", "POST", `/tasks/${randomUUID()}:cancel`, {
              body: JSON.stringify({ id: "other" }),
            }),
            400,
            "INVALID_PARAMS",
          ],
        ];
        for (const [name, pending, status, reason] of cases) {
          const res = await pending;
          const body: any = await res.json();
          expect({ name, status: res.status, reason: body.error?.details?.[0]?.reason }).toEqual({
            name,
            status,
            reason,
          });
          expect(body.error.code, name).toBe(status);
        }
        // The version may also ride in the query (spec §3.6.1).
        const viaQuery = await fetch(`${h.baseUrl}/tasks?A2A-Version=1.0`, {
          headers: { Authorization: "Bearer test-alice" },
        });
        expect(viaQuery.status).toBe(200);
      });
    });
  },
  { fresh: "suite" },
);
