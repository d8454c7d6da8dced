// The policy files (agent.yaml, tools.yaml, models.yaml) are read again while the server runs,
// on change or SIGHUP: a new agent.yaml changes the ceilings at once; a bad file keeps the policy
// in force and the log says which file, which field and what to do; a run started before a reload
// finishes with the tools it started with; a reload that would let the agent start processes runs
// the sandbox check first and is refused when it fails. Prices (models.yaml) reload the same way:
// a bad price file keeps the prices in force, and a run keeps the price it started with.
import { cp, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { loadPolicies } from "../../src/load-policies.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { watchPolicies } from "../../src/policy-reload.ts";
import { findModelPrice } from "../../src/runs/prices.ts";
import { prepareSandbox } from "../../src/sandbox/prepare-sandbox.ts";
import type { SandboxBackend } from "../../src/sandbox/types.ts";
import { startServer } from "../../src/server.ts";
import { startsProcesses } from "../../src/tools/starts-processes.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { repoPoliciesDir } from "../support/app.ts";
import {
  countAssistantTurns,
  createOpenAiStub,
  type OpenAiStub,
  readContent,
} from "../support/openai-stub.ts";

/** A logger whose lines can be awaited: `next("policies reloaded")` resolves at that message. */
function awaitableLogger() {
  const waiting: { msg: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: "info",
    write: (line) => {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      lines.push(parsed);
      for (const w of waiting.splice(0)) {
        if (parsed.msg === w.msg) w.resolve(parsed);
        else waiting.push(w);
      }
    },
  });
  const next = (msg: string) =>
    new Promise<Record<string, unknown>>((resolve) => waiting.push({ msg, resolve }));
  return { logger, next, lines };
}

/** As an editor saves: a new file renamed over the old one, so no reader sees half of it. */
async function save(file: string, text: string) {
  await writeFile(`${file}.tmp`, text);
  await rename(`${file}.tmp`, file);
}

const priced = (model: string) =>
  `models:\n  "${model}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`;

