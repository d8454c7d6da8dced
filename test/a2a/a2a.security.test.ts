// Who may do what on the A2A surface: no credentials → HTTP 401 before any JSON-RPC; another
// caller's task looks exactly like a missing one (-32001) on every path that names a task; a
// revoked caller's open streams end; the public card carries no caller data.
import { randomUUID } from "node:crypto";
import { parseSseStream } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness, waitFor } from "./support.ts";

type RpcReply = {
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
};

describeEachDatabase(
  "A2A security",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "bob", "mallory"]);
    });
    afterAll(async () => {
      await h.close();
    });

    async function call(name: string, body: unknown, headers?: Record<string, string>) {
      const res = await h.rpc(name, body, headers);
      expect(res.status).toBe(200);
      return (await res.json()) as RpcReply;
    }

    describe("authentication", () => {
      it.each([
        ["no Authorization header", {}],
        ["a bogus bearer token", { Authorization: "Bearer pg_not-a-real-token" }],
        ["another scheme", { Authorization: "Basic YWxpY2U6c2VjcmV0" }],
      ])(
        "answers %s with HTTP 401 and WWW-Authenticate, never a JSON-RPC 200",
        async (_what, headers) => {
          const before = h.engine.starts.length;
          for (const method of ["SendMessage", "SendStreamingMessage", "GetTask", "NoSuchMethod"]) {
            const res = await h.rpc(undefined, { ...sendBody("hi"), method }, headers);
            expect(res.status).toBe(401);
            expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
            expect(res.headers.get("content-type")).toContain("application/problem+json");
            const body = (await res.json()) as Record<string, unknown>;
            expect(body).not.toHaveProperty("jsonrpc");
            expect(body).toMatchObject({ status: 401, code: "unauthenticated" });
          }
          expect(h.engine.starts.length).toBe(before);
        },
      );

      it("authenticates before reading the body: garbage without credentials is still 401", async () => {
        const res = await h.rpc(undefined, "{not json");
        expect(res.status).toBe(401);
      });
    });

    describe("another caller's task is not found", () => {
      let aliceTask: { id: string; contextId: string };
      let runningTask: string;

      beforeAll(async () => {
        const reply = await call("alice", sendBody("alice's secret"));
        aliceTask = reply.result?.task as { id: string; contextId: string };
        const parked = await call("alice", sendBody("park alice"));
        runningTask = (parked.result?.task as { id: string } | undefined)?.id ?? "";
      });

      const notFound = (reply: RpcReply) => {
        expect(reply.error?.code).toBe(-32001);
        expect(JSON.stringify(reply)).not.toContain("alice's secret");
      };

      it("GetTask and tasks/get", async () => {
        notFound(
          await call("bob", {
            jsonrpc: "2.0",
            id: 1,
            method: "GetTask",
            params: { id: aliceTask.id },
          }),
        );
        notFound(
          await call(
            "bob",
            { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: aliceTask.id } },
            { "A2A-Version": "0.3" },
          ),
        );
      });

      it("the same answer as for a task that never existed", async () => {
        const theirs = await call("bob", {
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: aliceTask.id },
        });
        const nobody = await call("bob", {
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: randomUUID() },
        });
        expect({ ...theirs.error, message: "" }).toEqual({ ...nobody.error, message: "" });
      });

      it("CancelTask does not reach the owner's run", async () => {
        const cancels = h.engine.cancels.length;
        notFound(
          await call("bob", {
            jsonrpc: "2.0",
            id: 1,
            method: "CancelTask",
            params: { id: runningTask },
          }),
        );
        notFound(
          await call(
            "bob",
            { jsonrpc: "2.0", id: 1, method: "tasks/cancel", params: { id: runningTask } },
            { "A2A-Version": "0.3" },
          ),
        );
        expect(h.engine.cancels.length).toBe(cancels);
        const own = await call("alice", {
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: runningTask },
        });
        expect(own.result?.status).toMatchObject({ state: "TASK_STATE_WORKING" });
      });

      it("SubscribeToTask and tasks/resubscribe", async () => {
        notFound(
          await call("bob", {
            jsonrpc: "2.0",
            id: 1,
            method: "SubscribeToTask",
            params: { id: runningTask },
          }),
        );
        notFound(
          await call(
            "bob",
            { jsonrpc: "2.0", id: 1, method: "tasks/resubscribe", params: { id: runningTask } },
            { "A2A-Version": "0.3" },
          ),
        );
      });

      it("a follow-up message naming the task, streamed or not", async () => {
        const starts = h.engine.starts.length;
        notFound(await call("bob", sendBody("let me in", { taskId: aliceTask.id })));
        notFound(
          await call("bob", {
            ...sendBody("let me in", { taskId: aliceTask.id }),
            method: "SendStreamingMessage",
          }),
        );
        notFound(
          await call(
            "bob",
            sendBody("with its context", { taskId: aliceTask.id, contextId: aliceTask.contextId }),
          ),
        );
        expect(h.engine.starts.length).toBe(starts);
      });

      it("referenceTaskIds", async () => {
        notFound(await call("bob", sendBody("see that", { referenceTaskIds: [aliceTask.id] })));
      });

      it("a contextId shared by chance gives no access to the other caller's turns", async () => {
        const reply = await call(
          "bob",
          sendBody("what did alice say?", { contextId: aliceTask.contextId }),
        );
        expect(reply.result?.task).toMatchObject({ contextId: aliceTask.contextId });
        expect(h.engine.starts.at(-1)?.messages).toEqual([
          { role: "user", content: "what did alice say?" },
        ]);
        const list = await call("bob", {
          jsonrpc: "2.0",
          id: 1,
          method: "ListTasks",
          params: { contextId: aliceTask.contextId },
        });
        const tasks = list.result?.tasks as { id: string }[];
        expect(tasks.map((t) => t.id)).not.toContain(aliceTask.id);
      });

      it("ListTasks shows only the caller's own tasks", async () => {
        const list = await call("bob", { jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} });
        const ids = ((list.result?.tasks ?? []) as { id: string }[]).map((t) => t.id);
        expect(ids).not.toContain(aliceTask.id);
        expect(ids).not.toContain(runningTask);
      });
    });

    describe("revocation", () => {
      it("closeCallerStreams ends the revoked caller's open streams and only those", async () => {
        const open = async (name: string) => {
          const res = await h.rpc(name, {
            ...sendBody("gate hold"),
            method: "SendStreamingMessage",
          });
          expect(res.headers.get("content-type")).toContain("text/event-stream");
          const events = parseSseStream(res);
          const first = await events.next();
          const task = (JSON.parse(first.value?.data ?? "{}") as RpcReply).result?.task as {
            id: string;
          };
          return { events, taskId: task.id };
        };
        const mallory = await open("mallory");
        const bob = await open("bob");
        const malloryId = h.callers.get("mallory")?.id ?? "";
        await waitFor(() => (h.a2a.openStreamCount(malloryId) === 1 ? true : undefined));

        expect(h.a2a.closeCallerStreams(h.callers.get("mallory")?.id ?? "")).toBe(1);
        const malloryRest: unknown[] = [];
        for await (const event of mallory.events) malloryRest.push(event);
        expect(h.a2a.openStreamCount(h.callers.get("mallory")?.id)).toBe(0);
        expect(h.a2a.openStreamCount(h.callers.get("bob")?.id)).toBe(1);

        // Bob's stream is untouched and runs to the end.
        h.engine.release(bob.taskId);
        const bobRest: string[] = [];
        for await (const event of bob.events) bobRest.push(event.data);
        expect(bobRest.at(-1)).toContain("TASK_STATE_COMPLETED");

        // The cut-off stream's task still reaches its end in the store.
        h.engine.release(mallory.taskId);
        await waitFor(async () => {
          const reply = await call("mallory", {
            jsonrpc: "2.0",
            id: 1,
            method: "GetTask",
            params: { id: mallory.taskId },
          });
          return (reply.result?.status as { state?: string } | undefined)?.state ===
            "TASK_STATE_COMPLETED"
            ? true
            : undefined;
        });
      });
    });

    describe("the agent card", () => {
      it("is public, in the 1.0 shape with the bearer scheme in ProtoJSON form", async () => {
        const res = await fetch(`${h.baseUrl}/.well-known/agent-card.json`, {
          headers: { "A2A-Version": "1.0" },
        });
        expect(res.status).toBe(200);
        const text = await res.text();
        expect(text).not.toContain("$case");
        const card = JSON.parse(text) as Record<string, unknown>;
        expect(card).toMatchObject({
          name: "test-peer",
          description: "A peer used by the A2A tests",
          version: "2.3.4",
          capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true },
          defaultInputModes: ["text/plain", "application/json"],
          defaultOutputModes: ["text/plain"],
          supportedInterfaces: [
            { url: `${h.baseUrl}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
            { url: `${h.baseUrl}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
            { url: h.baseUrl, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
          ],
          // The opaque pg_ token every caller has, or a JWT for a caller registered with a key.
          securitySchemes: {
            bearer: { httpAuthSecurityScheme: { scheme: "bearer", bearerFormat: "opaque" } },
            jwt: { httpAuthSecurityScheme: { scheme: "bearer", bearerFormat: "JWT" } },
          },
          securityRequirements: [
            { schemes: { bearer: { list: [] } } },
            { schemes: { jwt: { list: [] } } },
          ],
        });
        const schemes = card.securitySchemes as Record<
          string,
          { httpAuthSecurityScheme: { description: string } }
        >;
        expect(schemes.bearer?.httpAuthSecurityScheme.description).toContain("pg_");
        expect(card.skills).toEqual([
          {
            id: "echo",
            name: "Echo",
            description: "Says back what it is told",
            tags: ["echo"],
            examples: ["say hello"],
          },
          { id: "time", name: "Time", description: "Tells the time", tags: ["time"] },
        ]);
        expect(card).not.toHaveProperty("url");
      });

      it("is in the v0.3 shape without the A2A-Version header, also at /.well-known/agent.json", async () => {
        for (const path of ["/.well-known/agent-card.json", "/.well-known/agent.json"]) {
          const card = (await (await fetch(`${h.baseUrl}${path}`)).json()) as Record<
            string,
            unknown
          >;
          expect(card).toMatchObject({
            name: "test-peer",
            url: `${h.baseUrl}/a2a`,
            preferredTransport: "JSONRPC",
            protocolVersion: "0.3.0",
            version: "2.3.4",
            capabilities: { streaming: true, pushNotifications: false },
            supportsAuthenticatedExtendedCard: true,
            securitySchemes: {
              bearer: { type: "http", scheme: "bearer", bearerFormat: "opaque" },
              jwt: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
            },
            security: [{ bearer: [] }, { jwt: [] }],
            defaultInputModes: ["text/plain", "application/json"],
            defaultOutputModes: ["text/plain"],
          });
          expect(card).not.toHaveProperty("supportedInterfaces");
        }
      });

      it("has a stable ETag per shape, cache headers, and answers 304 on a match", async () => {
        const get = (headers: Record<string, string> = {}) =>
          fetch(`${h.baseUrl}/.well-known/agent-card.json`, { headers });
        const v1 = await get({ "A2A-Version": "1.0" });
        const v1Again = await get({ "A2A-Version": "1.0" });
        const v03 = await get();
        const etag = v1.headers.get("etag") ?? "";
        expect(etag).toMatch(/^".+"$/);
        expect(v1Again.headers.get("etag")).toBe(etag);
        expect(v03.headers.get("etag")).not.toBe(etag);
        expect(v1.headers.get("vary")).toContain("A2A-Version");
        expect(v1.headers.get("cache-control")).toContain("max-age=");
        const lastModified = v1.headers.get("last-modified") ?? "";
        expect(new Date(lastModified).toUTCString()).toBe(lastModified);
        expect(v03.headers.get("last-modified")).toBe(lastModified);
        const notModified = await get({ "A2A-Version": "1.0", "If-None-Match": `W/${etag}` });
        expect(notModified.status).toBe(304);
        expect(notModified.headers.get("etag")).toBe(etag);
        expect(await notModified.text()).toBe("");
        const otherShape = await get({ "If-None-Match": etag });
        expect(otherShape.status).toBe(200);
      });

      it("the extended card needs credentials", async () => {
        const res = await h.rpc(undefined, {
          jsonrpc: "2.0",
          id: 1,
          method: "GetExtendedAgentCard",
        });
        expect(res.status).toBe(401);
        const ok = await call("bob", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard" });
        expect(ok.result).toMatchObject({
          name: "test-peer",
          securitySchemes: { bearer: { httpAuthSecurityScheme: {} } },
        });
        const v03 = await call(
          "bob",
          { jsonrpc: "2.0", id: 1, method: "agent/getAuthenticatedExtendedCard" },
          { "A2A-Version": "0.3" },
        );
        expect(v03.result).toMatchObject({
          name: "test-peer",
          security: [{ bearer: [] }, { jwt: [] }],
        });
      });
    });
  },
  { fresh: "suite" },
);
