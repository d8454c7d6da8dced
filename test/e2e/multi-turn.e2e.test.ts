// Multi-turn on one task, end to end through the real server: the scripted model asks its caller a
// question with ask_caller, the task goes INPUT_REQUIRED with the question, and the caller's next
// message on the same task resumes the same run, which reads the answer as the call's result and
// finishes. Driven by the a2a-js client over A2A 1.0 and over v0.3, and by plain HTTP; the same
// server's card signature is checked with the JWKS it publishes. On PGlite and real PostgreSQL.
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  type AgentCard,
  type Message,
  type StreamResponse,
  TaskState,
  verifyAgentCardSignature,
} from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import type { JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { postgresSkipReason } from "../support/databases.ts";
import { countAssistantTurns, type StubStep } from "../support/openai-stub.ts";
import {
  addCaller,
  asTask,
  collectStream,
  copyPolicies,
  type Peergate,
  readScenario,
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

const question = "Which colour should the report use?";
const finalAnswer = "The report will be teal.";

const askStep = {
  text: "One thing first.",
  calls: [{ id: "call_ask", name: "ask_caller", arguments: JSON.stringify({ question }) }],
};

const scenarios = {
  // Ask, then answer with what the caller said.
  ask: [askStep, { text: finalAnswer }],
  "ask-v03": [askStep, { text: finalAnswer }],
  "ask-raw": [askStep, { text: finalAnswer }],
  "ask-cancel": [askStep],
  "ask-stream": [askStep, { text: finalAnswer }],
  "ask-revoke": [askStep],
  // ask_caller beside another call: no answer can come, the model is told so and goes on.
  "ask-mixed": [
    {
      calls: [
        { id: "call_ask_mixed", name: "ask_caller", arguments: JSON.stringify({ question }) },
        { id: "call_time", name: "get_time", arguments: "{}" },
      ],
    },
    { text: finalAnswer },
  ],
  // Asks twice; its caller has a budget of two steps.
  "ask-budget": [askStep, askStep, { text: "never reached" }],
  "ask-slot": [askStep, { text: finalAnswer }],
};

/** Plays `scenarios`, except that "hold-slot" answers only once `gate` opens. */
function holdSlotScript(gate: Promise<void>) {
  return async (request: Parameters<Parameters<ScriptedModel["stub"]["respondWith"]>[0]>[0]) => {
    const name = readScenario(request) ?? "";
    if (name === "hold-slot") {
      await gate;
      return { text: "Busy work done." };
    }
    const steps = (scenarios as Record<string, StubStep[]>)[name];
    if (!steps || steps.length === 0) return { text: "no script for this conversation" };
    return steps[Math.min(countAssistantTurns(request), steps.length - 1)] as StubStep;
  };
}

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await copyPolicies();
  // The operator opts in to ask_caller by naming it in the agent's tools.
  const agentFile = path.join(policiesDir, "agent.yaml");
  const agent = await readFile(agentFile, "utf8");
  const opted = agent.replace(/^tools: \[(.*)\]$/m, "tools: [$1, ask_caller]");
  expect(opted).not.toBe(agent);
  await writeFile(agentFile, opted);
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

/** A user message answering `task` (same task and context). */
/** The status an event of a stream carries, if it carries one. */
function stateOf(event: StreamResponse | undefined) {
  const payload = event?.payload;
  if (payload?.$case === "statusUpdate") return payload.value.status;
  if (payload?.$case === "task") return payload.value.status;
  return undefined;
}

function answerTo(task: { id: string; contextId: string }, text: string): Message {
  return { ...userMessage(text), taskId: task.id, contextId: task.contextId };
}

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `multi-turn on one task against the real server [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      let secret: string;
      let otherSecret: string;

      const legacyClient = async (token: string): Promise<Client> => {
        const fetchImpl: typeof fetch = (input, init) => {
          const headers = new Headers(init?.headers);
          headers.set("Authorization", `Bearer ${token}`);
          return fetch(input, { ...init, headers });
        };
        const factory = new ClientFactory(
          ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
            transports: [
              new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
            ],
            cardResolver: new DefaultAgentCardResolver({
              fetchImpl,
              legacyCompat: { enabled: true },
            }),
          }),
        );
        // The v0.3 card (no A2A-Version header), as a v0.3 client reads it.
        const card = (await (
          await fetch(`${peergate.url}/.well-known/agent-card.json`)
        ).json()) as AgentCard;
        return factory.createFromAgentCard(card);
      };

      const rpc = async (token: string, method: string, params: unknown, id: unknown = 1) => {
        const response = await fetch(`${peergate.url}/a2a`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "A2A-Version": "1.0",
            Authorization: `Bearer ${token}`,
          },
          body: JSON.stringify({ jsonrpc: "2.0", id, method, params }),
        });
        return { status: response.status, body: (await response.json()) as any };
      };

      const rawMessage = (text: string, extra: Record<string, unknown> = {}) => ({
        message: {
          messageId: crypto.randomUUID(),
          role: "ROLE_USER",
          parts: [{ text }],
          ...extra,
        },
      });

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, { policiesDir, modelBaseUrl: model.baseUrl });
        secret = (
          await addCaller(peergate, { name: `asker-${kind}`, kind: "peer", tier: "public" })
        ).secret;
        otherSecret = (
          await addCaller(peergate, { name: `stranger-${kind}`, kind: "peer", tier: "public" })
        ).secret;
      });
      afterAll(async () => peergate?.stop());

      it("a2a-js (1.0): INPUT_REQUIRED with the question, then the answer resumes the same run", async () => {
        const client = await peergate.client(secret);
        const asked = asTask(
          await client.sendMessage({
            message: userMessage("scenario:ask Write the report."),
          } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(textOf(asked.status?.message?.parts)).toBe(question);
        const runId = readTaskRunId(asked);
        const waiting = await waitForRun(peergate, runId, ["input-required"]);
        expect(waiting.segments).toBe(1);

        const done = asTask(
          await client.sendMessage({ message: answerTo(asked, "Teal, please.") } as never),
        );
        expect(done.id).toBe(asked.id);
        expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(textOf(done.status?.message?.parts)).toBe(finalAnswer);
        // The task's end was written with the run's end: what the caller was answered is what
        // it reads afterwards, once (the question and the end each once in the history).
        const stored = await client.getTask({ id: done.id } as never);
        expect(stored).toEqual(done);
        expect(stored.history.filter((m) => m.messageId === `${runId}-end`)).toHaveLength(1);
        // The same run went on: no second run for the task, a second segment, both steps counted.
        expect(readTaskRunId(done)).toBe(runId);
        const run = await waitForRun(peergate, runId, ["completed"]);
        expect(run.segments).toBe(2);
        expect(run.budgetUsed?.steps ?? run.used?.steps).toBe(2);
        expect(
          run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
        ).toEqual([["call_ask", "completed"]]);

        // The model read the caller's words as the result of its ask_caller call.
        const resumed = model.requestsOf("ask").at(-1);
        expect(readToolResults(resumed).get("call_ask")).toContain("Teal, please.");

        // A finished task takes no more messages.
        await expect(
          client.sendMessage({ message: answerTo(asked, "and bold") } as never),
        ).rejects.toThrow();
      });

      it("a2a-js (1.0), streaming: the question ends the stream; the answer streams to the end", async () => {
        const client = await peergate.client(secret);
        const first = await collectStream(
          client.sendMessageStream({
            message: userMessage("scenario:ask-stream Write the report."),
          } as never),
        );
        expect(first.error).toBeUndefined();
        const asked = stateOf(first.events.at(-1));
        expect(asked?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(textOf(asked?.message?.parts)).toBe(question);
        const taskEvent = first.events.find((e) => e.payload?.$case === "task");
        const task = taskEvent?.payload?.$case === "task" ? taskEvent.payload.value : undefined;
        if (!task) throw new Error("the stream sent no task");

        const second = await collectStream(
          client.sendMessageStream({ message: answerTo(task, "Teal.") } as never),
        );
        expect(second.error).toBeUndefined();
        const done = stateOf(second.events.at(-1));
        expect(done?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(textOf(done?.message?.parts)).toBe(finalAnswer);
        const run = await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        expect(run.segments).toBe(2);
      });

      it("a2a-js (v0.3): the same turn over the legacy transport", async () => {
        const client = await legacyClient(secret);
        expect(client.protocolVersion).toBe("0.3");
        const asked = asTask(
          await client.sendMessage({
            message: userMessage("scenario:ask-v03 Write the report."),
          } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(textOf(asked.status?.message?.parts)).toBe(question);
        const done = asTask(
          await client.sendMessage({ message: answerTo(asked, "Teal.") } as never),
        );
        expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(textOf(done.status?.message?.parts)).toBe(finalAnswer);
        const run = await waitForRun(peergate, readTaskRunId(asked), ["completed"]);
        expect(run.segments).toBe(2);
      });

      it("plain HTTP: the answer resumes; another caller's taskId is not found; a finished task is refused", async () => {
        const asked = await rpc(secret, "SendMessage", rawMessage("scenario:ask-raw Report?"));
        expect(asked.status).toBe(200);
        const task = asked.body.result.task;
        expect(task.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
        expect(task.status.message.parts[0].text).toBe(question);

        // Another caller naming the task learns nothing: the same error as a task that never was.
        const stranger = await rpc(
          otherSecret,
          "SendMessage",
          rawMessage("Teal.", { taskId: task.id, contextId: task.contextId }),
        );
        const missing = await rpc(
          otherSecret,
          "SendMessage",
          rawMessage("Teal.", { taskId: crypto.randomUUID(), contextId: task.contextId }),
        );
        expect(stranger.body.error?.code).toBe(-32001);
        expect(missing.body.error?.code).toBe(-32001);
        expect(stranger.body.error.message.replace(task.id, "<id>")).toBe(
          missing.body.error.message.replace(/[0-9a-f-]{36}/, "<id>"),
        );
        // …and the run still waits for its own caller.
        await waitForRun(peergate, task.metadata.peergate.runId, ["input-required"]);

        const done = await rpc(
          secret,
          "SendMessage",
          rawMessage("Teal.", { taskId: task.id, contextId: task.contextId }),
        );
        expect(done.body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
        expect(done.body.result.task.id).toBe(task.id);

        const again = await rpc(
          secret,
          "SendMessage",
          rawMessage("More?", { taskId: task.id, contextId: task.contextId }),
        );
        expect(again.body.error?.code).toBe(-32004);
      });

      it("an answer resumes its run only within the caller's concurrency limit", async () => {
        const single = await addCaller(peergate, {
          name: `one-at-a-time-${kind}`,
          kind: "peer",
          tier: "public",
          budgets: { concurrentRuns: 1 },
        });
        // The question gives the run's slot back, so the caller can start another run…
        const asked = await rpc(single.secret, "SendMessage", rawMessage("scenario:ask-slot Go."));
        const task = asked.body.result.task;
        expect(task.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
        let open = () => {};
        const gate = new Promise<void>((resolve) => {
          open = resolve;
        });
        model.stub.respondWith(holdSlotScript(gate));
        try {
          const holding = rpc(single.secret, "SendMessage", rawMessage("scenario:hold-slot Busy."));
          // …which now holds the one slot (its model call waits at the gate).
          while (model.requestsOf("hold-slot").length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          // Answering the question now would make two runs at once: refused, the run still waits.
          const refused = await rpc(
            single.secret,
            "SendMessage",
            rawMessage("Teal.", { taskId: task.id, contextId: task.contextId }),
          );
          expect(refused.status).toBe(429);
          await waitForRun(peergate, task.metadata.peergate.runId, ["input-required"]);
          open();
          expect((await holding).body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
          // The slot is free again: the same answer resumes the run.
          const done = await rpc(
            single.secret,
            "SendMessage",
            rawMessage("Teal.", { taskId: task.id, contextId: task.contextId }),
          );
          expect(done.body.result?.task.status.state, JSON.stringify(done)).toBe(
            "TASK_STATE_COMPLETED",
          );
        } finally {
          open();
          model.stub.respondWith(holdSlotScript(Promise.resolve()));
        }
      });

      it("a resumed run keeps what is left of its budgets, not fresh ones", async () => {
        const tight = await addCaller(peergate, {
          name: `tight-${kind}`,
          kind: "peer",
          tier: "public",
          budgets: { steps: 2 },
        });
        const client = await peergate.client(tight.secret);
        const asked = asTask(
          await client.sendMessage({
            message: userMessage(`scenario:ask-budget Write it (${kind}).`),
          } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const done = asTask(
          await client.sendMessage({ message: answerTo(asked, "Teal.") } as never),
        );
        // With fresh budgets the second question would wait for input again; with what was left
        // (one step) the run answers it with nothing and stops at its step budget.
        expect(done.status?.state).toBe(TaskState.TASK_STATE_FAILED);
        const run = await waitForRun(peergate, readTaskRunId(asked), ["failed"]);
        expect(run.error).toMatchObject({ code: "budget-exceeded", budget: "steps" });
        expect(run.segments).toBe(2);
        const calls = model
          .requestsOf("ask-budget")
          .filter((r) =>
            r.messages.some((m) => m.content === `scenario:ask-budget Write it (${kind}).`),
          );
        expect(calls).toHaveLength(2);
      });

      it("CancelTask ends a task waiting for input; the question's call never ran", async () => {
        const client = await peergate.client(secret);
        const asked = asTask(
          await client.sendMessage({
            message: userMessage("scenario:ask-cancel Write the report."),
          } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const canceled = await client.cancelTask({ id: asked.id } as never);
        expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        const run = await waitForRun(peergate, readTaskRunId(asked), ["canceled"]);
        expect(
          run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
        ).toEqual([["call_ask", "not-started"]]);
        await expect(
          client.sendMessage({ message: answerTo(asked, "Teal.") } as never),
        ).rejects.toThrow();
      });

      it("revoking the caller ends its run waiting for input `revoked`", async () => {
        const name = `revokee-${kind}`;
        const revokee = await addCaller(peergate, { name, kind: "peer", tier: "public" });
        const client = await peergate.client(revokee.secret);
        const asked = asTask(
          await client.sendMessage({
            message: userMessage("scenario:ask-revoke Write the report."),
          } as never),
        );
        expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const revoked = await peergate.admin("POST", `/callers/${name}/revoke`, { reason: "e2e" });
        expect(revoked.status).toBe(200);
        expect(revoked.body).toMatchObject({ waitingRunsRevoked: 1, parkedRunsRejected: 1 });
        const run = await waitForRun(peergate, readTaskRunId(asked), ["revoked"]);
        expect(run.error).toMatchObject({ code: "caller-revoked" });
        expect(
          run.toolCalls.map((c: { callId: string; status: string }) => [c.callId, c.status]),
        ).toEqual([["call_ask", "not-started"]]);
      });

      it("ask_caller beside another call asks nothing: the model reads why and goes on", async () => {
        const client = await peergate.client(secret);
        const done = asTask(
          await client.sendMessage({
            message: userMessage(`scenario:ask-mixed Write the report (${kind}).`),
          } as never),
        );
        expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        const second = model
          .requestsOf("ask-mixed")
          .filter((r) =>
            r.messages.some((m) => m.content === `scenario:ask-mixed Write the report (${kind}).`),
          )
          .at(-1);
        const results = readToolResults(second);
        expect(results.get("call_ask_mixed")).toContain("must be the only tool call of its step");
        expect(results.get("call_time")).toContain("utc");
      });

      it("signs its 1.0 card; the signature verifies with the published JWKS", async () => {
        vi.spyOn(console, "debug").mockImplementation(() => {});
        try {
          const card = (await (
            await fetch(`${peergate.url}/.well-known/agent-card.json`, {
              headers: { "A2A-Version": "1.0" },
            })
          ).json()) as Record<string, unknown> & { signatures?: unknown[] };
          expect(card.signatures).toHaveLength(1);
          const fetchedKeys: string[] = [];
          const verify = verifyAgentCardSignature(async (kid, jku) => {
            if (!jku) throw new Error("no jku");
            fetchedKeys.push(jku);
            const jwks = (await (await fetch(jku)).json()) as { keys: JWK[] };
            const jwk = jwks.keys.find((key) => key.kid === kid);
            if (!jwk) throw new Error(`no key ${kid}`);
            return jwk;
          });
          await expect(verify(card as unknown as AgentCard)).resolves.toBeUndefined();
          expect(fetchedKeys).toEqual([`${peergate.url}/.well-known/jwks.json`]);
          // A card changed after signing does not verify.
          await expect(
            verify({ ...card, name: "someone else" } as unknown as AgentCard),
          ).rejects.toThrow();
        } finally {
          vi.restoreAllMocks();
        }
      });
    },
  );
}
