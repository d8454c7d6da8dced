// Revocation is a recorded stop, attacked through the real server. The revocation writes a stop on
// every working run of the caller, so the instance running one stops it at its next heartbeat
// even when the notification never reaches it, in the middle of a tool call (the command is
// killed through the call's AbortSignal). Every run of a revoked caller ends with one status,
// `revoked`, whatever state it was in (working, parked for an operator, waiting for its caller's
// input), and its A2A task is REJECTED with one message.
//
// Notifications are lost through the server's seam (`wrapNotifications`): the instance hears
// nothing its hub delivers — no caller event, no run cancel — while its hub's own heartbeat keeps
// it healthy, so no gap is reported and no re-read happens on that account: on instance B of two
// (the revocation is made on A), and on a single instance that revokes the caller itself (it acts
// on its own commit). The run heartbeat is short (`runHeartbeatMs`), so nothing here sleeps: every
// wait polls for a condition.
import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { Task, TaskState } from "@a2a-js/sdk";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { revokedTaskMessage } from "../../src/a2a/run-executor.ts";
import type { Notifications } from "../../src/db/notifications.ts";
import { a2aTasks } from "../../src/db/schema.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  addCaller,
  asTask,
  collectStream,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  startTwoInstances,
  textOf,
  userMessage,
  waitForRun,
} from "./support.ts";

/** Seconds no test waits for: the argument that marks each test's own `sleep` process. */
const sleepArgs = {
  b: String(3_000 + Math.floor(Math.random() * 500)),
  pglite: String(3_500 + Math.floor(Math.random() * 500)),
  postgres: String(4_000 + Math.floor(Math.random() * 500)),
};

const waitCall = (seconds: string) => ({
  calls: [{ id: "call_wait", name: "wait", arguments: JSON.stringify({ arguments: [seconds] }) }],
});
const askStep = {
  calls: [
    {
      id: "call_ask",
      name: "ask_caller",
      arguments: JSON.stringify({ question: "Which colour?" }),
    },
  ],
};
const parkStep = {
  calls: [
    {
      id: "call_park",
      name: "write_file",
      arguments: JSON.stringify({ path: "never.txt", content: "no\n" }),
    },
  ],
};
const never = { text: "never reached" };

const scenarios = {
  "wait-b": [waitCall(sleepArgs.b), never],
  "wait-pglite": [waitCall(sleepArgs.pglite), never],
  "wait-postgres": [waitCall(sleepArgs.postgres), never],
  ask: [askStep, never],
  park: [parkStep, never],
};

/** The policies, with a declared command that blocks until it is killed, and ask_caller. */
async function preparePolicies(): Promise<string> {
  const dir = await copyPolicies();
  const agentFile = path.join(dir, "agent.yaml");
  const agent = await readFile(agentFile, "utf8");
  const opted = agent.replace(/^tools: \[(.*)\]$/m, "tools: [$1, custom, ask_caller]");
  expect(opted).not.toBe(agent);
  await writeFile(agentFile, opted);
  const toolsFile = path.join(dir, "tools.yaml");
  const tools = await readFile(toolsFile, "utf8");
  const declared = tools.replace(
    /^commands: \[\]$/m,
    [
      "commands:",
      "  - name: wait",
      "    description: Wait the given number of seconds.",
      "    mode: fixed",
      "    program: sleep",
      "    args: []",
      "    timeoutMs: 3600000",
      "    risk: read-only",
      "    disclosure: public",
      "    egress: false",
    ].join("\n"),
  );
  expect(declared).not.toBe(tools);
  await writeFile(toolsFile, declared);
  return dir;
}

/** The pids of `sleep <seconds>` processes on this machine (inside a sandbox or not). */
async function sleepPids(seconds: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    const argv = cmdline.split("\0");
    if (argv.some((a) => a.endsWith("sleep")) && argv.includes(seconds)) pids.push(Number(entry));
  }
  return pids;
}

/** A hub that delivers nothing while `losing` (the hub's own heartbeat is not a delivery). */
function createLossyHub() {
  const lost: { channel: string; message: unknown }[] = [];
  const state = { losing: true };
  const wrap = (hub: Notifications): Notifications => ({
    subscribe: (channel, onMessage) =>
      hub.subscribe(channel, (message) => {
        if (state.losing) lost.push({ channel: channel.name, message });
        else onMessage(message);
      }),
    publish: (channel, message) => hub.publish(channel, message),
    get healthy() {
      return hub.healthy;
    },
    onGap: (listener) => hub.onGap(listener),
    close: () => hub.close(),
  });
  return { wrap, lost, state };
}

