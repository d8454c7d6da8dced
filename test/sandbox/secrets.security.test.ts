// Every secret the server holds stays out of what a run produces, through the real server: a
// scripted model has a sandboxed process print each one — the sealed GitHub webhook secret's
// plaintext, an operator token, a peer's token, the admin token, the secret key, the model API
// key — from a file left in the workspace (framed by other characters, on stdout and stderr),
// from an allowlisted variable holding one, from /proc; and reads that file with read_file. None of them
// may appear in what the model is sent, in the task the caller gets back, in any log line (at
// debug), or in the database's run records and audit trail.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { a2aTasks, auditEvents, runs, toolCalls } from "../../src/db/schema.ts";
import { createLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import {
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  readToolResults,
  removeTempDirs,
  type Scenarios,
  type ScriptedModel,
  scriptedModelId,
  setAgentTools,
  startScriptedModel,
  userMessage,
} from "../e2e/support.ts";
import { describeWithBwrap } from "./support.ts";

const scenarios: Scenarios = {};
const shared = createSharedSecrets();
const modelApiKey = `model-key-${"k".repeat(24)}`;
const logs: string[] = [];

let model: ScriptedModel;
let server: RunningServer;
let workspace: string;
let dataDir: string;

async function admin(method: string, pathname: string, body?: unknown, headers = {}) {
  const response = await fetch(`${server.url}/admin/v1${pathname}`, {
    method,
    headers: {
      authorization: `Bearer ${shared.adminToken}`,
      "content-type": "application/json",
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as any };
}

function bash(id: string, script: string) {
  return {
    id,
    name: "sh",
    arguments: JSON.stringify({ program: "bash", arguments: ["-c", script] }),
  };
}

describeWithBwrap("secrets the server holds, printed from inside the sandbox", () => {
  beforeAll(async () => {
    model = await startScriptedModel(scenarios);
    const policiesDir = await copyPolicies();
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `commands:
  - {name: sh, description: Run bash., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: false, envAllowlist: [CI_SETTING]}
`,
    );
    await setAgentTools(policiesDir, ["files", "context", "custom"]);
    workspace = await createWorkspace();
    const { mkdtemp } = await import("node:fs/promises");
    const os = await import("node:os");
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-secrets-data-"));
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      PEERGATE_HOST: "127.0.0.1",
      PEERGATE_PORT: "0",
      PEERGATE_DATA_DIR: dataDir,
      PEERGATE_POLICIES_DIR: policiesDir,
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_ADMIN_TOKEN: shared.adminToken,
      PEERGATE_SECRET_KEY: shared.secretKey,
      PEERGATE_MODEL: scriptedModelId,
      PEERGATE_MODEL_BASE_URL: model.baseUrl,
      PEERGATE_MODEL_API_KEY: modelApiKey,
      PEERGATE_SHUTDOWN_TIMEOUT_MS: "2000",
      // An operator passes a setting to the tool that happens to hold the admin token.
      CI_SETTING: shared.adminToken,
    };
    const logger = createLogger({ level: "debug", write: (line) => logs.push(line) });
    server = await startServer(loadConfig(env, dataDir), logger, env);
  });

  afterAll(async () => {
    await server?.stop();
    await model?.close();
    await removeTempDirs();
    if (dataDir) await (await import("node:fs/promises")).rm(dataDir, { recursive: true });
  });

  it("none of them reaches the model, the caller, the logs or the database", async () => {
    const github = await admin("POST", "/callers", {
      name: "repo",
      kind: "github",
      promptTemplate: "Triage: {{payload}}",
    });
    expect(github.status, JSON.stringify(github.body)).toBe(201);
    const webhookSecret = github.body.credential.secret as string;
    expect(webhookSecret).toMatch(/^pgh_/);
    const operatorToken = await createOperatorToken({ services: server.services, actor: "system" });
    const peer = await admin(
      "POST",
      "/callers",
      { name: "attacker", kind: "peer", tier: "private", allow: ["sh", "read_file"] },
      { "x-peergate-operator-token": operatorToken },
    );
    expect(peer.status, JSON.stringify(peer.body)).toBe(201);
    const peerToken = peer.body.credential.secret as string;

    const secrets = {
      webhookSecret,
      operatorToken,
      peerToken,
      adminToken: shared.adminToken,
      secretKey: shared.secretKey,
      modelApiKey,
    };
    // Left in the workspace by someone earlier.
    await writeFile(
      path.join(workspace, "leaked.env"),
      Object.entries(secrets)
        .map(([name, value]) => `${name}=${value}`)
        .join("\n"),
    );
    scenarios.leak = [
      {
        calls: [
          // Framed by other characters, and to stderr too; never spelled in the arguments (what
          // the model wrote is its own, and is recorded as such).
          bash(
            "c_print",
            "sed 's/^[^=]*=//' leaked.env | while read -r s; do printf 'x%sy\\n' \"$s\"; echo \"$s\" >&2; done",
          ),
          bash("c_file", 'cat leaked.env; while read -r line; do echo "$line"; done < leaked.env'),
          bash(
            "c_env",
            "env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ",
          ),
          { id: "c_read", name: "read_file", arguments: JSON.stringify({ path: "leaked.env" }) },
        ],
      },
      { text: "done" },
    ];

    const {
      ClientFactory,
      ClientFactoryOptions,
      DefaultAgentCardResolver,
      JsonRpcTransportFactory,
    } = await import("@a2a-js/sdk/client");
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("Authorization", `Bearer ${peerToken}`);
      return fetch(input, { ...init, headers });
    };
    const client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    ).createFromUrl(server.url);
    const task = asTask(
      await client.sendMessage({ message: userMessage("scenario:leak go") } as never),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    const results = readToolResults(model.requestsOf("leak").at(-1));
    expect([...results.keys()].sort()).toEqual(["c_env", "c_file", "c_print", "c_read"]);
    // The process did print them: each one came out, as the marker.
    expect(results.get("c_print")).toContain("x[redacted]y");
    expect(results.get("c_file")).toContain("webhookSecret=[redacted]");
    expect(results.get("c_env")).toContain("CI_SETTING=[redacted]");
    expect(results.get("c_read")).toContain("operatorToken=[redacted]");

    const db = server.services.db;
    const places = {
      "what the model was sent": JSON.stringify(model.requestsOf("leak")),
      "the task the caller got": JSON.stringify(task),
      "the logs": logs.join("\n"),
      "the audit trail": JSON.stringify(await db.select().from(auditEvents)),
      "the run records": JSON.stringify([
        await db.select().from(runs),
        await db.select().from(toolCalls),
        await db.select().from(a2aTasks),
      ]),
    };
    expect(logs.length).toBeGreaterThan(0);
    for (const [where, text] of Object.entries(places)) {
      for (const [name, value] of Object.entries(secrets)) {
        expect(text.includes(value), `${name} in ${where}`).toBe(false);
      }
    }
  });
});
