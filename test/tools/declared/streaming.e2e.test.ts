// `stream: sanitized` end to end through the real server: a declared tool's live output reaches
// an A2A streaming client (the a2a-js SDK) as artifact updates while the command runs, with
// control sequences stripped; the finalized answer is unchanged.
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  addCaller,
  collectStream,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  textOf,
  userMessage,
} from "../../e2e/support.ts";

let model: ScriptedModel;
let peergate: Peergate;

beforeAll(async () => {
  model = await startScriptedModel({
    progress: [
      {
        calls: [
          { id: "call_progress", name: "report", arguments: '{"arguments":["\\u001b[31mhello"]}' },
        ],
      },
      { text: "Reported." },
    ],
  });
  const policiesDir = await copyPolicies();
  const agent = path.join(policiesDir, "agent.yaml");
  await writeFile(
    agent,
    (await readFile(agent, "utf8")).replace(
      "tools: [files, context, web]",
      "tools: [files, context, web, custom]",
    ),
  );
  await writeFile(
    path.join(policiesDir, "tools.yaml"),
    [
      "commands:",
      "  - name: report",
      "    description: Print a report.",
      "    mode: fixed",
      "    program: /usr/bin/printf",
      `    args: ["%s\\\\n"]`,
      "    stream: sanitized",
      "    allowOptions: true",
      "    risk: read-only",
      "    disclosure: public",
      "    egress: false",
      "mcpServers: []",
    ].join("\n"),
  );
  peergate = await startPeergateOn("pglite", { policiesDir, modelBaseUrl: model.baseUrl });
});

afterAll(async () => {
  await peergate?.stop();
  await model?.close();
  await removeTempDirs();
});

it("a streaming A2A client sees a sanitized tool's progress as artifact updates", async () => {
  const peer = await addCaller(peergate, {
    name: "streamer",
    kind: "peer",
    tier: "public",
    allow: ["report"],
  });
  const client = await peergate.client(peer.secret);
  const { events, error } = await collectStream(
    client.sendMessageStream({ message: userMessage("scenario:progress Report.") } as never),
  );
  expect(error).toBeUndefined();
  const progress = events.flatMap((e: StreamResponse) =>
    e.payload?.$case === "artifactUpdate" && e.payload.value.artifact?.name === "tool-progress"
      ? [textOf(e.payload.value.artifact.parts)]
      : [],
  );
  expect(progress.join("")).toBe("hello\n");
  const last = events.at(-1);
  expect(JSON.stringify(last)).toContain(String(TaskState.TASK_STATE_COMPLETED));
  expect(JSON.stringify(events)).not.toContain("\\u001b");
});
