// A stateful stdio MCP server through the real server, in the bwrap sandbox: callers' A2A runs,
// driven by a scripted model, call `remember` and `recall` on the fixture in
// fixtures/memory-mcp-server.mjs. One caller's value never reaches another caller's instance; a
// server declared `scope: run` gives every run a fresh instance; an idle instance and a revoked
// caller's instance are closed (their processes are gone, seen from /proc). Nothing here depends
// on the uid the server runs as.
import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
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
import { describeWithBwrap } from "./support.ts";

const fixture = fileURLToPath(new URL("./fixtures/memory-mcp-server.mjs", import.meta.url));
const tag = String(Math.floor(Math.random() * 1e9));
// One marker per declared server, on its command line, so its processes can be counted.
const markers = { mem: `mem-${tag}`, memrun: `memrun-${tag}`, memidle: `memidle-${tag}` };

function call(id: string, tool: string, input: Record<string, unknown> = {}) {
  return { id, name: tool, arguments: JSON.stringify(input) };
}

const scenarios: Scenarios = {
  remember: [
    { calls: [call("c_remember", "mem_remember", { value: "secret-of-a" })] },
    { text: "ok" },
  ],
  recall: [{ calls: [call("c_recall", "mem_recall")] }, { text: "ok" }],
  "run-both": [
    { calls: [call("c_remember", "memrun_remember", { value: "kept-in-run" })] },
    { calls: [call("c_recall", "memrun_recall")] },
    { text: "ok" },
  ],
  "run-recall": [{ calls: [call("c_recall", "memrun_recall")] }, { text: "ok" }],
  "idle-recall": [{ calls: [call("c_recall", "memidle_recall")] }, { text: "ok" }],
};

let model: ScriptedModel;
let peergate: Peergate;

/** The fixture's own (node) processes for one declared server: one per live instance. */
async function instancesOf(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = (await readFile(`/proc/${name}/cmdline`, "utf8")).split("\0");
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      const isFixture = path.basename(argv[0] ?? "") === "node" && argv[1] === fixture;
      if (isFixture && argv.includes(marker) && !/\) Z /.test(stat)) found.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** Runs one scenario as a caller; returns what the tool calls of its last request returned. */
async function runAs(secret: string, scenario: string): Promise<Map<string, Recall>> {
  const client = await peergate.client(secret);
  const task = asTask(
    await client.sendMessage({ message: userMessage(`scenario:${scenario} go`) } as never),
  );
  expect(task.status?.state, JSON.stringify(peergate.logs)).toBe(TaskState.TASK_STATE_COMPLETED);
  const results = readToolResults(model.requestsOf(scenario).at(-1));
  return new Map([...results].map(([id, text]) => [id, readRecall(text)]));
}

type Recall = { instance: string; values: string[]; text: string };

/** The fixture's answer, as the model read it (nested as data in the tool result). */
function readRecall(text: string): Recall {
  const instance = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.exec(text)?.[0];
  const values = [...text.matchAll(/secret-of-a|kept-in-run/g)].map((m) => m[0]);
  return { instance: instance ?? "none", values, text };
}

function recallOf(results: Map<string, Recall>): Recall {
  const found = results.get("c_recall");
  if (found === undefined) throw new Error(`no recall result in ${JSON.stringify([...results])}`);
  return found;
}

describeWithBwrap("stdio MCP server instances per caller, through the real server", () => {
  beforeAll(async () => {
    model = await startScriptedModel(scenarios);
    const policiesDir = await copyPolicies();
    const server = (name: keyof typeof markers, extra: string) =>
      `  - name: ${name}
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(fixture)}, ${markers[name]}]
${extra}    tools:
      remember: {description: Remember a value., risk: read-only, disclosure: public, egress: false}
      recall: {description: Recall the values., risk: read-only, disclosure: public, egress: false}
`;
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `mcpServers:
${server("mem", "")}${server("memrun", "    scope: run\n")}${server("memidle", "    idleTimeoutMs: 200\n")}`,
    );
    await setAgentTools(policiesDir, ["context", "mcp"]);
    peergate = await startPeergate({
      ...createSharedSecrets(),
      policiesDir,
      workspace: await createWorkspace(),
      modelBaseUrl: model.baseUrl,
    });
  });

  afterAll(async () => {
    await peergate?.stop();
    await model?.close();
    await removeTempDirs();
  });

  const everyTool = ["mem", "memrun", "memidle"].flatMap((s) => [`${s}.remember`, `${s}.recall`]);
  const addPeer = async (name: string) =>
    (await addCaller(peergate, { name, kind: "peer", tier: "public", allow: everyTool })).secret;

  it("one caller's value never reaches another caller's instance", async () => {
    const a = await addPeer("caller-a");
    const b = await addPeer("caller-b");
    await runAs(a, "remember");
    // The caller's own next run finds it: the instance is the caller's, kept between runs.
    const ownRecall = recallOf(await runAs(a, "recall"));
    expect(ownRecall.values).toEqual(["secret-of-a"]);
    const otherRecall = recallOf(await runAs(b, "recall"));
    expect(otherRecall.text).not.toContain("secret-of-a");
    expect(otherRecall.instance).not.toBe("none");
    expect(otherRecall.instance).not.toBe(ownRecall.instance);
  });

  it("a server declared scope: run gives each run a fresh instance, closed when the run ends", async () => {
    const c = await addPeer("caller-c");
    const inRun = recallOf(await runAs(c, "run-both"));
    // Within one run the instance keeps what it was given.
    expect(inRun.values).toEqual(["kept-in-run"]);
    await eventually(
      "the run's memory server instance to be closed",
      async () => (await instancesOf(markers.memrun)).length === 0,
    );
    const nextRun = recallOf(await runAs(c, "run-recall"));
    expect(nextRun.text).not.toContain("kept-in-run");
    expect(nextRun.instance).not.toBe("none");
    expect(nextRun.instance).not.toBe(inRun.instance);
  });

  it("an idle instance is closed: its process is gone, and the next call starts a fresh one", async () => {
    const d = await addPeer("caller-d");
    const first = recallOf(await runAs(d, "idle-recall"));
    expect(first.instance).not.toBe("none");
    await eventually(
      "the idle memory server instance to be closed",
      async () => (await instancesOf(markers.memidle)).length === 0,
    );
    const second = recallOf(await runAs(d, "idle-recall"));
    expect(second.instance).not.toBe("none");
    expect(second.instance).not.toBe(first.instance);
  });

  it("a revoked caller's instance is closed; another caller's stays", async () => {
    const e = await addPeer("caller-e");
    const f = await addPeer("caller-f");
    await runAs(e, "recall");
    const before = recallOf(await runAs(f, "recall"));
    const live = (await instancesOf(markers.mem)).length;
    expect(live).toBeGreaterThanOrEqual(2);
    const revoked = await peergate.admin("POST", "/callers/caller-e/revoke", { reason: "test" });
    expect(revoked.status).toBe(200);
    await eventually(
      "one memory server instance to be closed",
      async () => (await instancesOf(markers.mem)).length === live - 1,
    );
    // The other caller's instance was not the one closed: it answers as the same instance.
    expect(recallOf(await runAs(f, "recall")).instance).toBe(before.instance);
  });
});
