// A stop is a clean stop inside the sandbox: a cancelled or timed-out command gets SIGTERM in the
// sandbox (its trap runs and can tidy the persistent workspace), then SIGKILL after the grace,
// then the sandbox goes. And a forced exit of the real server (a second SIGTERM) takes every
// running command with it at once, under every backend.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { processDefaults } from "../../src/tools/run-process.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { setAgentTools } from "../e2e/support.ts";
import {
  a2a,
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
import { buildPolicies, callTool, expectFailure, silentLogger } from "../tools/support.ts";
import {
  bwrapBackend,
  createOperatorTokenOf,
  describeWithBwrap,
  hostProcessesWith,
  makeSandboxWorkspace,
} from "./support.ts";

describeWithBwrap("a stop inside the bwrap sandbox", () => {
  let workspace: string;
  let runtime: ToolRuntime;

  beforeAll(async () => {
    workspace = await makeSandboxWorkspace("peergate-clean-stop-");
    runtime = await createToolRuntime({
      policies: buildPolicies(
        parseToolsPolicy(
          "commands:\n  - {name: sh, description: Run bash., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: false}\n",
          "tools.yaml",
          builtinDescriptors,
        ),
      ),
      workspace,
      dataDir: path.join(os.tmpdir(), "peergate-clean-stop-no-data"),
      env: { PATH: "/usr/bin:/bin" },
      sandbox: bwrapBackend,
      logger: silentLogger,
    });
  });

  afterAll(async () => {
    await runtime?.close();
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  /** Runs `script`, cancels it once it wrote `ready`, and returns what the tool answered. */
  async function cancelOnceReady(script: string, ready: string): Promise<string> {
    const controller = new AbortController();
    const call = callTool(
      runtime,
      "sh",
      { program: "bash", arguments: ["-c", script] },
      controller.signal,
    );
    await eventually("the command to say it is ready", () => readFile(path.join(workspace, ready)));
    controller.abort();
    return expectFailure(await call, "interrupted");
  }

  it("sends SIGTERM to the command, whose trap runs and tidies the workspace", async () => {
    const out = await cancelOnceReady(
      "trap 'mv half-written.tmp /tmp/; echo clean > stopped.txt; exit 0' TERM; echo x > half-written.tmp; echo ready > ready-1; sleep 300 & wait",
      "ready-1",
    );
    expect(await readFile(path.join(workspace, "stopped.txt"), "utf8")).toBe("clean\n");
    await expect(readFile(path.join(workspace, "half-written.tmp"))).rejects.toThrow(/ENOENT/);
    expect(out).toContain("The command was stopped");
  });

  it("kills a command that ignores SIGTERM after the grace, and the sandbox is gone", async () => {
    const marker = `ignores-term-${process.pid}-${Date.now()}`;
    const started = performance.now();
    await cancelOnceReady(
      `trap '' TERM; echo ready > ready-2; exec -a ${marker} sleep 300`,
      "ready-2",
    );
    // Not before the grace (the command had its chance), and nothing of it is left.
    expect(performance.now() - started).toBeGreaterThanOrEqual(processDefaults.killGraceMs);
    await eventually(
      "no process of the command to be left",
      async () => (await hostProcessesWith(marker)).length === 0,
    );
  });
});

// ---------------------------------------------------------------- the force path

function forcePathSuite(backend: "none" | "bwrap") {
  let model: ScriptedModel;
  let policiesDir: string;
  let dataDir: string;
  let workspace: string;
  let server: ServeProcess | undefined;
  const marker = `forced-${backend}-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    model = await startScriptedModel({
      hang: [{ calls: [{ id: "call_hang", name: "hang", arguments: "{}" }] }, { text: "done" }],
    });
    policiesDir = await copyPolicies();
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `commands:\n  - {name: hang, description: Wait., mode: fixed, program: /bin/bash, args: ["-c", "trap '' TERM INT; exec -a ${marker} sleep 300"], risk: read-only, disclosure: public, egress: false}\n`,
    );
    await setAgentTools(policiesDir, ["files", "context", "custom"]);
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-force-data-"));
    workspace = await makeSandboxWorkspace("peergate-force-ws-");
  });

  afterAll(async () => {
    await server?.kill();
    for (const pid of await hostProcessesWith(marker)) process.kill(pid, "SIGKILL");
    await model?.close();
    await rm(dataDir, { recursive: true, force: true });
    await rm(workspace, { recursive: true, force: true });
    await rm(policiesDir, { recursive: true, force: true });
  });

  it("a second SIGTERM exits at once and kills every running command", {
    timeout: 300_000,
  }, async () => {
    const secrets = createSharedSecrets();
    const env = {
      ...instanceEnv({ dataDir, policiesDir, modelBaseUrl: model.baseUrl, workspace, ...secrets }),
      PEERGATE_SANDBOX: backend,
      PEERGATE_SHUTDOWN_TIMEOUT_MS: "60000",
    };
    // A loaded machine can take most of a minute to start one.
    server = await spawnServe(env, secrets.adminToken, { readyMs: 180_000 });
    // Allowing a tool widens the caller: as the operator would, through the control socket.
    const operatorToken = await createOperatorTokenOf(dataDir);
    const created = await server.admin(
      "POST",
      "/callers",
      { name: "waiter", kind: "peer", tier: "public", allow: ["hang"] },
      { "x-peergate-operator-token": operatorToken },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const sent = await a2a(
      server.url,
      created.body.credential.secret,
      sendMessageBody("scenario:hang wait", { returnImmediately: true }),
    );
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    await eventually(
      "the command to be running",
      async () => (await hostProcessesWith(marker)).length > 0,
    );
    // The command ignores SIGTERM and SIGINT: only a kill ends it. The server's own process
    // (not its group: the commands run in groups of their own) gets two SIGTERMs.
    // Two signals sent together arrive as one: the second goes once the first was taken.
    const pid = server.child.pid as number;
    process.kill(pid, "SIGTERM");
    const logs = server.logs;
    await eventually("the server to log that it is shutting down", async () =>
      logs.some((line) => line.includes("shutting down")),
    );
    process.kill(pid, "SIGTERM");
    expect(await server.exited).toBe(130);
    await eventually(
      "no process of the command to be left",
      async () => (await hostProcessesWith(marker)).length === 0,
    );
  });
}

describe("the force path of a real server, PEERGATE_SANDBOX=none", () => forcePathSuite("none"));
describeWithBwrap("the force path of a real server, PEERGATE_SANDBOX=bwrap", () =>
  forcePathSuite("bwrap"),
);
