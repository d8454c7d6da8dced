// End to end through the real `@ai-sdk/openai-compatible` provider (built by resolveModel) against
// a tiny OpenAI-compatible chat-completions stub on 127.0.0.1. The stub's scripted model tries a
// tool outside the ceiling, a hidden half, a name that exists nowhere and a tool in the ceiling:
// only the last executes, and the model reads the same refusal for the other three.
import { generateText } from "ai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { resolveModel } from "../../src/runs/resolve-model.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { createOpenAiStub } from "../support/openai-stub.ts";
import {
  insertCaller,
  readRunRow,
  readToolCalls,
  runToEnd,
  startEngine,
  stopEngines,
} from "./support.ts";

const stub = createOpenAiStub();
let baseUrl = "";

beforeAll(async () => {
  baseUrl = await stub.listen();
});
afterAll(async () => {
  await stub.close();
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
