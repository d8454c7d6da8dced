// The protocol's corners through the real routes: ListTasks parameters, JSON-RPC notifications
// and batches, errors of the streaming methods in the form the client asked for (SSE or JSON),
// and the A2A-Version query parameter. Raw HTTP where a client library would hide the wire, the
// a2a-js client where its behaviour is the point.
import { parseSseStream, type StreamResponse } from "@a2a-js/sdk";
import { TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness } from "./support.ts";

type RpcReply = {
  jsonrpc: string;
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
};

async function drain(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The typed error the a2a-js client made of the SSE error event (it rides as the cause). */
function carriedError(error: unknown): unknown {
  expect(error).toBeInstanceOf(Error);
  return (error as { cause?: unknown }).cause;
}

describeEachDatabase(
  "A2A protocol corners",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "bob"]);
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

    const listTasks = (params: Record<string, unknown>, name = "alice") =>
      call({ jsonrpc: "2.0", id: 1, method: "ListTasks", params }, {}, name);

    async function completedTaskId(name = "alice"): Promise<string> {
      const reply = await call(sendBody("finish me"), {}, name);
      const task = reply.result?.task as { id: string; status: { state: string } };
      expect(task.status.state).toBe("TASK_STATE_COMPLETED");
      return task.id;
    }

    describe("ListTasks parameters", () => {
      it.each([
        ["-1"],
        [-1],
        ["2026"],
        ["yesterday"],
        ["2026-01-31"],
        ["2026-01-31T12:00:00"],
        ["2026-13-01T00:00:00Z"],
        ["2026-02-30T00:00:00Z"],
        ["2026-01-31T25:00:00Z"],
        ["0000-12-31T00:00:00Z"],
        ["10000-01-01T00:00:00Z"],
        ["+275760-09-13T00:00:00Z"],
      ])("answers statusTimestampAfter %j with -32602 naming the field", async (value) => {
        const reply = await listTasks({ statusTimestampAfter: value });
        expect(reply.error?.code).toBe(-32602);
        expect(reply.error?.message).toContain("statusTimestampAfter");
        expect(reply.result).toBeUndefined();
      });

      it("filters by a valid timestamp, in Z or with an offset", async () => {
        await completedTaskId("bob");
        const before = new Date(Date.now() - 3_600_000);
        const past = await listTasks({ statusTimestampAfter: before.toISOString() }, "bob");
        expect(past.result?.totalSize).toBe(1);
        const offset = "2000-01-01T01:30:00+01:30";
        expect((await listTasks({ statusTimestampAfter: offset }, "bob")).result?.totalSize).toBe(
          1,
        );
        const future = await listTasks({ statusTimestampAfter: "9999-12-31T23:59:59Z" }, "bob");
        expect(future.result).toMatchObject({ tasks: [], totalSize: 0 });
      });

      it.each([
        ["pageSize", 0],
        ["pageSize", 101],
        ["pageSize", 1.5],
        ["pageSize", -3],
        ["pageSize", "ten"],
        ["historyLength", -1],
        ["historyLength", 2.5],
        ["status", "TASK_STATE_EXPLODED"],
      ])("answers %s %j with -32602 naming the field", async (field, value) => {
        const reply = await listTasks({ [field]: value });
        expect(reply.error?.code).toBe(-32602);
        expect(reply.error?.message).toContain(field);
      });

      it("answers a bad timestamp through the a2a-js client as an invalid-params error", async () => {
        const client = await h.client("alice");
        const error = await client
          .listTasks({
            tenant: "",
            contextId: "",
            status: 0,
            pageToken: "",
            statusTimestampAfter: "-1",
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(error).toBeInstanceOf(Error);
        expect(String((error as Error).message)).toContain("statusTimestampAfter");
      });
    });

    describe("notifications and batches", () => {
      const taskCount = async () => (await listTasks({}, "bob")).result?.totalSize;

      it("answers a notification with 204 and no body, and does not run it", async () => {
        const starts = h.engine.starts.length;
        const tasks = await taskCount();
        const { id: _id, ...notification } = sendBody("nobody will read this");
        const res = await h.rpc("bob", notification);
        expect(res.status).toBe(204);
        expect(await res.text()).toBe("");
        expect(res.headers.get("content-type")).toBeNull();
        expect(h.engine.starts.length).toBe(starts);
        expect(await taskCount()).toBe(tasks);
      });

      it("does not cancel a running task from a notification", async () => {
        const res = await h.rpc(
          "bob",
          { ...sendBody("gate held"), method: "SendStreamingMessage" },
          { Accept: "text/event-stream" },
        );
        const events = parseSseStream(res);
        const first = await events.next();
        const taskId = (
          JSON.parse(first.value?.data ?? "{}") as { result: { task: { id: string } } }
        ).result.task.id;
        const cancels = h.engine.cancels.length;

        const notification = { jsonrpc: "2.0", method: "CancelTask", params: { id: taskId } };
        const dropped = await h.rpc("bob", notification);
        expect(dropped.status).toBe(204);
        expect(h.engine.cancels.length).toBe(cancels);

        h.engine.release(taskId, "done anyway");
        const states: string[] = [];
        for await (const event of events) {
          const data = JSON.parse(event.data) as RpcReply;
          const update = data.result?.statusUpdate as { status: { state: string } } | undefined;
          if (update) states.push(update.status.state);
        }
        expect(states.at(-1)).toBe("TASK_STATE_COMPLETED");
        expect(states).not.toContain("TASK_STATE_CANCELED");
      });

      it.each([
        ["an unknown method", { jsonrpc: "2.0", method: "Nope", params: {} }, {}],
        ["a v0.3 method", { jsonrpc: "2.0", method: "message/send", params: {} }, {}],
        [
          "an unsupported version",
          { jsonrpc: "2.0", method: "GetTask", params: {} },
          { "A2A-Version": "99.0" },
        ],
      ])("answers nothing to a notification of %s either", async (_what, body, headers) => {
        const res = await h.rpc("bob", body, headers);
        expect(res.status).toBe(204);
        expect(await res.text()).toBe("");
      });

      it("still needs credentials: an unauthenticated notification gets 401", async () => {
        const res = await h.rpc(undefined, { jsonrpc: "2.0", method: "GetTask", params: {} });
        expect(res.status).toBe(401);
      });

      it("answers an explicit id null (a request, not a notification), and runs it", async () => {
        const starts = h.engine.starts.length;
        const reply = await call(sendBody("null id", {}, null), {}, "bob");
        expect(reply.id).toBeNull();
        expect(reply.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });
        expect(h.engine.starts.length).toBe(starts + 1);
      });

      it("answers an invalid request without an id with -32600 and id null: it is no notification", async () => {
        const reply = await call({ jsonrpc: "1.0", method: "GetTask", params: {} });
        expect(reply).toMatchObject({ id: null, error: { code: -32600 } });
        const noMethod = await call({ jsonrpc: "2.0", params: {} });
        expect(noMethod).toMatchObject({ id: null, error: { code: -32600 } });
      });

      it("answers a batch with one -32600 error object and runs none of it", async () => {
        const starts = h.engine.starts.length;
        const res = await h.rpc("bob", [sendBody("one", {}, 1), sendBody("two", {}, 2)]);
        expect(res.status).toBe(200);
        const reply = (await res.json()) as RpcReply;
        expect(Array.isArray(reply)).toBe(false);
        expect(reply).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
        expect(reply.error?.message).toContain("batch");
        expect(h.engine.starts.length).toBe(starts);
      });
    });

    describe("errors of streaming methods", () => {
      /** Reads an SSE answer: its events' JSON-RPC responses. */
      async function sseReplies(res: Response): Promise<RpcReply[]> {
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toContain("text/event-stream");
        const replies: RpcReply[] = [];
        for await (const event of parseSseStream(res)) {
          replies.push(JSON.parse(event.data) as RpcReply);
        }
        return replies;
      }

      const sse = { Accept: "text/event-stream" };

      it("answers SubscribeToTask on an unknown task with one SSE error event echoing the id", async () => {
        const res = await h.rpc(
          "alice",
          { jsonrpc: "2.0", id: "sub-1", method: "SubscribeToTask", params: { id: "no-such" } },
          sse,
        );
        const replies = await sseReplies(res);
        expect(replies).toHaveLength(1);
        expect(replies[0]).toMatchObject({
          jsonrpc: "2.0",
          id: "sub-1",
          error: { code: -32001, data: [{ reason: "TASK_NOT_FOUND" }] },
        });
        expect(replies[0]?.result).toBeUndefined();
      });

      it("answers SubscribeToTask on a finished task with one SSE error event (-32004)", async () => {
        const id = await completedTaskId();
        const res = await h.rpc(
          "alice",
          { jsonrpc: "2.0", id: 2, method: "SubscribeToTask", params: { id } },
          { Accept: "application/json, text/event-stream;q=0.9" },
        );
        const replies = await sseReplies(res);
        expect(replies).toHaveLength(1);
        expect(replies[0]?.error?.code).toBe(-32004);
      });

      it.each([
        ["empty parts", sendBody("x", { parts: [] }), -32602],
        ["no params", { jsonrpc: "2.0", id: 1 }, -32602],
        ["an unknown task", sendBody("x", { taskId: "no-such-task" }), -32001],
      ])(
        "answers SendStreamingMessage with %s as one SSE error event",
        async (_what, body, code) => {
          const starts = h.engine.starts.length;
          const res = await h.rpc("alice", { ...body, method: "SendStreamingMessage" }, sse);
          const replies = await sseReplies(res);
          expect(replies).toHaveLength(1);
          expect(replies[0]?.id).toBe(1);
          expect(replies[0]?.error?.code).toBe(code);
          expect(h.engine.starts.length).toBe(starts);
        },
      );

      it("answers v0.3 tasks/resubscribe on an unknown task with one SSE error event in the v0.3 shape", async () => {
        const res = await h.rpc(
          "alice",
          { jsonrpc: "2.0", id: 9, method: "tasks/resubscribe", params: { id: "no-such" } },
          { ...sse, "A2A-Version": "0.3" },
        );
        const replies = await sseReplies(res);
        expect(replies).toEqual([
          { jsonrpc: "2.0", id: 9, error: { code: -32001, message: expect.any(String) } },
        ]);
      });

      it.each([
        ["no Accept header", {}],
        ["Accept: application/json", { Accept: "application/json" }],
        ["a wildcard", { Accept: "*/*" }],
        ["SSE refused with q=0", { Accept: "text/event-stream;q=0, application/json" }],
      ])("answers the same errors as plain JSON with %s", async (_what, headers) => {
        const res = await h.rpc(
          "alice",
          { jsonrpc: "2.0", id: 3, method: "SubscribeToTask", params: { id: "no-such" } },
          headers,
        );
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toContain("application/json");
        expect(((await res.json()) as RpcReply).error?.code).toBe(-32001);
      });

      it("keeps errors of the envelope as plain JSON: they are not a streaming method's", async () => {
        const res = await h.rpc("alice", "{not json", sse);
        expect(res.headers.get("content-type")).toContain("application/json");
        expect(((await res.json()) as RpcReply).error?.code).toBe(-32700);
      });

      for (const mode of ["1.0", "0.3"] as const) {
        it(`gives the a2a-js client (${mode}) the typed error of a failed resubscribe`, async () => {
          const client = mode === "1.0" ? await h.client("alice") : await h.legacyClient("alice");
          const unknown = await drain(client.resubscribeTask({ id: "no-such" } as never)).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(carriedError(unknown)).toBeInstanceOf(TaskNotFoundError);
          expect((carriedError(unknown) as Error).message).toContain("no-such");

          const id = await completedTaskId();
          const finished = await drain(client.resubscribeTask({ id } as never)).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(carriedError(finished)).toBeInstanceOf(UnsupportedOperationError);
        });
      }
    });

    describe("the A2A-Version query parameter", () => {
      const getTask = { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "no-such" } };
      const post = (query: string, headers: Record<string, string>) =>
        fetch(`${h.baseUrl}/a2a${query}`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Authorization: "Bearer test-alice",
            ...headers,
          },
          body: JSON.stringify(getTask),
        });

      it("is read when the header is absent", async () => {
        const v1 = (await (await post("?A2A-Version=1.0", {})).json()) as RpcReply;
        expect(v1.error?.code).toBe(-32001);
        expect(v1.error?.data).toEqual([expect.objectContaining({ reason: "TASK_NOT_FOUND" })]);
        const none = (await (await post("", {})).json()) as RpcReply;
        expect(none.error?.code).toBe(-32601);
        const bad = (await (await post("?A2A-Version=99.0", {})).json()) as RpcReply;
        expect(bad.error?.code).toBe(-32009);
      });

      it("loses to the header when both are present", async () => {
        const header03 = (await (
          await post("?A2A-Version=1.0", { "A2A-Version": "0.3" })
        ).json()) as RpcReply;
        expect(header03.error?.code).toBe(-32601);
        const header1 = (await (
          await post("?A2A-Version=0.3", { "A2A-Version": "1.0" })
        ).json()) as RpcReply;
        expect(header1.error?.code).toBe(-32001);
      });

      it("picks the card's shape too, and the header still wins", async () => {
        const card = async (query: string, headers: Record<string, string> = {}) =>
          (await (
            await fetch(`${h.baseUrl}/.well-known/agent-card.json${query}`, { headers })
          ).json()) as Record<string, unknown>;
        expect(await card("?A2A-Version=1.0")).toHaveProperty("supportedInterfaces");
        expect(await card("?A2A-Version=1.0")).not.toHaveProperty("url");
        expect(await card("")).toMatchObject({ protocolVersion: "0.3.0" });
        expect(await card("?A2A-Version=1.0", { "A2A-Version": "0.3" })).toMatchObject({
          protocolVersion: "0.3.0",
        });
        const v1 = await fetch(`${h.baseUrl}/.well-known/agent-card.json?A2A-Version=1.0`);
        const v1Header = await fetch(`${h.baseUrl}/.well-known/agent-card.json`, {
          headers: { "A2A-Version": "1.0" },
        });
        expect(v1.headers.get("etag")).toBe(v1Header.headers.get("etag"));
      });
    });
  },
  { fresh: "suite" },
);
