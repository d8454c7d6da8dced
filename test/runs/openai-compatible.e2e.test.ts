// End to end through the real `@ai-sdk/openai-compatible` provider (built by resolveModel) against
// a tiny OpenAI-compatible chat-completions stub on 127.0.0.1. The stub's scripted model tries a
// tool outside the ceiling, a hidden half, a name that exists nowhere and a tool in the ceiling:
// only the last executes, and the model reads the same refusal for the other three.
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { generateText } from "ai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { resolveModel } from "../../src/runs/resolve-model.ts";
import { describeEachDatabase } from "../support/databases.ts";
import {
  insertCaller,
  readRunRow,
  readToolCalls,
  runToEnd,
  startEngine,
  stopEngines,
} from "./support.ts";

type StubCall = { id: string; name: string; arguments: string };
type StubStep = { text?: string; calls?: StubCall[] };

type ChatRequest = {
  model: string;
  stream?: boolean;
  messages: Array<{ role: string; content?: unknown; tool_call_id?: string }>;
  tools?: Array<{ type: string; function: { name: string } }>;
};

/** An OpenAI-compatible `/v1/chat/completions` that plays scripted steps, streamed or not. */
function createStub() {
  let script: StubStep[] = [];
  const requests: Array<{ body: ChatRequest; authorization: string | undefined }> = [];

  const respond = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
    requests.push({ body, authorization: req.headers.authorization });
    const step = script[requests.length - 1] ?? { text: "nothing more to say" };
    const toolCalls = (step.calls ?? []).map((call, index) => ({
      index,
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments },
    }));
    const finish = toolCalls.length > 0 ? "tool_calls" : "stop";
    const usage = { prompt_tokens: 21, completion_tokens: 4, total_tokens: 25 };
    const base = { id: `chatcmpl-${requests.length}`, created: 1_700_000_000, model: body.model };

    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          ...base,
          object: "chat.completion",
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: step.text ?? null,
                ...(toolCalls.length > 0
                  ? { tool_calls: toolCalls.map(({ index: _i, ...call }) => call) }
                  : {}),
              },
              finish_reason: finish,
            },
          ],
          usage,
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (delta: unknown, finishReason: string | null = null) =>
      send({
        ...base,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta, finish_reason: finishReason }],
      });
    chunk({ role: "assistant", content: "" });
    if (step.text) {
      // In two pieces, as a real server streams.
      const half = Math.ceil(step.text.length / 2);
      chunk({ content: step.text.slice(0, half) });
      chunk({ content: step.text.slice(half) });
    }
    for (const call of toolCalls) {
      chunk({
        tool_calls: [
          {
            index: call.index,
            id: call.id,
            type: "function",
            function: { name: call.function.name, arguments: "" },
          },
        ],
      });
      chunk({
        tool_calls: [{ index: call.index, function: { arguments: call.function.arguments } }],
      });
    }
    chunk({}, finish);
    send({ ...base, object: "chat.completion.chunk", choices: [], usage });
    res.write("data: [DONE]\n\n");
    res.end();
  };

  const server: Server = createServer((req, res) => {
    respond(req, res).catch(() => res.writeHead(500).end());
  });
  return {
    server,
    requests,
    play(steps: StubStep[]) {
      script = steps;
      requests.length = 0;
    },
    async listen(): Promise<string> {
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    },
  };
}

const stub = createStub();
let baseUrl = "";

beforeAll(async () => {
  baseUrl = await stub.listen();
});
afterAll(async () => {
  stub.server.close();
  stub.server.closeAllConnections();
});

const modelFor = () =>
  resolveModel({ modelId: "openai-compatible:stub-model", baseUrl, apiKey: "stub-key" });

describe("the OpenAI-compatible stub", () => {
  it("answers a non-streaming request too", async () => {
    stub.play([{ text: "plain answer" }]);
    const resolved = modelFor();
    if (!resolved.ok) throw new Error(resolved.message);
    const result = await generateText({ model: resolved.model, prompt: "hi", maxRetries: 0 });
    expect(result.text).toBe("plain answer");
    expect(stub.requests[0]?.body.stream).toBeFalsy();
  });
});

describeEachDatabase("runs through @ai-sdk/openai-compatible", (ctx) => {
  afterEach(stopEngines);

  it("executes only the tool inside the ceiling", async () => {
    stub.play([
      {
        text: "Checking.",
        calls: [
          { id: "call_outside", name: "read_file", arguments: '{"path":"/etc/shadow"}' },
          {
            id: "call_half",
            name: "execute_write_file",
            arguments: '{"path":"x","content":"owned"}',
          },
          { id: "call_unknown", name: "launch_missiles", arguments: "{}" },
          { id: "call_ok", name: "get_time", arguments: "{}" },
        ],
      },
      { text: "It is midnight in 2026." },
    ]);
    const caller = await insertCaller(ctx.database, { tier: "public", allow: ["write_file"] });
    const resolved = modelFor();
    const { engine, tools } = await startEngine(ctx.database, {
      options: { model: resolved, maxRetries: 0 },
    });

    const { runId, outcome, events } = await runToEnd(engine, caller, "What time is it?");

    expect(outcome).toMatchObject({ status: "completed", text: "It is midnight in 2026." });
    expect(tools.log.executed).toEqual(["get_time({})"]);

    // The provider streamed; the model was offered the set's tools only, with the key we gave.
    expect(stub.requests).toHaveLength(2);
    const [first, second] = stub.requests;
    expect(first?.body.stream).toBe(true);
    expect(first?.authorization).toBe("Bearer stub-key");
    expect(first?.body.tools?.map((t) => t.function.name).sort()).toEqual([
      "get_time",
      "write_file",
    ]);
    expect(first?.body.messages[0]).toMatchObject({
      role: "system",
      content: "You are the run engine test agent.",
    });

    const results = new Map(
      (second?.body.messages ?? [])
        .filter((m) => m.role === "tool")
        .map((m) => [m.tool_call_id, String(m.content)]),
    );
    expect(results.get("call_ok")).toBe("2026-01-01T00:00:00Z");
    const refusals = ["call_outside", "call_half", "call_unknown"].map((id) =>
      (results.get(id) ?? "").replace(/"[^"]*"/, '"…"'),
    );
    expect(refusals).toEqual([
      'Tool "…" is not available in this run.',
      'Tool "…" is not available in this run.',
      'Tool "…" is not available in this run.',
    ]);

    const rows = await readToolCalls(ctx.database, runId);
    expect([...rows.values()].map((r) => [r.callId, r.status]).sort()).toEqual([
      ["call_half", "refused"],
      ["call_ok", "completed"],
      ["call_outside", "refused"],
      ["call_unknown", "refused"],
    ]);
    const deltas = events.flatMap((e) => (e.type === "text-delta" ? [e.delta] : []));
    expect(deltas.join("")).toBe("Checking.It is midnight in 2026.");
    expect((await readRunRow(ctx.database, runId)).budgetUsed).toMatchObject({
      tokens: 50,
      steps: 2,
    });
  });
});
