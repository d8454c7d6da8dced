// Traces from a real `peergate serve`: an OTLP/HTTP receiver on loopback gets the spans of one A2A
// SendMessage whose run calls a tool that starts a process — one trace, continued from the
// caller's `traceparent`, from the request through authentication, admission, the model, the
// tool and its process to the run's finish, exported by the graceful stop; a webhook fire is a
// trace of its own that its background run joins — and nothing in the payload is a credential,
// the prompt or the webhook's payload. Without an endpoint nothing is sent, log lines carry no
// trace ids, and no OpenTelemetry module but the API is even loaded.
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setAgentTools } from "../e2e/support.ts";
import {
  addCaller,
  call,
  copyPolicies,
  createSharedSecrets,
  instanceEnv,
  type ScriptedModel,
  type ServeProcess,
  sendMessageBody,
  spawnServe,
  startScriptedModel,
} from "../faults/support.ts";
import { eventually } from "../support/eventually.ts";

type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number };
};

type Receiver = { url: string; bodies: string[]; server: Server };

/** An OTLP/HTTP receiver: keeps every body posted to /v1/traces and answers 200. */
async function startReceiver(): Promise<Receiver> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        bodies.push(Buffer.concat(chunks).toString("utf8"));
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, bodies, server };
}

function spansOf(bodies: string[]): OtlpSpan[] {
  return bodies.flatMap((body) => {
    const parsed = JSON.parse(body) as {
      resourceSpans?: { scopeSpans?: { spans?: OtlpSpan[] }[] }[];
    };
    return (parsed.resourceSpans ?? []).flatMap((r) =>
      (r.scopeSpans ?? []).flatMap((s) => s.spans ?? []),
    );
  });
}

function attribute(span: OtlpSpan, key: string): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
}

// The model calls `stamp`, a declared command that starts a process, then answers.
const toolsYaml =
  "commands:\n  - {name: stamp, description: Print a stamp., mode: fixed, program: /bin/echo, args: [stamped], risk: read-only, disclosure: public, egress: false}\n";

