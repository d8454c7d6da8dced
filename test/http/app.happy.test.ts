import { describe, expect, it } from "vitest";
import { createApp } from "../../src/http/app.ts";
import { createLogger } from "../../src/log.ts";
import { createMetrics } from "../../src/metrics.ts";
import type { Readiness } from "../../src/services/check-readiness.ts";

function makeApp(readiness: Readiness = { ready: true, checks: [] }) {
  const lines: string[] = [];
  const app = createApp({
    logger: createLogger({ level: "debug", write: (l) => lines.push(l) }),
    metrics: createMetrics({ processMetrics: false }),
    checkReadiness: async () => readiness,
    maxBodyBytes: 64,
  });
  app.hono.post("/echo", async (c) => c.text(await c.req.text()));
  app.hono.post("/refuse", (c) => c.text("no", 401));
  app.hono.get("/boom", () => {
    throw new Error("database password is hunter2");
  });
  return { app, lines };
}

describe("health routes", () => {
  it("GET /healthz answers 200 while the process is up", async () => {
    const { app } = makeApp({ ready: false, checks: [] });
    const res = await app.hono.request("/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("GET /readyz is 200 when every check passes and 503 naming the failed check otherwise", async () => {
    expect((await makeApp().app.hono.request("/readyz")).status).toBe(200);
    const { app } = makeApp({
      ready: false,
      checks: [{ name: "database", ok: false, detail: "connection refused" }],
    });
    const res = await app.hono.request("/readyz");
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: "not-ready",
      checks: [{ name: "database", ok: false, detail: "connection refused" }],
    });
  });

  it("GET /metrics counts requests by route pattern and status, in Prometheus text", async () => {
    const { app } = makeApp();
    await app.hono.request("/healthz");
    await app.hono.request("/healthz");
    await app.hono.request("/nope/abcdefghijklmnopqrstuvwxyz0123456789");
    const res = await app.hono.request("/metrics");
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toContain(
      'peergate_http_requests_total{method="GET",route="/healthz",status="200"} 2',
    );
    expect(text).toContain(
      'peergate_http_requests_total{method="GET",route="unmatched",status="404"} 1',
    );
    expect(text).toContain("peergate_http_request_duration_seconds_bucket");
    expect(text).not.toContain("abcdefghijklmnopqrstuvwxyz");
  });
});

describe("errors and limits", () => {
  it("answers an unknown route with problem+json carrying a code and the request id", async () => {
    const { app } = makeApp();
    const res = await app.hono.request("/missing");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 404, code: "not-found" });
    expect(body.requestId).toBe(res.headers.get("x-request-id"));
    expect(String(body.requestId)).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("hides an unexpected error's message from the client but logs it with the request id", async () => {
    const { app, lines } = makeApp();
    const res = await app.hono.request("/boom");
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text).not.toContain("hunter2");
    expect(JSON.parse(text)).toMatchObject({ code: "internal" });
    const logged = lines.map((l) => JSON.parse(l)).find((r) => r.msg === "request failed");
    expect(logged?.requestId).toBe(JSON.parse(text).requestId);
  });

  it("refuses an oversized body declared by Content-Length with 413", async () => {
    const { app } = makeApp();
    const res = await app.hono.request("/echo", { method: "POST", body: "x".repeat(65) });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: "payload-too-large" });
  });

  it("refuses an oversized streamed body without Content-Length with 413", async () => {
    const { app } = makeApp();
    const chunks = ["x".repeat(40), "y".repeat(40)];
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(next));
      },
    });
    const res = await app.hono.request("/echo", {
      method: "POST",
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
  });

  it("does not read a streamed body ahead of the handler: one that refuses it answers, not a 413", async () => {
    const { app } = makeApp();
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 1;
        if (pulled > 100) controller.close();
        else controller.enqueue(new Uint8Array(8));
      },
    });
    const res = await app.hono.request("/refuse", {
      method: "POST",
      body,
      duplex: "half",
    } as RequestInit);
    // The handler answered (no 413: the body was not read up to the 64-byte limit first), and
    // what was pulled is only what the streams' queues ask for when they are set up.
    expect(res.status).toBe(401);
    expect(pulled * 8).toBeLessThan(64);
  });

  it("accepts a body at the limit", async () => {
    const { app } = makeApp();
    const res = await app.hono.request("/echo", { method: "POST", body: "x".repeat(64) });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("x".repeat(64));
  });

  it("logs one access line per request without the raw path of an unmatched route", async () => {
    const { app, lines } = makeApp();
    await app.hono.request("/webhooks/ifttt/x/SECRETSECRETSECRETSECRETSECRET");
    const access = lines.map((l) => JSON.parse(l)).filter((r) => r.msg === "request");
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({ method: "GET", route: "unmatched", status: 404 });
    expect(lines.join("\n")).not.toContain("SECRETSECRET");
  });
});
