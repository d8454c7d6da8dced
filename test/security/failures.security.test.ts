// Opaque failures, through the real server and a real A2A client: a model provider's error text
// (here carrying a private address and a file path) reaches the run record for the operator,
// never the remote caller, who sees only a reference to the run.
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addCaller,
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startPeergate,
  startScriptedModel,
  textOf,
  userMessage,
  waitForRun,
} from "../e2e/support.ts";
import { recordCase } from "./cases.ts";

const providerText =
  "upstream 10.20.30.40:8443 refused: see /srv/models/keys/prod.key (org org-internal-7)";

let model: ScriptedModel;
let peergate: Peergate;

beforeAll(async () => {
  model = await startScriptedModel({
    broken: [{ error: { status: 400, message: providerText } }],
  });
  peergate = await startPeergate({
    ...createSharedSecrets(),
    policiesDir: await copyPolicies(),
    workspace: await createWorkspace(),
    modelBaseUrl: model.baseUrl,
  });
}, 60_000);

afterAll(async () => {
  await peergate?.stop();
  await model?.close();
  await removeTempDirs();
});

describe("a run that fails inside the provider", () => {
  it("tells the caller only the run's reference; the operator's record keeps the provider's text", async () => {
    const peer = await addCaller(peergate, { name: "asker", kind: "peer", tier: "internal" });
    const client = await peergate.client(peer.secret);
    const task = asTask(
      await client.sendMessage({ message: userMessage("scenario:broken Hello?") } as never),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    const runId = readTaskRunId(task);
    const run = await waitForRun(peergate, runId, ["failed"]);
    // The operator sees what the provider said …
    expect(run.error.message).toContain("10.20.30.40:8443");
    expect(run.error.message).toContain("/srv/models/keys/prod.key");
    // … the caller sees the reference, in the answer and in the stored task.
    const said = textOf(task.status?.message?.parts);
    expect(said).toBe(`The run failed (reference ${runId}).`);
    const stored = asTask(await client.getTask({ id: task.id } as never));
    const everything = JSON.stringify(stored);
    const leaked = ["10.20.30.40", "/srv/models", "org-internal-7"].filter((s) =>
      everything.includes(s),
    );
    recordCase("secrets", "provider error text in a failed task", leaked.length > 0);
    expect(leaked).toEqual([]);
    expect(textOf(stored.status?.message?.parts)).toBe(said);
  });
});
