// Raw JSON-RPC against POST /a2a: every error code the endpoint answers, in the wire shape of the
// version asked for, plus the HTTP answers that are not JSON-RPC (429 past a caller's limits).
import { randomUUID } from "node:crypto";
import { parseSseStream } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aTasks } from "../../src/db/schema.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness } from "./support.ts";

type RpcReply = {
  jsonrpc: string;
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
};

const errorInfo = (reason: string) => [
  { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org" },
];

describeEachDatabase(
  "A2A JSON-RPC errors",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "erin"]);
    });
    afterAll(async () => {
      await h.close();
    });

    async function call(
      body: unknown,
      headers?: Record<string, string>,
      name = "alice",
    ): Promise<RpcReply> {
      const res = await h.rpc(name, body, headers);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("application/json");
      return (await res.json()) as RpcReply;
    }

    async function completedTaskId(): Promise<string> {
      const reply = await call(sendBody("finish me"));
      const task = reply.result?.task as { id: string; status: { state: string } };
      expect(task.status.state).toBe("TASK_STATE_COMPLETED");
      return task.id;
    }

    describe("the envelope", () => {
      it("answers a body that is not JSON with -32700 and id null", async () => {
        const reply = await call("{not json");
        expect(reply).toEqual({
          jsonrpc: "2.0",
          id: null,
          error: { code: -32700, message: expect.any(String) },
        });
      });

      it.each([
        ["a wrong jsonrpc version", { jsonrpc: "1.0", id: 7, method: "GetTask", params: {} }, 7],
        ["no method", { jsonrpc: "2.0", id: 8, params: {} }, 8],
        ["an empty method", { jsonrpc: "2.0", id: 9, method: "", params: {} }, 9],
        ["an object id", { jsonrpc: "2.0", id: { a: 1 }, method: "GetTask", params: {} }, null],
        ["a fractional id", { jsonrpc: "2.0", id: 1.5, method: "GetTask", params: {} }, null],
        ["a batch", [{ jsonrpc: "2.0", id: 1, method: "GetTask", params: {} }], null],
        ["a bare string", '"hello"', null],
      ])("answers %s with -32600", async (_what, body, id) => {
        const reply = await call(body);
        expect(reply.error?.code).toBe(-32600);
        expect(reply.id).toEqual(id);
      });

      it("answers an unknown method with -32601; without an id (a notification) with nothing", async () => {
        expect(
          (await call({ jsonrpc: "2.0", id: "x", method: "tasks/explode", params: {} })).error
            ?.code,
        ).toBe(-32601);
        // JSON-RPC 2.0: a notification gets no reply (test/a2a/protocol.error.test.ts).
        const noId = await h.rpc("alice", { jsonrpc: "2.0", method: "Nope", params: {} });
        expect(noId.status).toBe(204);
        expect(await noId.text()).toBe("");
      });

      it("reads method names against the version asked for, and says which version a name belongs to", async () => {
        const v03NameOn1 = await call({
          jsonrpc: "2.0",
          id: 1,
          method: "tasks/get",
          params: { id: "x" },
        });
        expect(v03NameOn1.error?.code).toBe(-32601);
        expect(v03NameOn1.error?.message).toContain("v0.3");
        const v1NameOn03 = await call(
          { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } },
          { "A2A-Version": "" },
        );
        expect(v1NameOn03.error?.code).toBe(-32601);
        expect(v1NameOn03.error?.message).toContain("A2A-Version: 1.0");
      });

      it("answers an unsupported A2A-Version with -32009", async () => {
        const reply = await call(sendBody("hi", {}, 3), { "A2A-Version": "99.0" });
        expect(reply.id).toBe(3);
        expect(reply.error?.code).toBe(-32009);
        expect(reply.error?.data).toEqual(errorInfo("VERSION_NOT_SUPPORTED"));
      });

      it("answers a body that is not application/json with -32005", async () => {
        const reply = await call(sendBody("hi"), { "Content-Type": "text/plain" });
        expect(reply.error?.code).toBe(-32005);
      });
    });

    describe("params", () => {
      it.each([
        ["no params", { jsonrpc: "2.0", id: 1, method: "SendMessage" }],
        ["params that are an array", { jsonrpc: "2.0", id: 1, method: "SendMessage", params: [] }],
        ["no message", { jsonrpc: "2.0", id: 1, method: "SendMessage", params: {} }],
        ["empty parts", sendBody("x", { parts: [] })],
        ["parts that are not an array", sendBody("x", { parts: "hello" })],
        ["a part with no content", sendBody("x", { parts: [{ metadata: {} }] })],
        ["no messageId", sendBody("x", { messageId: undefined })],
        ["no role", sendBody("x", { role: undefined })],
        ["an agent role", sendBody("x", { role: "ROLE_AGENT" })],
        [
          "a negative historyLength",
          {
            ...sendBody("x"),
            params: { ...sendBody("x").params, configuration: { historyLength: -1 } },
          },
        ],
      ])("answers %s with -32602", async (_what, body) => {
        const reply = await call(body);
        expect(reply.error?.code).toBe(-32602);
        expect(reply.error?.data).toEqual(errorInfo("INVALID_PARAMS"));
      });

      it("answers GetTask with historyLength -1 with -32602, and accepts 0, 1, 2 and 9999", async () => {
        const id = await completedTaskId();
        const bad = await call({
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id, historyLength: -1 },
        });
        expect(bad.error?.code).toBe(-32602);
        // The history: the message, two tool-call progress messages, the answer.
        for (const [historyLength, expected] of [
          [0, 0],
          [1, 1],
          [2, 2],
          [9999, 4],
        ] as const) {
          const ok = await call({
            jsonrpc: "2.0",
            id: 1,
            method: "GetTask",
            params: { id, historyLength },
          });
          expect(((ok.result?.history as unknown[] | undefined) ?? []).length).toBe(expected);
        }
      });

      it("answers a v0.3 message with empty parts with -32602 in the v0.3 shape", async () => {
        const reply = await call(
          {
            jsonrpc: "2.0",
            id: 4,
            method: "message/send",
            params: {
              message: { kind: "message", messageId: randomUUID(), role: "user", parts: [] },
            },
          },
          { "A2A-Version": "0.3" },
        );
        expect(reply.error?.code).toBe(-32602);
        expect(reply.error?.data).toBeUndefined();
      });

      it("takes explicit nulls for optional fields as absent", async () => {
        const reply = await call(
          sendBody("nulls", { contextId: null, taskId: null, metadata: null }),
        );
        expect(reply.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });
      });
    });

    describe("tasks", () => {
      it("answers an unknown task id with -32001 (1.0 and 0.3)", async () => {
        const v1 = await call({
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: "no-such-task" },
        });
        expect(v1.error?.code).toBe(-32001);
        expect(v1.error?.data).toEqual(errorInfo("TASK_NOT_FOUND"));
        const v03 = await call(
          { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "no-such-task" } },
          { "A2A-Version": "0.3" },
        );
        expect(v03.error?.code).toBe(-32001);
        const cancel = await call({
          jsonrpc: "2.0",
          id: 1,
          method: "CancelTask",
          params: { id: "no-such-task" },
        });
        expect(cancel.error?.code).toBe(-32001);
      });

      it("answers cancel of a finished task with -32002", async () => {
        const id = await completedTaskId();
        const reply = await call({ jsonrpc: "2.0", id: 1, method: "CancelTask", params: { id } });
        expect(reply.error?.code).toBe(-32002);
      });

      it("answers a message to a terminal task with -32004", async () => {
        const id = await completedTaskId();
        const reply = await call(sendBody("more", { taskId: id }));
        expect(reply.error?.code).toBe(-32004);
      });

      it("answers a message to a task waiting for an operator with -32004", async () => {
        const parked = await call(sendBody("park it"));
        const task = parked.result?.task as { id: string; status: { state: string } };
        expect(task.status.state).toBe("TASK_STATE_WORKING");
        const reply = await call(sendBody("approve yourself", { taskId: task.id }));
        expect(reply.error?.code).toBe(-32004);
        expect(reply.error?.message).toContain("operator");
      });

      it("answers a contextId that does not match the task's with -32602", async () => {
        const id = randomUUID();
        await ctx.db.insert(a2aTasks).values({
          id,
          callerId: h.callers.get("alice")?.id ?? "",
          contextId: "ctx-a",
          task: { id, contextId: "ctx-a", status: { state: "TASK_STATE_INPUT_REQUIRED" } },
        });
        const reply = await call(sendBody("hi", { taskId: id, contextId: "ctx-b" }));
        expect(reply.error?.code).toBe(-32602);
      });
    });

    describe("push notifications", () => {
      it.each([
        [
          "CreateTaskPushNotificationConfig",
          { taskId: "t", url: "https://example.org/hook" },
          "1.0",
        ],
        ["GetTaskPushNotificationConfig", { taskId: "t", id: "c" }, "1.0"],
        ["ListTaskPushNotificationConfigs", { taskId: "t" }, "1.0"],
        ["DeleteTaskPushNotificationConfig", { taskId: "t", id: "c" }, "1.0"],
        [
          "tasks/pushNotificationConfig/set",
          { taskId: "t", pushNotificationConfig: { url: "https://example.org/hook" } },
          "0.3",
        ],
        ["tasks/pushNotificationConfig/get", { id: "t" }, "0.3"],
      ])("answers %s with -32003", async (method, params, version) => {
        const reply = await call(
          { jsonrpc: "2.0", id: 1, method, params },
          { "A2A-Version": version },
        );
        expect(reply.error?.code).toBe(-32003);
      });

      it("refuses a push config on a message with -32003 and starts no run", async () => {
        const before = h.engine.starts.length;
        const body = sendBody("push me");
        const reply = await call({
          ...body,
          params: {
            ...body.params,
            configuration: { taskPushNotificationConfig: { url: "https://example.org/hook" } },
          },
        });
        expect(reply.error?.code).toBe(-32003);
        expect(h.engine.starts.length).toBe(before);
      });
    });

    describe("streaming", () => {
      it("answers an error before the first event as plain JSON to a client that does not accept SSE", async () => {
        // With Accept: text/event-stream it is one SSE error event (protocol.error.test.ts).
        const body = sendBody("x", { taskId: "no-such-task" });
        const res = await h.rpc(
          "alice",
          { ...body, method: "SendStreamingMessage" },
          { Accept: "application/json" },
        );
        expect(res.headers.get("content-type")).toContain("application/json");
        expect(((await res.json()) as RpcReply).error?.code).toBe(-32001);
      });

      it("streams SSE events that echo the request id", async () => {
        const body = { ...sendBody("sse please", {}, "req-42"), method: "SendStreamingMessage" };
        const res = await h.rpc("alice", body, { Accept: "text/event-stream" });
        expect(res.headers.get("content-type")).toContain("text/event-stream");
        const events: RpcReply[] = [];
        for await (const event of parseSseStream(res))
          events.push(JSON.parse(event.data) as RpcReply);
        expect(events.length).toBeGreaterThan(2);
        expect(events.every((e) => e.jsonrpc === "2.0" && e.id === "req-42")).toBe(true);
        expect(Object.keys(events[0]?.result ?? {})).toEqual(["task"]);
        const last = events.at(-1)?.result?.statusUpdate as { status: { state: string } };
        expect(last.status.state).toBe("TASK_STATE_COMPLETED");
      });

      it("streams v0.3 events with kind fields and final on the terminal status", async () => {
        const body = {
          jsonrpc: "2.0",
          id: 5,
          method: "message/stream",
          params: {
            message: {
              kind: "message",
              messageId: randomUUID(),
              role: "user",
              parts: [{ kind: "text", text: "old style" }],
            },
          },
        };
        const res = await h.rpc("alice", body, { "A2A-Version": "0.3" });
        const events: RpcReply[] = [];
        for await (const event of parseSseStream(res))
          events.push(JSON.parse(event.data) as RpcReply);
        expect(events[0]?.result?.kind).toBe("task");
        const last = events.at(-1)?.result as {
          kind: string;
          final: boolean;
          status: { state: string };
        };
        expect(last).toMatchObject({
          kind: "status-update",
          final: true,
          status: { state: "completed" },
        });
      });
    });

    describe("limits", () => {
      it("answers 429 with Retry-After when the engine refuses the run, and stores no task", async () => {
        const list = () =>
          call({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }, {}, "erin");
        const before = (await list()).result?.totalSize;
        for (const method of ["SendMessage", "SendStreamingMessage"]) {
          const res = await h.rpc("erin", { ...sendBody("limit me"), method });
          expect(res.status).toBe(429);
          expect(res.headers.get("retry-after")).toBe("7");
          expect(res.headers.get("content-type")).toContain("application/problem+json");
          expect(await res.json()).toMatchObject({ status: 429, code: "rate-limited" });
        }
        const v03 = await h.rpc(
          "erin",
          {
            jsonrpc: "2.0",
            id: 1,
            method: "message/send",
            params: {
              message: {
                kind: "message",
                messageId: randomUUID(),
                role: "user",
                parts: [{ kind: "text", text: "limit" }],
              },
            },
          },
          { "A2A-Version": "0.3" },
        );
        expect(v03.status).toBe(429);
        expect((await list()).result?.totalSize).toBe(before);
      });
    });

    describe("content", () => {
      it("round-trips Unicode text", async () => {
        const text = 'héllo 🌍 — 日本語 \u{1F600} "quoted" \\ back';
        const reply = await call(sendBody(text));
        const task = reply.result?.task as { artifacts: { parts: { text: string }[] }[] };
        expect(task.artifacts[0]?.parts[0]?.text).toBe(`echo: ${text}`);
      });

      it("describes file and data parts to the run as text, never opening or fetching them", async () => {
        await call(
          sendBody("x", {
            parts: [
              { text: "look at these" },
              {
                raw: Buffer.from("secret bytes").toString("base64"),
                filename: "notes.txt",
                mediaType: "text/plain",
              },
              {
                url: "https://example.org/report.pdf",
                filename: "report.pdf",
                mediaType: "application/pdf",
              },
              { data: { answer: 42 }, mediaType: "application/json" },
            ],
          }),
        );
        const content = h.engine.starts.at(-1)?.messages.at(-1)?.content as string;
        expect(content).toContain("look at these");
        expect(content).toContain('Attached file "notes.txt" (text/plain), 12 bytes');
        expect(content).not.toContain("secret bytes");
        expect(content).toContain('"https://example.org/report.pdf". It was not fetched.');
        expect(content).toContain('"answer": 42');
      });
    });
  },
  { fresh: "suite" },
);
