// /metrics carries the domain (runs by origin and state, parked runs, tool calls, revocations,
// authentication failures, tokens and cost by model), counted in process as the events happen
// (parked runs and the unchained audit tail: read at most once a minute), and can require
// PEERGATE_METRICS_TOKEN; without one it is refused on a listener other than loopback. Model
// latency is timed in this instance, by model and outcome.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { createMetrics } from "../../src/metrics.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { type CliServer, startCliServer } from "../cli/cli-server.ts";
import {
  a2a,
  copyPolicies,
  createSharedSecrets,
  faultModelId,
  instanceEnv,
  type ScriptedModel,
  sendMessageBody,
  startScriptedModel,
} from "../faults/support.ts";

describe("/metrics access", () => {
  it("is open on loopback without a token, refused elsewhere, and needs the token once set", () => {
    expect(createMetrics({ processMetrics: false, host: "127.0.0.1" }).admit(undefined).ok).toBe(
      true,
    );
    const wide = createMetrics({ processMetrics: false, host: "0.0.0.0" }).admit(undefined);
    expect(wide).toMatchObject({ ok: false, status: 403 });
    const guarded = createMetrics({ processMetrics: false, host: "0.0.0.0", token: "t0ken-t0ken" });
    expect(guarded.admit(undefined)).toMatchObject({ ok: false, status: 401 });
    expect(guarded.admit("Bearer wrong")).toMatchObject({ ok: false, status: 401 });
    expect(guarded.admit("Bearer t0ken-t0ken").ok).toBe(true);
  });
});

describe("domain metrics (pglite, a real server)", () => {
  let s: CliServer;
  const token = "metrics-scrape-token-0123456789";
  beforeAll(async () => {
    s = await startCliServer("pglite", { env: { PEERGATE_METRICS_TOKEN: token } });
  });
  afterAll(async () => s?.stop());

  it("refuses a scrape without the token", async () => {
    const res = await fetch(`${s.server.url}/metrics`);
    expect(res.status).toBe(401);
    expect(await res.text()).not.toContain("peergate_runs");
  });

  const scrape = async () =>
    (
      await fetch(`${s.server.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    ).text();

  it("counts runs by origin and state, parked runs and revocations", async () => {
    const peer = await s.json("callers", "add", "counted", "--kind", "peer");
    await fetch(`${s.server.url}/a2a`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${peer.credential.secret}`,
        "content-type": "application/json",
        "a2a-version": "1.0",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] } },
      }),
    });
    await s.cli("callers", "revoke", "counted");
    const res = await fetch(`${s.server.url}/metrics`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const body = await res.text();
    // The run failed before any model call (no model configured): it never reached a segment.
    expect(body).toContain("# TYPE peergate_runs_total counter");
    expect(body).toContain("peergate_runs_parked 0");
    expect(body).toContain("peergate_revocations_total 1");
    expect(body).toContain("# TYPE peergate_model_tokens_total counter");
    expect(body).toContain("# TYPE peergate_tool_calls_total counter");
    expect(body).toContain("# TYPE peergate_auth_failures_total counter");
    expect(body).toMatch(/^peergate_audit_unchained \d+$/m);
    // Node's process metrics under their standard names, and what runs here.
    expect(body).toMatch(/^process_cpu_seconds_total [\d.e+-]+$/m);
    expect(body).toContain("# TYPE nodejs_heap_size_used_bytes gauge");
    expect(body).not.toContain("peergate_process_");
    expect(body).toMatch(
      new RegExp(`^peergate_build_info\\{version="[^"]+",node="${process.version}"\\} 1$`, "m"),
    );
  });

  it("counts failed authentications as they happen", async () => {
    const before = await scrape();
    const failures = (text: string) =>
      Number(/^peergate_auth_failures_total\{surface="a2a"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    await fetch(`${s.server.url}/a2a`, {
      method: "POST",
      headers: { authorization: "Bearer pg_not-a-real-token", "content-type": "application/json" },
      body: "{}",
    });
    const after = await scrape();
    expect(failures(after) - failures(before)).toBe(1);
  });
});

describe("model latency (pglite, a real server and a scripted model)", () => {
  let model: ScriptedModel;
  let policiesDir: string;
  let dataDir: string;
  let server: RunningServer;
  const shared = createSharedSecrets();
  beforeAll(async () => {
    model = await startScriptedModel({ quick: [{ text: "an answer" }] });
    policiesDir = await copyPolicies();
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-metrics-model-"));
    const env = {
      ...instanceEnv({ ...shared, policiesDir, modelBaseUrl: model.baseUrl, dataDir }),
      PEERGATE_LOG_LEVEL: "silent",
    };
    server = await startServer(loadConfig(env, dataDir), silentLogger, env);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await model?.close();
    await rm(dataDir, { recursive: true, force: true });
    await rm(`${dataDir}-workspace`, { recursive: true, force: true });
    await rm(policiesDir, { recursive: true, force: true });
  });

  it("times each model call by model and outcome", async () => {
    const created = await fetch(`${server.url}/admin/v1/callers`, {
      method: "POST",
      headers: { authorization: `Bearer ${shared.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "timed", kind: "peer" }),
    });
    const secret = ((await created.json()) as any).credential.secret as string;
    const sent = await a2a(server.url, secret, sendMessageBody("scenario:quick"));
    expect(sent.body.result?.task?.status?.state).toBe("TASK_STATE_COMPLETED");
    const body = await (await fetch(`${server.url}/metrics`)).text();
    expect(body).toContain("# TYPE peergate_model_call_duration_seconds histogram");
    expect(body).toMatch(
      new RegExp(
        `peergate_model_call_duration_seconds_count\\{model="${faultModelId}",outcome="ok"\\} [1-9]`,
      ),
    );
    expect(body).toMatch(/^peergate_runs_total\{origin="a2a",status="completed"\} 1$/m);
    expect(body).toMatch(
      new RegExp(`^peergate_model_tokens_total\\{model="${faultModelId}"\\} [1-9]`, "m"),
    );
  });
});
