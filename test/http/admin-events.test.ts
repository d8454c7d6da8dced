// GET /admin/v1/events: the stream tells runs and approvals as they change, behind the same guards
// as every admin route. The run engine is a stand-in whose run list the test moves on; the stream
// is read until the expected event arrives (no timing assumptions beyond that).
import { Hono } from "hono";
import { afterEach, beforeEach, expect, it } from "vitest";
import { createErrorHandler } from "../../src/http/problem.ts";
import { adminRoutes } from "../../src/http/routes/admin.ts";
import type { PeergateRunEngine } from "../../src/services/runs/engine.ts";
import type { RunSummary } from "../../src/services/runs/list-runs.ts";
import { createTestApp, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

const run = (id: string, status: RunSummary["status"], updatedAt: string): RunSummary => ({
  id,
  callerId: "c1",
  callerName: "<img src=x onerror=alert(1)>",
  origin: "a2a",
  status,
  approvalPolicy: "read-only",
  a2aTaskId: null,
  modelId: null,
  segments: 1,
  budgetLimits: {},
  budgetUsed: { tokens: 0, costUsd: 0, durationMs: 0, steps: 0 },
  pendingApproval:
    status === "parked"
      ? { callId: "call-1", tool: "write_file", argsDigest: "0".repeat(64), requestedAt: updatedAt }
      : null,
  parkedUntil: null,
  error: null,
  createdAt: "2026-01-01T00:00:00.000Z",
  startedAt: null,
  finishedAt: null,
  updatedAt,
});

describeEachDatabase("admin API: the event stream", (db) => {
  let app: TestApp;
  let current: RunSummary[];
  let routes: Hono;
  beforeEach(async () => {
    app = await createTestApp(db.database);
    current = [];
    const engine = { listRuns: async () => current } as unknown as PeergateRunEngine;
    routes = new Hono();
    routes.route(
      "/",
      adminRoutes({
        services: app.services,
        limiter: app.limiter,
        runs: engine,
        events: { intervalMs: 5 },
      }),
    );
    routes.onError(createErrorHandler(app.services.logger));
  });
  afterEach(() => app.close());

  const open = async (headers: Record<string, string> = {}, query = "") => {
    const res = await routes.request(`/events${query}`, {
      headers: { authorization: `Bearer ${app.adminToken}`, ...headers },
    });
    return res;
  };

  /** A reader of the stream: `until(done)` reads until `done(text)` holds for what came since. */
  const readerOf = (res: Response) => {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    return {
      async until(done: (text: string) => boolean) {
        let text = "";
        while (!done(text)) {
          const chunk = await reader.read();
          if (chunk.done) break;
          text += decoder.decode(chunk.value, { stream: true });
        }
        return text;
      },
      cancel: () => reader.cancel(),
    };
  };

  it("tells a run that parks, then the answer, in order", async () => {
    current = [run("r1", "working", "2026-01-01T00:00:01.000Z")];
    const res = await open();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const stream = readerOf(res);
    const first = await stream.until((t) => t.includes("event: ready"));
    expect(first).not.toContain("event: approval");
    current = [run("r1", "parked", "2026-01-01T00:00:02.000Z")];
    const parked = await stream.until((t) => t.includes("event: approval"));
    expect(parked).toContain("event: run");
    const approval = parked.split("\n").find((_line, i, all) => all[i - 1] === "event: approval");
    expect(JSON.parse((approval ?? "").replace(/^data: /, ""))).toMatchObject({
      runId: "r1",
      callId: "call-1",
      tool: "write_file",
    });
    current = [run("r1", "completed", "2026-01-01T00:00:03.000Z")];
    const answered = await stream.until((t) => t.includes("event: answered"));
    expect(answered).toContain('"status":"completed"');
    await stream.cancel();
  });

  it("with ?once tells what is parked now and ends", async () => {
    current = [run("r2", "parked", "2026-01-01T00:00:01.000Z")];
    const res = await open({}, "?once");
    const text = await res.text();
    expect(text).toMatch(/event: approval[\s\S]*event: ready/);
    expect(text).toContain('"runId":"r2"');
  });

  it("refuses a request without the admin token, or from a foreign browser page", async () => {
    const anonymous = await routes.request("/events");
    expect(anonymous.status).toBe(401);
    const foreign = await open({ origin: "https://evil.example" });
    expect(foreign.status).toBe(403);
  });
});
