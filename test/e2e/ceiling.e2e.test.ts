// End to end through the real server: an A2A client that knows nothing about peergate talks to it
// with the a2a-js SDK, an operator sets callers up through the admin HTTP API, and the model is
// `@ai-sdk/openai-compatible` against a scripted chat-completions stub. The scripted model tries
// every way around the caller's ceiling — a tool outside it, hidden execute halves, a name that
// exists nowhere, case and Cyrillic look-alikes of an admitted name — and only the admitted tool
// runs. Then two-phase writes under `auto`, and a step budget. On PGlite and on real PostgreSQL.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quoteUntrusted } from "../../src/policy/quote.ts";
import { postgresSkipReason } from "../support/databases.ts";
import {
  addCaller,
  asTask,
  collectStream,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  readToolResults,
  removeTempDirs,
  type ScriptedModel,
  snapshotTree,
  startPeergateOn,
  startScriptedModel,
  textOf,
  userMessage,
  waitForRun,
} from "./support.ts";

/** A Cyrillic small letter dze (U+0455) where the `s` of `ls` should be. */
const cyrillicLs = "l\u0455";

/** Every call of the first step; only `call_ok` names a tool in the caller's ceiling. */
const probes = [
  { id: "call_outside", name: "write_file", arguments: '{"path":"pwned.txt","content":"owned"}' },
  { id: "call_private", name: "read_file", arguments: '{"path":"README.md"}' },
  {
    id: "call_half",
    name: "execute_edit_file",
    arguments: '{"path":"README.md","oldText":"demo","newText":"owned"}',
  },
  {
    id: "call_half_outside",
    name: "execute_write_file",
    arguments: '{"path":"pwned.txt","content":"owned"}',
  },
  { id: "call_unknown", name: "launch_missiles", arguments: "{}" },
  { id: "call_case", name: "LS", arguments: '{"path":"."}' },
  { id: "call_cyrillic", name: cyrillicLs, arguments: '{"path":"."}' },
  { id: "call_ok", name: "ls", arguments: '{"path":"."}' },
];

const answer = "The workspace holds README.md, notes and src.";
const wrote = "Wrote auto.txt.";

const scenarios = {
  probe: [{ text: "Let me look around.", calls: probes }, { text: answer }],
  "auto-write": [
    {
      calls: [
        {
          id: "call_write",
          name: "write_file",
          arguments: JSON.stringify({ path: "auto.txt", content: "written under auto\n" }),
        },
      ],
    },
    { text: wrote },
  ],
  // Asks for a tool at every step, forever.
  loop: [{ calls: [{ id: "call_loop", name: "ls", arguments: "{}" }] }],
};