/** An A2A SendMessage of `text` with `params` beside the message; the run its task names. */
async function sendMessage(
  url: string,
  secret: string,
  text: string,
  params: Record<string, unknown> = {},
): Promise<string> {
  const res = await fetch(`${url}/a2a`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${secret}`,
      "content-type": "application/json",
      "a2a-version": "1.0",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: {
        ...params,
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] },
      },
    }),
  });
  const answer = (await res.json()) as {
    result: { task: { metadata: { peergate: { runId: string } } } };
  };
  return answer.result.task.metadata.peergate.runId;
}

/** A server on `policies` whose model is the stub at `baseUrl`, and its admin token. */
async function startServerOn(input: {
  dir: string;
  policies: string;
  model: string;
  baseUrl: string;
  logger: Logger;
}) {
  const { dir } = input;
  const env = {
    PEERGATE_DATA_DIR: path.join(dir, "data"),
    PEERGATE_WORKSPACE: path.join(dir, "workspace"),
    PEERGATE_POLICIES_DIR: input.policies,
    PEERGATE_PORT: "0",
    PEERGATE_MODEL: input.model,
    PEERGATE_MODEL_BASE_URL: input.baseUrl,
    PEERGATE_SANDBOX: "none",
  };
  const server = await startServer(loadConfig(env, dir), input.logger);
  const adminToken = (await readFile(path.join(dir, "data", "admin-token"), "utf8")).trim();
  return { server, adminToken };
}

const noTools: ToolRuntime = { tools: new Map(), close: async () => {} };

const reloaded = "policies reloaded";
const refused = "policies not reloaded: a policy file is invalid; the policy in force stays";

describe("policy reload in a running server", () => {
  let dir: string;
  let policies: string;
  let agentFile: string;
  let shipped: string;
  let stub: OpenAiStub;
  let server: Awaited<ReturnType<typeof startServer>>;
  let adminToken: string;
  let secret: string;
  let log: ReturnType<typeof awaitableLogger>;
  let releaseSlow: () => void = () => {};
  const slowHeld = new Promise<void>((resolve) => {
    releaseSlow = resolve;
  });
  let slowArrived: () => void = () => {};
  const slowSeen = new Promise<void>((resolve) => {
    slowArrived = resolve;
  });

  const admin = async (method: string, pathname: string, body?: unknown) => {
    const res = await fetch(`${server.url}/admin/v1${pathname}`, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  /** The tools a caller of `tier` would be admitted, as the admin API previews them. */
  const ceilingTools = async (tier = "internal") => {
    const preview = await admin("POST", "/ceiling/preview", { tier });
    expect(preview.status).toBe(200);
    return preview.body.admitted as string[];
  };
  const send = (text: string) => sendMessage(server.url, secret, text);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-policy-reload-"));
    policies = path.join(dir, "policies");
    await cp(repoPoliciesDir, policies, { recursive: true });
    agentFile = path.join(policies, "agent.yaml");
    shipped = await readFile(agentFile, "utf8");
    await save(path.join(policies, "models.yaml"), priced("openai-compatible:local"));
    stub = createOpenAiStub();
    const baseUrl = await stub.listen();
    stub.respondWith(async (request) => {
      const user = readContent(request.messages.find((m) => m.role === "user"));
      if (user.startsWith("slow") && countAssistantTurns(request) === 0) {
        slowArrived();
        await slowHeld;
        return { calls: [{ id: "call_time", name: "get_time", arguments: "{}" }] };
      }
      return { text: "done" };
    });
    log = awaitableLogger();
    ({ server, adminToken } = await startServerOn({
      dir,
      policies,
      model: "openai-compatible:local",
      baseUrl,
      logger: log.logger,
    }));
    const created = await admin("POST", "/callers", { name: "reader", kind: "peer" });
    secret = (created.body.credential as { secret: string }).secret;
  });
  afterAll(async () => {
    releaseSlow();
    await server?.stop();
    await stub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("a saved agent.yaml changes the ceiling at once, no restart", async () => {
    expect(await ceilingTools()).toContain("ls");
    const done = log.next(reloaded);
    await save(agentFile, shipped.replace(/^deniedTools: \[\]$/m, "deniedTools: [ls]"));
    const line = await done;
    expect(line.files).toEqual([agentFile]);
    expect(await ceilingTools()).not.toContain("ls");
  });

  it("a broken file keeps the policy in force and the log names the file, the field and the fix", async () => {
    const before = await ceilingTools();
    const why = log.next(refused);
    await save(agentFile, `${shipped}\nunknownSetting: 1\n`);
    const line = await why;
    expect(line.file).toBe(agentFile);
    expect(String(line.field)).toContain("unknownSetting");
    expect(String(line.fix)).toContain("the policy in force stays");
    expect(await ceilingTools()).toEqual(before);
    expect(await ceilingTools()).not.toContain("ls");
  });

  it("SIGHUP reads the files again", async () => {
    const done = log.next(reloaded);
    await writeFile(agentFile, shipped);
    process.kill(process.pid, "SIGHUP");
    await done;
    expect(await ceilingTools()).toContain("ls");
  });

  it("a run started before a reload finishes with the tools it started with", async () => {
    const pending = send("slow: what time is it?");
    await slowSeen;
    // get_time is taken away while the run's model is thinking about calling it.
    const done = log.next(reloaded);
    await save(agentFile, shipped.replace(/^deniedTools: \[\]$/m, "deniedTools: [get_time]"));
    await done;
    expect(await ceilingTools("public")).not.toContain("get_time");
    releaseSlow();
    const runId = await pending;
    const run = await admin("GET", `/runs/${runId}`);
    const record = run.body.run as {
      status: string;
      toolSet: string[];
      toolCalls: { tool: string; status: string }[];
    };
    expect(record.status).toBe("completed");
    expect(record.toolSet).toContain("get_time");
    expect(record.toolCalls.map((c) => [c.tool, c.status])).toEqual([["get_time", "completed"]]);
    // A run started after the reload is not offered it.
    stub.requests.splice(0);
    const later = await send("quick: and now?");
    const laterRun = await admin("GET", `/runs/${later}`);
    expect((laterRun.body.run as { toolSet: string[] }).toolSet).not.toContain("get_time");
    const offered = stub.requests.at(-1)?.body.tools?.map((t) => t.function.name) ?? [];
    expect(stub.requests.length).toBeGreaterThan(0);
    expect(offered).not.toContain("get_time");
  });
});

describe("a reload that would start processes", () => {
  /** A bwrap-kind backend whose probe always fails, as on a machine without bubblewrap. */
  const brokenBackend: SandboxBackend = {
    kind: "bwrap",
    confines: true,
    wrap: () => ({ command: "/nonexistent/bwrap", args: [], cwd: "/", env: {} }),
  };

  it("runs the sandbox check first and is refused when it fails", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "peergate-policy-sandbox-"));
    try {
      await cp(repoPoliciesDir, dir, { recursive: true });
      const agentFile = path.join(dir, "agent.yaml");
      const shipped = await readFile(agentFile, "utf8");
      const { logger, lines } = awaitableLogger();
      const initial = await loadPolicies(dir);
      let checked = 0;
      const live = await watchPolicies({
        dir,
        initial,
        tools: noTools,
        logger,
        signals: false,
        checkSandbox: async (next) => {
          checked += 1;
          await prepareSandbox({
            kind: "bwrap",
            processTools: startsProcesses(next),
            logger,
            backend: brokenBackend,
          });
        },
        buildTools: async () => noTools,
      });
      try {
        await writeFile(agentFile, shipped.replace(/^tools: \[.*\]$/m, "tools: [files, shell]"));
        const result = await live.reload();
        expect(checked).toBe(1);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.problems[0]?.file).toBe(agentFile);
        expect(result.problems[0]?.problem).toContain("the sandbox does not work here");
        expect(live.current).toBe(initial);
        expect(live.view.agent).toBe(initial.agent);
        expect(lines.some((l) => l.msg === refused && l.file === agentFile)).toBe(true);

        // The same change with a working sandbox is applied, with a new agent identity.
        await writeFile(agentFile, shipped);
        const applied = await watchPolicies({
          dir,
          initial,
          tools: noTools,
          logger,
          signals: false,
          checkSandbox: async () => {},
          buildTools: async () => noTools,
        });
        await writeFile(agentFile, shipped.replace(/^tools: \[.*\]$/m, "tools: [files, shell]"));
        const ok = await applied.reload();
        expect(ok.ok).toBe(true);
        expect(applied.view.agent).not.toBe(initial.agent);
        expect(applied.view.agent.version).not.toBe(initial.agent.version);
        await applied.close();
      } finally {
        await live.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("price reload", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-prices-"));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("reloads on SIGHUP; a bad file keeps the old prices", async () => {
    const policiesDir = path.join(dir, "watched");
    await cp(repoPoliciesDir, policiesDir, { recursive: true });
    const file = path.join(policiesDir, "models.yaml");
    await writeFile(file, priced("a:one"));
    const { logger, next } = awaitableLogger();
    const live = await watchPolicies({
      dir: policiesDir,
      initial: await loadPolicies(policiesDir),
      tools: noTools,
      logger,
      checkSandbox: async () => {},
      buildTools: async () => noTools,
    });
    try {
      expect(findModelPrice(live.prices, "a:one")).toBeDefined();
      const reloaded = next("prices reloaded");
      await save(file, priced("a:two"));
      process.kill(process.pid, "SIGHUP");
      await reloaded;
      expect(findModelPrice(live.prices, "a:two")).toBeDefined();
      expect(findModelPrice(live.prices, "a:one")).toBeUndefined();

      await save(file, "models:\n  a:three: { inputUsdPerMillionTokens: -1 }\n");
      const refused = await live.reload();
      expect(refused.ok).toBe(false);
      expect(findModelPrice(live.prices, "a:two")).toBeDefined();
    } finally {
      await live.close();
    }
  });

  describe("in a running server", () => {
    let stub: OpenAiStub;
    let baseUrl: string;
    beforeAll(async () => {
      stub = createOpenAiStub();
      baseUrl = await stub.listen();
      stub.respondWith(() => ({ text: "done" }));
    });
    afterAll(async () => stub?.close());

    it("an unpriced local model stops refusing runs once a price line is added, no restart", async () => {
      const policies = path.join(dir, "policies");
      await cp(repoPoliciesDir, policies, { recursive: true });
      const { logger, next } = awaitableLogger();
      const { server, adminToken: token } = await startServerOn({
        dir,
        policies,
        model: "openai-compatible:local-qwen",
        baseUrl,
        logger,
      });
      try {
        const created = await fetch(`${server.url}/admin/v1/callers`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "local", kind: "peer" }),
        });
        const secret = ((await created.json()) as { credential: { secret: string } }).credential
          .secret;
        const send = async () => {
          const runId = await sendMessage(server.url, secret, "hi", {
            configuration: { returnImmediately: false },
          });
          const run = await fetch(`${server.url}/admin/v1/runs/${runId}`, {
            headers: { authorization: `Bearer ${token}` },
          });
          return JSON.stringify(await run.json());
        };
        expect(await send()).toContain("cost-unknown");
        const reloaded = next("prices reloaded");
        const file = path.join(policies, "models.yaml");
        await save(file, priced("openai-compatible:local-qwen"));
        await reloaded;
        expect(await send()).not.toContain("cost-unknown");
      } finally {
        await server.stop();
      }
    });
  });
});
