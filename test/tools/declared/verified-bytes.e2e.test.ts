// The bytes verified are the bytes run, through the real server (bwrap, the default): an A2A
// caller's runs call a script tool and a tool whose program is pinned in the workspace, while the
// files are changed, restored, and swapped back and forth by another process. The changed bytes
// never run; a changed file's tools are refused, audited (`tool.stage`, event `refused`), and stay
// refused once the file is restored, until SIGHUP reloads the policies.
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.ts";
import { createLogger } from "../../../src/log.ts";
import { type RunningServer, startServer } from "../../../src/server.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  readToolResults,
  removeTempDirs,
  type Scenarios,
  type ScriptedModel,
  scriptedModelId,
  setAgentTools,
  startScriptedModel,
  userMessage,
} from "../../e2e/support.ts";
import { describeWithBwrap } from "../../sandbox/support.ts";
import { eventually } from "../../support/eventually.ts";

const original = "#!/bin/sh\necho original\n";
const changed = "#!/bin/sh\necho CHANGED; echo ran >> changed-ran.log\n";
const originalTool = "#!/bin/sh\necho tool-original\n";
const changedTool = "#!/bin/sh\necho TOOL-CHANGED; echo ran >> changed-ran.log\n";
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

const scenarios: Scenarios = {
  verified: [
    {
      calls: [
        { id: "c_check", name: "check", arguments: "{}" },
        { id: "c_pinned", name: "pinned", arguments: "{}" },
      ],
    },
    { text: "done" },
  ],
};

const secrets = createSharedSecrets();
let model: ScriptedModel;
let server: RunningServer;
let workspace: string;
let dataDir: string;
let script: string;
let program: string;
let attacker: ChildProcess | undefined;
const logs: string[] = [];