describe("traces from a real server", () => {
  let model: ScriptedModel;
  let policiesDir: string;
  let scratch: string;
  const started: ServeProcess[] = [];
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    model = await startScriptedModel({
      stamp: [{ calls: [{ id: "call_stamp", name: "stamp", arguments: "{}" }] }, { text: "done" }],
    });
    policiesDir = await copyPolicies();
    await writeFile(path.join(policiesDir, "tools.yaml"), toolsYaml);
    await setAgentTools(policiesDir, ["files", "context", "custom"]);
    scratch = await mkdtemp(path.join(os.tmpdir(), "peergate-traces-"));
  });

  afterAll(async () => {
    for (const server of started) await server.kill().catch(() => {});
    for (const r of receivers) r.server.close();
    await model?.close();
    await rm(policiesDir, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
  });

  /** A server of its own, a caller, and one SendMessage whose run calls `stamp`. */
  async function oneRun(
    extraEnv: Record<string, string>,
    headers: Record<string, string> = {},
    beforeStop: (server: ServeProcess) => Promise<void> = async () => {},
  ) {
    const secrets = createSharedSecrets();
    const dataDir = await mkdtemp(path.join(scratch, "data-"));
    const env = {
      ...instanceEnv({ dataDir, policiesDir, modelBaseUrl: model.baseUrl, ...secrets }),
      PEERGATE_SANDBOX: "none",
      PEERGATE_SHUTDOWN_TIMEOUT_MS: "10000",
      ...extraEnv,
    };
    const server = await spawnServe(env, secrets.adminToken, { readyMs: 180_000 });
    started.push(server);
    const created = await addCaller(server, { name: "tracer", kind: "peer", tier: "public" });
    const token = created.credential.secret as string;
    const prompt = `scenario:stamp the-private-words-${randomBytes(6).toString("hex")}`;
    const sent = await call(`${server.url}/a2a`, {
      body: sendMessageBody(prompt),
      headers: { authorization: `Bearer ${token}`, "a2a-version": "1.0", ...headers },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body.result?.task?.status?.state, JSON.stringify(sent.body)).toBe(
      "TASK_STATE_COMPLETED",
    );
    await beforeStop(server);
    // The graceful stop exports what is left (SIGTERM, as systemd sends).
    await server.stop();
    expect(await server.exited).toBe(0);
    return { server, token, prompt, secrets, env };
  }

  it("exports one trace from the caller's traceparent through auth, admission, model, tool, process and finish; a webhook fire and its background run another", {
    timeout: 300_000,
  }, async () => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    // A generic webhook's fire too: answered 202 at once, its run going on in the background.
    let hookToken = "";
    let hookRunId = "";
    const { server, token, prompt, secrets } = await oneRun(
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "peergate-under-test" },
      { traceparent: `00-${traceId}-${callerSpanId}-01` },
      async (server) => {
        const hook = await addCaller(server, {
          name: "hook",
          kind: "webhook",
          promptTemplate: "CI says: {{payload}}",
        });
        hookToken = hook.credential.secret;
        const fired = await call(`${server.url}/webhooks/hook`, {
          body: { build: "green" },
          headers: { authorization: `Bearer ${hookToken}` },
        });
        expect(fired.status, JSON.stringify(fired.body)).toBe(202);
        hookRunId = fired.body.runId;
        await eventually(
          "the webhook's run to complete",
          async () => {
            const run = await server.admin("GET", `/runs/${hookRunId}`);
            return run.body?.run?.status === "completed" ? true : undefined;
          },
          { withinMs: 120_000 },
        );
      },
    );

    const all = spansOf(receiver.bodies);
    const spans = all.filter((s) => s.traceId === traceId);
    const named = (name: string) => {
      const found = spans.filter((s) => s.name === name);
      expect(found, `${name} in ${spans.map((s) => s.name).join(", ")}`).toHaveLength(1);
      return found[0] as OtlpSpan;
    };
    const request = named("POST /a2a");
    const auth = named("peergate.authenticate");
    const admit = named("peergate.run.admit");
    const run = named("peergate.run");
    const tool = named("execute_tool stamp");
    const process = named("peergate.sandbox.process");
    const finish = named("peergate.run.finish");
    const models = spans.filter((s) => attribute(s, "gen_ai.operation.name") === "chat");
    expect(models).toHaveLength(2);

    // One trace, the caller's, and the tree as a request makes it.
    for (const span of [request, auth, admit, run, tool, process, finish, ...models]) {
      expect(span.traceId, span.name).toBe(traceId);
    }
    expect(request.parentSpanId).toBe(callerSpanId);
    expect(request.kind).toBe(2); // SERVER
    expect(auth.parentSpanId).toBe(request.spanId);
    expect(admit.parentSpanId).toBe(request.spanId);
    expect(run.parentSpanId).toBe(request.spanId);
    for (const m of models) expect(m.parentSpanId, m.name).toBe(run.spanId);
    expect(tool.parentSpanId).toBe(run.spanId);
    expect(process.parentSpanId).toBe(tool.spanId);
    expect(finish.parentSpanId).toBe(run.spanId);

    // What the spans say: conventions' names, no content.
    expect(attribute(request, "http.route")).toBe("/a2a");
    expect(attribute(request, "http.response.status_code")).toBe(200);
    expect(attribute(auth, "peergate.caller.name")).toBe("tracer");
    expect(attribute(run, "peergate.run.outcome")).toBe("completed");
    expect(attribute(tool, "gen_ai.tool.name")).toBe("stamp");
    expect(attribute(tool, "gen_ai.tool.call.arguments")).toBeUndefined();
    expect(attribute(process, "process.executable.name")).toBe("echo");
    expect(attribute(process, "process.exit.code")).toBe(0);
    const first = models[0] as OtlpSpan;
    expect(attribute(first, "gen_ai.request.model")).toBe("faults");
    expect(attribute(first, "gen_ai.usage.input_tokens")).toBe(21);
    expect(attribute(first, "gen_ai.input.messages")).toBeUndefined();
    expect(receiver.bodies.join("")).toContain("peergate-under-test");

    // Nothing secret, and not the prompt, anywhere in what was exported.
    const payload = receiver.bodies.join("\n");
    for (const secret of [
      token,
      secrets.adminToken,
      secrets.secretKey,
      "faults-model-key",
      prompt,
      prompt.split(" ")[1] as string,
    ]) {
      expect(payload).not.toContain(secret);
    }
    expect(payload.toLowerCase()).not.toContain("bearer");

    // The webhook's request, authentication, accept and background run: one trace of its own.
    const hookRequest = all.find((s) => s.name === "POST /webhooks/:name") as OtlpSpan;
    expect(hookRequest, all.map((s) => s.name).join(", ")).toBeDefined();
    const hookTrace = all.filter((s) => s.traceId === hookRequest.traceId);
    const inHook = (name: string) => hookTrace.find((s) => s.name === name) as OtlpSpan;
    expect(attribute(inHook("peergate.authenticate"), "peergate.surface")).toBe("webhook");
    expect(inHook("peergate.authenticate").parentSpanId).toBe(hookRequest.spanId);
    expect(attribute(inHook("peergate.webhook.accept"), "peergate.run.id")).toBe(hookRunId);
    expect(inHook("peergate.webhook.accept").parentSpanId).toBe(hookRequest.spanId);
    expect(attribute(inHook("peergate.run"), "peergate.run.id")).toBe(hookRunId);
    expect(attribute(inHook("peergate.run"), "peergate.run.outcome")).toBe("completed");
    expect(payload).not.toContain(hookToken);
    expect(payload).not.toContain("green");

    // The log lines of the run carry its trace.
    const runStarted = server.logs
      .map((line) => {
        try {
          return JSON.parse(line) as Record<string, unknown>;
        } catch {
          return {};
        }
      })
      .find((record) => record.msg === "run started");
    expect(runStarted?.trace_id).toBe(traceId);
    expect(runStarted?.span_id).toBe(request.spanId);
  });

  it("without an endpoint writes no trace ids and loads nothing of OpenTelemetry but the API", {
    timeout: 300_000,
  }, async () => {
    // Any OpenTelemetry module the server resolves is written down by a resolve hook.
    const loaded = path.join(scratch, "loaded.txt");
    const hook = path.join(scratch, "record-loads.mjs");
    await writeFile(loaded, "");
    await writeFile(
      hook,
      `import { registerHooks } from "node:module";
import { appendFileSync } from "node:fs";
registerHooks({
  resolve(specifier, context, next) {
    if (specifier.startsWith("@opentelemetry/")) appendFileSync(${JSON.stringify(loaded)}, specifier + "\\n");
    return next(specifier, context);
  },
});
`,
    );
    const { server } = await oneRun(
      { NODE_OPTIONS: `--import=${hook}` },
      { traceparent: `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01` },
    );
    expect(server.logs.join("\n")).not.toContain("trace_id");
    expect(server.logs.join("\n")).not.toContain("exporting traces");
    const specifiers = new Set((await readFile(loaded, "utf8")).split("\n").filter(Boolean));
    expect([...specifiers]).toEqual(["@opentelemetry/api"]);
  });
});