/** The A2A task as stored (what any instance serves). */
async function readStoredTask(peergate: Peergate, taskId: string): Promise<Task | undefined> {
  const [row] = await peergate.server.database.db
    .select({ task: a2aTasks.task })
    .from(a2aTasks)
    .where(eq(a2aTasks.id, taskId));
  return row ? Task.fromJSON(row.task) : undefined;
}

async function waitForTaskState(peergate: Peergate, taskId: string, state: TaskState) {
  return eventually(
    `task ${taskId} to be ${TaskState[state]}`,
    async () => {
      const task = await readStoredTask(peergate, taskId);
      return task?.status?.state === state ? task : undefined;
    },
    { withinMs: 30_000 },
  );
}

/** Starts a streaming run of `scenario` and resolves once its task names its run. */
async function startStreaming(peergate: Peergate, secret: string, scenario: string) {
  const client = await peergate.client(secret);
  let taskId: string | undefined;
  let runId: string | undefined;
  const stream = collectStream(
    client.sendMessageStream({ message: userMessage(`scenario:${scenario} Go.`) } as never),
    (event) => {
      if (event.payload?.$case === "task") {
        taskId = event.payload.value.id;
        runId = readTaskRunId(event.payload.value);
      }
    },
    120_000,
  );
  const ids = await eventually(
    `the ${scenario} run to start`,
    () => (taskId && runId ? { taskId, runId } : undefined),
    { withinMs: 30_000 },
  );
  return { ...ids, stream };
}

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await preparePolicies();
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

const skipPostgres = postgresSkipReason();