const refusalCodes: Record<string, string> = {
  call_outside: "tool-unavailable",
  call_private: "tool-unavailable",
  call_half: "hidden-half",
  call_half_outside: "tool-unavailable",
  call_unknown: "tool-unavailable",
  call_case: "tool-unavailable",
  call_cyrillic: "tool-unavailable",
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

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `a scripted model against the real server [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, { policiesDir, modelBaseUrl: model.baseUrl });
      });
      afterAll(async () => peergate?.stop());

      it("runs only the tool inside the ceiling; every other name is refused alike", async () => {
        const peer = await addCaller(peergate, {
          name: `prober-${kind}`,
          kind: "peer",
          tier: "internal",
          allow: ["edit_file"],
        });
        const before = await snapshotTree(peergate.workspace);
        const client = await peergate.client(peer.secret);

        const task = asTask(
          await client.sendMessage({
            message: userMessage("scenario:probe What is in the workspace?"),
          } as never),
        );

        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(task.artifacts.map((a) => [a.name, textOf(a.parts)])).toEqual([["answer", answer]]);
        // The workspace is byte-for-byte what it was: no write, no edit ran.
        expect(await snapshotTree(peergate.workspace)).toEqual(before);

        // What the model was offered, and what it read back.
        const [first, second] = model
          .requestsOf("probe")
          .filter((r) =>
            r.messages.some((m) => m.content === "scenario:probe What is in the workspace?"),
          )
          .slice(-2);
        // A blocking SendMessage calls the model without streaming.
        expect(first?.stream ?? false).toBe(false);
        expect(second?.stream ?? false).toBe(false);
        expect(first?.tools?.map((t) => t.function.name).sort()).toEqual([
          "edit_file",
          "find",
          "get_time",
          "ls",
          "stat",
        ]);
        const results = readToolResults(second);
        expect(results.get("call_ok")).toContain("README.md");
        const named = new Map(probes.map((p) => [p.id, p.name]));
        for (const id of Object.keys(refusalCodes)) {
          expect(results.get(id), id).toBe(
            `Tool ${quoteUntrusted(named.get(id))} is not available in this run.`,
          );
        }
        // Identical words once the name the model sent is taken out.
        const shapes = new Set(
          Object.keys(refusalCodes).map((id) =>
            (results.get(id) ?? "").replace(quoteUntrusted(named.get(id)), "<name>"),
          ),
        );
        expect([...shapes]).toEqual(["Tool <name> is not available in this run."]);

        // The admin API: one row per call, refused but the one that ran.
        const runId = readTaskRunId(task);
        const run = await waitForRun(peergate, runId, ["completed"]);
        expect(run.callerName).toBe(peer.name);
        expect([...run.toolSet].sort()).toEqual(["edit_file", "find", "get_time", "ls", "stat"]);
        const rows = Object.fromEntries(
          run.toolCalls.map((c: { callId: string; status: string; code: string | null }) => [
            c.callId,
            [c.status, c.code],
          ]),
        );
        expect(rows).toEqual({
          call_ok: ["completed", null],
          ...Object.fromEntries(
            Object.entries(refusalCodes).map(([id, code]) => [id, ["refused", code]]),
          ),
        });

        // The audit trail: a tool.refused event per refusal, naming what the model sent.
        const audit = await peergate.admin("GET", "/audit?kind=tool.refused&limit=1000");
        expect(audit.status).toBe(200);
        const refused = audit.body.events
          .filter((e: { data: { runId: string } }) => e.data.runId === runId)
          .map((e: { data: { callId: string; tool: string; code: string } }) => [
            e.data.callId,
            e.data.tool,
            e.data.code,
          ])
          .sort();
        expect(refused).toEqual(
          Object.entries(refusalCodes)
            .map(([id, code]) => [id, named.get(id), code])
            .sort(),
        );
        const called = await peergate.admin("GET", `/audit?kind=tool.called&limit=1000`);
        expect(
          called.body.events
            .filter((e: { data: { runId: string } }) => e.data.runId === runId)
            .map((e: { data: { tool: string; status: string } }) => [e.data.tool, e.data.status]),
        ).toEqual([["ls", "completed"]]);
        expect((await peergate.admin("GET", "/audit/verify")).body.ok).toBe(true);
      });

      it("streams status updates that name only tools in the caller's set", async () => {
        const peer = await addCaller(peergate, {
          name: `streamer-${kind}`,
          kind: "peer",
          tier: "internal",
          allow: ["edit_file"],
        });
        const before = await snapshotTree(peergate.workspace);
        const client = await peergate.client(peer.secret);
        const { events, error } = await collectStream(
          client.sendMessageStream({
            message: userMessage("scenario:probe Stream what is in the workspace."),
          } as never),
        );
        expect(error).toBeUndefined();
        expect(events[0]?.payload?.$case).toBe("task");
        const statusTexts = events.flatMap((e: StreamResponse) =>
          e.payload?.$case === "statusUpdate"
            ? [textOf(e.payload.value.status?.message?.parts)]
            : [],
        );
        const toolUpdates = statusTexts.filter((t) => t.startsWith("tool "));
        expect(toolUpdates).toEqual(["tool `ls`: started", "tool `ls`: completed"]);
        const everything = JSON.stringify(events);
        for (const probe of probes.filter((p) => p.name !== "ls")) {
          expect(everything).not.toContain(`\`${probe.name}\``);
        }
        const last = events.at(-1)?.payload;
        expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(
          TaskState.TASK_STATE_COMPLETED,
        );
        const artifacts = events.flatMap((e) =>
          e.payload?.$case === "artifactUpdate" ? [e.payload.value] : [],
        );
        expect(artifacts.at(-1)?.lastChunk).toBe(true);
        expect(textOf(artifacts.at(-1)?.artifact?.parts)).toBe(answer);
        expect(await snapshotTree(peergate.workspace)).toEqual(before);
        // A streaming call streams the model's answer.
        const streamed = model
          .requestsOf("probe")
          .filter((r) =>
            r.messages.some((m) => m.content === "scenario:probe Stream what is in the workspace."),
          );
        expect(streamed.length).toBeGreaterThan(0);
        expect(streamed.every((r) => r.stream === true)).toBe(true);
      });

      it("writes a file under `auto`: proposed, approved by the policy, then executed", async () => {
        const peer = await addCaller(peergate, {
          name: `writer-${kind}`,
          kind: "peer",
          tier: "public",
          allow: ["write_file"],
          approvalPolicy: "auto",
        });
        const client = await peergate.client(peer.secret);
        const task = asTask(
          await client.sendMessage({
            message: userMessage("scenario:auto-write Please write auto.txt."),
          } as never),
        );
        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(textOf(task.artifacts[0]?.parts)).toBe(wrote);
        expect(await readFile(path.join(peergate.workspace, "auto.txt"), "utf8")).toBe(
          "written under auto\n",
        );
        const run = await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        expect(
          run.toolCalls.map((c: { tool: string; status: string }) => [c.tool, c.status]),
        ).toEqual([["write_file", "completed"]]);
        const called = await peergate.admin(
          "GET",
          `/audit?kind=tool.called&subject=run:${run.id}&limit=100`,
        );
        expect(
          called.body.events.map((e: { data: { tool: string; ran?: string; status: string } }) => [
            e.data.tool,
            e.data.ran,
            e.data.status,
          ]),
        ).toEqual([["write_file", "execute_write_file", "completed"]]);
      });

      it("stops a run at its step budget while the model keeps calling tools", async () => {
        const peer = await addCaller(peergate, {
          name: `stepper-${kind}`,
          kind: "peer",
          tier: "internal",
          budgets: { steps: 1 },
        });
        const client = await peergate.client(peer.secret);
        const task = asTask(
          await client.sendMessage({
            message: userMessage("scenario:loop Keep looking."),
          } as never),
        );
        expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
        const run = await waitForRun(peergate, readTaskRunId(task), ["failed"]);
        expect(run.error).toMatchObject({ code: "budget-exceeded", budget: "steps" });
        expect(textOf(task.status?.message?.parts)).toBe(run.error.message);
        expect(run.budgetUsed.steps).toBe(1);
        const modelCalls = model
          .requestsOf("loop")
          .filter((r) => r.messages.some((m) => m.content === "scenario:loop Keep looking."));
        expect(modelCalls.length).toBeLessThanOrEqual(2);
      });
    },
  );
}
