// The details an A2A client trips on (issue 27, item 3), through the real server and the real
// a2a-js 1.3 client: `listTasks()` with the client's defaults; SubscribeToTask on a task waiting
// for an operator stays open and delivers what happens next; a rejected call is read by the model
// and the task ends as the run does (docs/a2a.md); a finished task is named by its state's name;
// and a blocking client gets its task's state, not an empty reply, when the server stops.
import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
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
  startPeergateOn,
  startScriptedModel,
  textOf,
  userMessage,
  waitForRun,
} from "./support.ts";

const afterRejection = "Understood: I did not write the file.";

const scenarios = {
  hello: [{ text: "hello back" }],
  park: [
    {
      text: "I will write the file.",
      calls: [
        {
          id: "call_park",
          name: "write_file",
          arguments: JSON.stringify({ path: "rejected.txt", content: "no\n" }),
        },
      ],
    },
    { text: afterRejection },
  ],
  hang: [{ hang: true }],
};

function stateOf(event: StreamResponse | undefined): TaskState | undefined {
  const payload = event?.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
}

async function rpc(peergate: Peergate, token: string, body: unknown, version?: string) {
  const response = await fetch(`${peergate.url}/a2a`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      ...(version ? { "a2a-version": version } : {}),
    },
    body: JSON.stringify(body),
  });
  return (await response.json()) as { result?: any; error?: { code: number; message: string } };
}

describe("the a2a-js client's details", () => {
  let model: ScriptedModel;
  let peergate: Peergate;
  let token: string;

  beforeAll(async () => {
    model = await startScriptedModel(scenarios);
    peergate = await startPeergateOn("pglite", {
      policiesDir: await copyPolicies(),
      modelBaseUrl: model.baseUrl,
    });
    ({ secret: token } = await addCaller(peergate, {
      name: "follower",
      kind: "peer",
      tier: "public",
      allow: ["write_file"],
      approvalPolicy: "read-only",
    }));
  }, 120_000);
  afterAll(async () => {
    await peergate?.stop();
    await model?.close();
    await removeTempDirs();
  });

  it("lists tasks with the client's defaults (its status filter UNRECOGNIZED means none)", async () => {
    const client = await peergate.client(token);
    const sent = asTask(
      await client.sendMessage({ message: userMessage("scenario:hello hi") } as never),
    );
    const listed = await client.listTasks({} as never);
    expect(listed.tasks.map((t) => t.id)).toContain(sent.id);
    // A filter that names a state still filters, and one that names none is refused by name.
    const completed = await client.listTasks({ status: TaskState.TASK_STATE_COMPLETED } as never);
    expect(completed.tasks.map((t) => t.id)).toContain(sent.id);
    const bogus = await rpc(
      peergate,
      token,
      { jsonrpc: "2.0", id: 1, method: "ListTasks", params: { status: "TASK_STATE_DONE" } },
      "1.0",
    );
    expect(bogus.error?.code).toBe(-32602);
    expect(bogus.error?.message).toMatch(/^status must be a TASK_STATE_… name/);
  });

  it("follows a task waiting for an operator until it ends; a rejected call is the model's to read", async () => {
    const client = await peergate.client(token);
    const parked = asTask(
      await client.sendMessage({
        message: userMessage("scenario:park Write it, please."),
      } as never),
    );
    expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    const runId = readTaskRunId(parked);

    const stream = client.resubscribeTask({ id: parked.id } as never);
    const first = await stream.next();
    expect(stateOf(first.value as StreamResponse)).toBe(TaskState.TASK_STATE_WORKING);
    // The stream stays open while the task waits: the next event is not there yet.
    const second = stream.next();
    const early = await Promise.race([second.then(() => "event"), Promise.resolve("open")]);
    expect(early).toBe("open");

    const reason = "Not today: that folder is frozen.";
    const rejected = await peergate.admin("POST", `/runs/${runId}/reject`, { reason });
    expect(rejected.status, JSON.stringify(rejected.body)).toBe(202);

    const rest = [(await second).value as StreamResponse];
    const tail = await collectStream(stream as AsyncGenerator<StreamResponse>, () => {}, 30_000);
    rest.push(...tail.events);
    expect(tail.error).toBeUndefined();
    const last = rest.at(-1);
    // The run read the rejection as the call's result and went on: the task ends as the run does.
    expect(stateOf(last)).toBe(TaskState.TASK_STATE_COMPLETED);
    const run = await waitForRun(peergate, runId, ["completed"]);
    expect(run.text).toBe(afterRejection);
    const resumed = model.requestsOf("park").at(-1);
    expect(readToolResults(resumed).get("call_park")).toContain(reason);
    const done = await client.getTask({ id: parked.id } as never);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(done.status?.message?.parts)).toBe(afterRejection);
  }, 60_000);

  it("names a finished task's state, not its number", async () => {
    const client = await peergate.client(token);
    const sent = asTask(
      await client.sendMessage({ message: userMessage("scenario:hello again") } as never),
    );
    expect(sent.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const answer = { ...userMessage("one more thing"), taskId: sent.id, contextId: sent.contextId };
    await expect(client.sendMessage({ message: answer } as never)).rejects.toThrow(
      /terminal state \(TASK_STATE_COMPLETED\)/,
    );
    const follow = await collectStream(
      client.resubscribeTask({ id: sent.id } as never) as AsyncGenerator<StreamResponse>,
    );
    expect(String(follow.error)).toMatch(/terminal state \(TASK_STATE_COMPLETED\)/);
    // v0.3 names it as v0.3 does.
    const legacy = await rpc(peergate, token, {
      jsonrpc: "2.0",
      id: 2,
      method: "message/send",
      params: {
        message: {
          kind: "message",
          messageId: crypto.randomUUID(),
          role: "user",
          taskId: sent.id,
          parts: [{ kind: "text", text: "and another" }],
        },
      },
    });
    expect(legacy.error?.message).toMatch(/terminal state \(completed\)/);
  });
});

describe("a graceful stop", () => {
  it("answers a blocking client with its task's state, not an empty reply", async () => {
    const model = await startScriptedModel(scenarios);
    const peergate = await startPeergateOn("pglite", {
      policiesDir: await copyPolicies(),
      modelBaseUrl: model.baseUrl,
      env: { PEERGATE_SHUTDOWN_TIMEOUT_MS: "200" },
    });
    try {
      const { secret } = await addCaller(peergate, { name: "waiter", kind: "peer" });
      const client = await peergate.client(secret);
      const pending = client.sendMessage({
        message: userMessage("scenario:hang Take your time."),
      } as never);
      const outcome = pending.then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
      await eventually(
        "the model call that hangs",
        () => (model.requestsOf("hang").length > 0 ? true : undefined),
        { withinMs: 30_000 },
      );
      await peergate.stop();
      const got = await outcome;
      expect("error" in got ? String(got.error) : "no error").toBe("no error");
      const task = asTask("result" in got ? got.result : undefined);
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(textOf(task.status?.message?.parts)).toMatch(/shut down/);
    } finally {
      await peergate.stop().catch(() => {});
      await model.close();
      await removeTempDirs();
    }
  }, 120_000);
});