describe.skipIf(skipPostgres !== undefined)(
  `a revocation on A stops a run on B that never hears of it${skipPostgres ? ` — skipped: ${skipPostgres}` : ""}`,
  () => {
    let a: Peergate;
    let b: Peergate;
    let stopInstances: (() => Promise<void>) | undefined;
    const lossy = createLossyHub();

    beforeAll(async () => {
      ({
        a,
        b,
        stop: stopInstances,
      } = await startTwoInstances({
        policiesDir,
        modelBaseUrl: model.baseUrl,
        serverB: { runHeartbeatMs: 100, wrapNotifications: lossy.wrap },
      }));
    });
    afterAll(async () => stopInstances?.());

    it("B's run, in a long tool call, stops at B's next heartbeat: revoked, the command killed", {
      timeout: 120_000,
    }, async () => {
      const peer = await addCaller(a, {
        name: "revoked-on-a",
        kind: "peer",
        tier: "public",
        allow: ["wait"],
      });
      const { taskId, runId, stream } = await startStreaming(b, peer.secret, "wait-b");
      // The command runs on B: the run is in the middle of a tool call that would last an hour.
      await eventually(
        "the command to start on B",
        async () => ((await sleepPids(sleepArgs.b)).length > 0 ? true : undefined),
        { withinMs: 30_000 },
      );
      const running = await waitForRun(a, runId, ["working"]);
      expect(running.toolCalls).toEqual([
        expect.objectContaining({ callId: "call_wait", status: "running" }),
      ]);

      const revoked = await a.admin("POST", "/callers/revoked-on-a/revoke", { reason: "e2e" });
      expect(revoked.status).toBe(200);
      expect(revoked.body).toMatchObject({ workingRunsStopped: 1, waitingRunsRevoked: 0 });

      const run = await waitForRun(a, runId, ["revoked", "canceled", "failed"], 30_000);
      expect(run.status).toBe("revoked");
      expect(run.error).toMatchObject({ code: "caller-revoked" });
      expect(
        run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
      ).toEqual([["call_wait", "interrupted"]]);
      // The call's AbortSignal fired: the command is gone, long before its hour.
      await eventually(
        "the command to be killed",
        async () => ((await sleepPids(sleepArgs.b)).length === 0 ? true : undefined),
        { withinMs: 30_000 },
      );
      // B never heard of the revocation: the stop came from the record, at B's heartbeat.
      expect(lossy.lost.some((l) => JSON.stringify(l.message).includes('"revoked"'))).toBe(true);
      expect(b.logs.join("\n")).not.toMatch(/notification gap/);

      // B's stream ends with the task REJECTED and says why; the stored task agrees.
      const { events } = await stream;
      const last = events.at(-1)?.payload;
      expect(last?.$case).toBe("statusUpdate");
      if (last?.$case !== "statusUpdate") return;
      expect(last.value.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
      expect(textOf(last.value.status?.message?.parts)).toBe(revokedTaskMessage);
      const task = await waitForTaskState(a, taskId, TaskState.TASK_STATE_REJECTED);
      expect(textOf(task.status?.message?.parts)).toBe(revokedTaskMessage);

      const audit = await a.admin("GET", `/audit?subject=run:${runId}&limit=100`);
      const kinds = (audit.body.events as { kind: string }[]).map((e) => e.kind);
      expect(kinds.filter((k) => k === "run.revoked")).toHaveLength(1);
      expect(kinds).not.toContain("run.canceled");
      const callerAudit = await a.admin("GET", "/audit?kind=caller.revoked&limit=10");
      const event = (callerAudit.body.events as { data: Record<string, unknown> }[]).find(
        (e) => e.data.name === "revoked-on-a",
      );
      expect(event?.data).toMatchObject({ workingRunsStopped: [runId], waitingRunsRevoked: [] });
    });
  },
);

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? skipPostgres : undefined;
  describe.skipIf(skip !== undefined)(
    `every run of a revoked caller ends revoked, notifications lost [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      const lossy = createLossyHub();

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, {
          policiesDir,
          modelBaseUrl: model.baseUrl,
          server: { runHeartbeatMs: 100, wrapNotifications: lossy.wrap },
        });
      });
      afterAll(async () => peergate?.stop());

      it("a working, a parked and an input-required run: one status, one A2A state", {
        timeout: 120_000,
      }, async () => {
        const name = `all-runs-${kind}`;
        const peer = await addCaller(peergate, {
          name,
          kind: "peer",
          tier: "public",
          allow: ["wait", "write_file"],
          approvalPolicy: "read-only",
        });
        const client = await peergate.client(peer.secret);
        const parked = asTask(
          await client.sendMessage({ message: userMessage("scenario:park Write.") } as never),
        );
        expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
        const asked = asTask(
          await client.sendMessage({ message: userMessage("scenario:ask Report.") } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const working = await startStreaming(peergate, peer.secret, `wait-${kind}`);
        await eventually(
          "the command to start",
          async () => ((await sleepPids(sleepArgs[kind])).length > 0 ? true : undefined),
          { withinMs: 30_000 },
        );

        const revoked = await peergate.admin("POST", `/callers/${name}/revoke`, {});
        expect(revoked.status).toBe(200);
        expect(revoked.body).toMatchObject({
          waitingRunsRevoked: 2,
          workingRunsStopped: 1,
          parkedRunsRejected: 2,
        });

        const runIds = [readTaskRunId(parked), readTaskRunId(asked), working.runId];
        // The instance revoked the caller itself: it acts on the commit, not on its own NOTIFY.
        await eventually(
          "the revocation's notification to be lost",
          () =>
            lossy.lost.some((l) => JSON.stringify(l.message).includes('"revoked"')) ? 1 : undefined,
          { withinMs: 30_000 },
        );
        for (const runId of runIds) {
          const run = await waitForRun(peergate, runId, ["revoked"], 30_000);
          expect(run.error).toMatchObject({ code: "caller-revoked" });
        }
        for (const taskId of [parked.id, asked.id, working.taskId]) {
          const task = await waitForTaskState(peergate, taskId, TaskState.TASK_STATE_REJECTED);
          expect(textOf(task.status?.message?.parts)).toBe(revokedTaskMessage);
        }
        await eventually(
          "the command to be killed",
          async () => ((await sleepPids(sleepArgs[kind])).length === 0 ? true : undefined),
          { withinMs: 30_000 },
        );
        // The admin API lists them under the one status.
        const listed = await peergate.admin("GET", "/runs?status=revoked&limit=50");
        expect(listed.status).toBe(200);
        const ids = (listed.body.runs as { id: string }[]).map((r) => r.id);
        expect(ids).toEqual(expect.arrayContaining(runIds));
        const audit = await peergate.admin("GET", "/audit?kind=run.revoked&limit=50");
        const subjects = (audit.body.events as { subject: string }[]).map((e) => e.subject);
        expect(subjects).toEqual(expect.arrayContaining(runIds.map((id) => `run:${id}`)));
      });
    },
  );
}
