// The sandbox through the real server: an A2A caller's run, driven by a scripted model, calls a
// declared `bash` tool with what an attacker would run — read the data directory and the
// server's environment, write outside the workspace, reach a host listener without egress, leave
// a setsid process behind. The server started with PEERGATE_SANDBOX at its default (bwrap); its
// /readyz says so. Every attempt fails, the admin token never reaches the model, the workspace
// and the data dir are unchanged, and the server keeps answering.
import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
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
  setAgentTools,
  startPeergate,
  startScriptedModel,
  userMessage,
} from "../e2e/support.ts";
import { eventually } from "../support/eventually.ts";
import { describeWithBwrap, hostProcessesWith, snapshotTree } from "./support.ts";

const scenarios: Scenarios = {};
const marker = String(7_900_000 + Math.floor(Math.random() * 99_999));

let model: ScriptedModel;
let peergate: Peergate;
let workspace: string;
let dataDir: string;
let listener: Server;
let connections = 0;
const secrets = createSharedSecrets();

function bash(id: string, script: string) {
  return {
    id,
    name: "sh",
    arguments: JSON.stringify({ program: "bash", arguments: ["-c", script] }),
  };
}

describeWithBwrap("the sandbox through the real server", () => {
  beforeAll(async () => {
    listener = createServer((socket) => {
      connections++;
      socket.end("hello\n");
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    const port = (listener.address() as { port: number }).port;

    model = await startScriptedModel(scenarios);
    const policiesDir = await copyPolicies();
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `commands:
  - {name: sh, description: Run bash., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: false}
`,
    );
    await setAgentTools(policiesDir, ["files", "context", "custom"]);
    workspace = await createWorkspace();
    peergate = await startPeergate({
      ...secrets,
      policiesDir,
      workspace,
      modelBaseUrl: model.baseUrl,
    });
    // Its own, as the server says (a directory new in /tmp meanwhile may be another file's).
    dataDir = peergate.dataDir;
    // The secrets are configured by environment here; put them where a default set-up keeps them.
    await writeFile(path.join(dataDir, "admin-token"), secrets.adminToken);
    await writeFile(path.join(dataDir, "secret-key"), secrets.secretKey);

    const relativeData = path.relative(workspace, dataDir);
    scenarios.attack = [
      {
        calls: [
          bash(
            "c_data",
            `cat ${dataDir}/admin-token ${relativeData}/admin-token ${dataDir}/secret-key`,
          ),
          bash("c_env", `cat /proc/1/environ; cat /proc/${process.pid}/environ; env`),
          bash(
            "c_write",
            `echo pwned > ${relativeData}/admin-token; echo pwned > ${dataDir}/owned`,
          ),
          bash("c_net", `d=/dev; exec 3<>$d/tcp/127.0.0.1/${port} && echo connected`),
          bash("c_escape", `setsid sleep ${marker} & echo left`),
          bash("c_token", `printf 'token=%s\\n' ${secrets.adminToken}`),
        ],
      },
      { text: "done" },
    ];
  });

  afterAll(async () => {
    await peergate?.stop();
    await model?.close();
    await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
    await removeTempDirs();
  });

  it("every attempt fails, nothing outside the workspace changes, and /readyz names the sandbox", async () => {
    const ready = await fetch(`${peergate.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.stringify(await ready.json())).toContain("bwrap: works");

    const peer = await addCaller(peergate, {
      name: "attacker",
      kind: "peer",
      tier: "public",
      allow: ["sh"],
    });
    const workspaceBefore = await snapshotTree(workspace);
    // The embedded database lives in the data dir and changes with every run: compare the rest.
    const dataFiles = async () =>
      Object.fromEntries(
        Object.entries(await snapshotTree(dataDir)).filter(([name]) => !name.startsWith("pg")),
      );
    const dataBefore = await dataFiles();
    expect(Object.keys(dataBefore)).toEqual(expect.arrayContaining(["admin-token", "secret-key"]));
    const client = await peergate.client(peer.secret);
    const task = asTask(
      await client.sendMessage({ message: userMessage("scenario:attack go") } as never),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    const last = model.requestsOf("attack").at(-1);
    const results = readToolResults(last);
    expect([...results.keys()].sort()).toEqual(
      ["c_data", "c_env", "c_escape", "c_net", "c_token", "c_write"].sort(),
    );
    const everything = [...results.values()].join("\n");
    // Neither the admin token nor the secret key reached the model, by any route.
    expect(everything).not.toContain(secrets.adminToken);
    expect(everything).not.toContain(secrets.secretKey);
    expect(everything).not.toContain("PEERGATE_");
    expect(results.get("c_data")).toContain("No such file or directory");
    expect(results.get("c_token")).toContain("token=[redacted]");
    // PID 1 is the sandbox's launcher, started with PATH only; the server's /proc is not there.
    expect(results.get("c_env")).toContain("PATH=/usr/bin:/bin");
    expect(results.get("c_env")).toContain(`/proc/${process.pid}/environ: No such file`);
    expect(results.get("c_net")).not.toContain("connected");
    expect(connections).toBe(0);

    expect(await snapshotTree(workspace)).toEqual(workspaceBefore);
    expect(await dataFiles()).toEqual(dataBefore);
    await eventually(
      "no sleep of the command to be left",
      async () => (await hostProcessesWith(`sleep ${marker}`)).length === 0,
    );
    expect((await fetch(`${peergate.url}/healthz`)).status).toBe(200);
  });
});