async function admin(
  method: string,
  pathname: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(`${server.url}/admin/v1${pathname}`, {
    method,
    headers: {
      authorization: `Bearer ${secrets.adminToken}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describeWithBwrap("verified scripts and pins through the real server", () => {
  let secret: string;

  beforeAll(async () => {
    model = await startScriptedModel(scenarios);
    const policiesDir = await copyPolicies();
    workspace = await createWorkspace();
    await mkdir(path.join(workspace, "scripts"));
    await mkdir(path.join(workspace, "bin"));
    script = path.join(workspace, "scripts", "check.sh");
    program = path.join(workspace, "bin", "tool");
    await writeFile(script, original);
    await writeFile(program, originalTool);
    await chmod(program, 0o755);
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `executables:
  - {id: tool, path: "\${workspace}/bin/tool", sha256: "${sha256(originalTool)}"}
commands:
  - {name: check, description: Run the checks., mode: script, script: scripts/check.sh, interpreter: /bin/sh, risk: high-risk, disclosure: public, egress: false}
  - {name: pinned, description: Run the tool., mode: fixed, program: tool, risk: high-risk, disclosure: public, egress: false}
`,
    );
    await setAgentTools(policiesDir, ["files", "context", "custom"]);
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-verified-data-"));
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      PEERGATE_HOST: "127.0.0.1",
      PEERGATE_PORT: "0",
      PEERGATE_DATA_DIR: dataDir,
      PEERGATE_POLICIES_DIR: policiesDir,
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_ADMIN_TOKEN: secrets.adminToken,
      PEERGATE_SECRET_KEY: secrets.secretKey,
      PEERGATE_MODEL: scriptedModelId,
      PEERGATE_MODEL_BASE_URL: model.baseUrl,
      PEERGATE_MODEL_API_KEY: "e2e-model-key",
      PEERGATE_SHUTDOWN_TIMEOUT_MS: "2000",
    };
    const logger = createLogger({ level: "info", write: (line) => logs.push(line) });
    server = await startServer(loadConfig(env, dataDir), logger, env);
    const peer = await addCaller({ admin, server } as unknown as Peergate, {
      name: "verified-peer",
      kind: "peer",
      tier: "public",
      allow: ["check", "pinned"],
    });
    secret = peer.secret;
  }, 180_000);

  afterAll(async () => {
    attacker?.kill("SIGKILL");
    await server?.stop();
    await model?.close();
    await rm(dataDir, { recursive: true, force: true });
    await removeTempDirs();
  });

  /** One run: both tools called once; their results as the model read them. */
  const run = async () => {
    const {
      ClientFactory,
      ClientFactoryOptions,
      DefaultAgentCardResolver,
      JsonRpcTransportFactory,
    } = await import("@a2a-js/sdk/client");
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("Authorization", `Bearer ${secret}`);
      return fetch(input, { ...init, headers });
    };
    const client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    ).createFromUrl(server.url);
    const task = asTask(
      await client.sendMessage({ message: userMessage("scenario:verified go") } as never),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const results = readToolResults(model.requestsOf("verified").at(-1));
    return { check: results.get("c_check") ?? "", pinned: results.get("c_pinned") ?? "" };
  };

  const changedRan = () => existsSync(path.join(workspace, "changed-ran.log"));

  it("runs the loaded bytes, refuses and audits a change, and stays refused until SIGHUP", async () => {
    const first = await run();
    expect(first.check).toContain("original");
    expect(first.pinned).toContain("tool-original");

    await writeFile(script, changed);
    await writeFile(program, changedTool);
    const refused = await run();
    expect(refused.check).toContain("The script of check changed since peergate loaded it");
    expect(refused.pinned).toContain("changed since peergate loaded it");

    await writeFile(script, original);
    await writeFile(program, originalTool);
    const restored = await run();
    expect(restored.check).toContain("The script of check changed since peergate loaded it");
    expect(restored.pinned).toContain("changed since peergate loaded it");
    expect(changedRan()).toBe(false);

    const audit = await admin("GET", "/audit?kind=tool.stage&limit=1000");
    expect(audit.status).toBe(200);
    const refusals = audit.body.events
      .filter((e: { data: { event: string } }) => e.data.event === "refused")
      .map((e: { data: { tool: string; reason: string } }) => e.data);
    expect(refusals.filter((r: { tool: string }) => r.tool === "check")).toHaveLength(2);
    expect(refusals.filter((r: { tool: string }) => r.tool === "pinned")).toHaveLength(2);
    for (const r of refusals) expect(r.reason).toMatch(/changed since peergate loaded it/);
    expect((await admin("GET", "/audit/verify")).body.ok).toBe(true);

    process.kill(process.pid, "SIGHUP");
    await eventually("the reload to say the pinned program changed", async () =>
      logs.some((l) => l.includes("pinned program changed were read")),
    );
    const reloaded = await run();
    expect(reloaded.check).toContain("original");
    expect(reloaded.check).not.toContain("changed since");
    expect(reloaded.pinned).toContain("tool-original");
  }, 120_000);

  it("never runs the changed bytes while another process swaps the files", async () => {
    const alt = await mkdtemp(path.join(os.tmpdir(), "peergate-verified-alt-"));
    for (const [file, text] of [
      ["script-a", original],
      ["script-b", changed],
      ["tool-a", originalTool],
      ["tool-b", changedTool],
    ] as const) {
      await writeFile(path.join(alt, file), text);
    }
    attacker = spawn(
      "/bin/sh",
      [
        "-c",
        `while :; do cp ${alt}/script-b "$1"; cp ${alt}/tool-b "$2"; cp ${alt}/script-a "$1"; cp ${alt}/tool-a "$2"; done`,
        "attacker",
        script,
        program,
      ],
      { stdio: "ignore" },
    );
    try {
      for (let i = 0; i < 20; i++) {
        const { check, pinned } = await run();
        expect(check).not.toContain("CHANGED");
        expect(pinned).not.toContain("CHANGED");
      }
      expect(changedRan()).toBe(false);
    } finally {
      attacker.kill("SIGKILL");
      await rm(alt, { recursive: true, force: true });
    }
  }, 300_000);
});
