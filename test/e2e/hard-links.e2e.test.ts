// PEERGATE_WORKSPACE_HARD_LINKS through the real server: a file planted in the workspace as a
// second hard link to a file outside it is refused to the model by default, and read when the
// operator sets `allow`. The model is scripted; the caller may read files (tier private).
import { link, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addCaller,
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  readToolResults,
  removeTempDirs,
  type ScriptedModel,
  startPeergate,
  startScriptedModel,
  userMessage,
} from "./support.ts";

const secret = "OUTSIDE-THE-WORKSPACE-7d1c";

const scenarios = {
  "read-planted": [
    { calls: [{ id: "call_read", name: "read_file", arguments: '{"path":"planted.txt"}' }] },
    { text: "Read it." },
  ],
};

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await copyPolicies();
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

/** What read_file told the model about planted.txt on a server started with `env`. */
async function readPlanted(env: Record<string, string>, name: string): Promise<string> {
  const workspace = await createWorkspace();
  const outside = path.join(os.tmpdir(), `peergate-e2e-outside-${name}-${process.pid}.txt`);
  await writeFile(outside, `${secret}\n`);
  await link(outside, path.join(workspace, "planted.txt"));
  let peergate: Peergate | undefined;
  try {
    peergate = await startPeergate({
      ...createSharedSecrets(),
      policiesDir,
      workspace,
      modelBaseUrl: model.baseUrl,
      env,
    });
    const reader = await addCaller(peergate, { name, kind: "peer", tier: "private" });
    const client = await peergate.client(reader.secret);
    const prompt = `scenario:read-planted (${name}) What does planted.txt say?`;
    const task = asTask(await client.sendMessage({ message: userMessage(prompt) } as never));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const answered = model
      .requestsOf("read-planted")
      .filter((r) => r.messages.some((m) => m.content === prompt));
    return readToolResults(answered.at(-1)).get("call_read") ?? "(no result)";
  } finally {
    await peergate?.stop();
    await rm(outside, { force: true });
  }
}

// Each test starts its own server on a fresh embedded database, which a loaded machine can take
// longer than the suite's 30 s to create (seen in a loaded run): each gets two minutes.
describe("PEERGATE_WORKSPACE_HARD_LINKS through the real server", { timeout: 120_000 }, () => {
  it("refuses a hard-linked file by default, and says why", async () => {
    const result = await readPlanted({}, "refusing");
    expect(result).toContain("hard links");
    expect(result).not.toContain(secret);
  });

  it("reads it when the operator sets allow", async () => {
    const result = await readPlanted({ PEERGATE_WORKSPACE_HARD_LINKS: "allow" }, "allowing");
    expect(result).toContain(secret);
  });
});
