// Which model runs use (PEERGATE_MODEL / agent.yaml `model`), what its tokens cost, and what a run
// does when there is no model: it fails at once saying how to configure one; nothing else breaks.
import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.ts";
import { computeCostUsd, findModelPrice, parsePriceTable } from "../../src/runs/prices.ts";
import { resolveModel } from "../../src/runs/resolve-model.ts";
import { describeEachDatabase } from "../support/databases.ts";
import {
  insertCaller,
  readRunRow,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
} from "./support.ts";

describe("resolveModel", () => {
  it.each([
    ["openai:gpt-4.1-mini", undefined, "openai.responses"],
    ["anthropic:claude-sonnet-4-5", undefined, "anthropic.messages"],
    [
      "openai-compatible:qwen2.5-7b-instruct",
      "http://127.0.0.1:11434/v1",
      "openai-compatible.chat",
    ],
  ])("builds %s", (modelId, baseUrl, provider) => {
    const resolved = resolveModel({ modelId, baseUrl, apiKey: "sk-test" });
    expect(resolved.ok).toBe(true);
    if (!resolved.ok || typeof resolved.model === "string") throw new Error("no model");
    expect(resolved.id).toBe(modelId);
    expect(resolved.model.provider).toBe(provider);
    expect(resolved.model.modelId).toBe(modelId.slice(modelId.indexOf(":") + 1));
  });

  it.each([
    [undefined, /^no model configured: set PEERGATE_MODEL=.*\(see README\)$/],
    ["  ", /^no model configured/],
    ["gpt-4", /is not provider:model/],
    ["mistral:large", /is not provider:model with a provider of openai, anthropic/],
    ["openai:", /is not provider:model/],
    ["openai-compatible:llama", /needs PEERGATE_MODEL_BASE_URL/],
  ])("explains %j", (modelId, message) => {
    const resolved = resolveModel({ modelId });
    expect(resolved.ok).toBe(false);
    if (resolved.ok) throw new Error("resolved");
    expect(resolved.message).toMatch(message);
  });

  it("refuses a base URL that is not http(s)", () => {
    const resolved = resolveModel({ modelId: "openai-compatible:x", baseUrl: "file:///etc" });
    expect(resolved).toMatchObject({ ok: false, message: /not an http\(s\) URL/ });
  });
});

describe("price table", () => {
  it("reads policies/models.yaml as shipped", async () => {
    const text = await readFile(new URL("../../policies/models.yaml", import.meta.url), "utf8");
    const table = parsePriceTable(text, "policies/models.yaml");
    const price = findModelPrice(table, "openai:gpt-4.1-mini");
    expect(price).toEqual({ inputUsdPerMillionTokens: 0.4, outputUsdPerMillionTokens: 1.6 });
    expect(
      computeCostUsd(price ?? { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }, {
        input: 1_000_000,
        output: 500_000,
      }),
    ).toBeCloseTo(1.2, 9);
    // The shipped default is commented out: unknown models have no price.
    expect(findModelPrice(table, "openai-compatible:whatever")).toBeUndefined();
  });

  it("falls back to `default` and lists every problem of a bad file", () => {
    const table = parsePriceTable(
      "models: {}\ndefault: { inputUsdPerMillionTokens: 1, outputUsdPerMillionTokens: 2 }\n",
      "m.yaml",
    );
    expect(findModelPrice(table, "x:y")).toEqual({
      inputUsdPerMillionTokens: 1,
      outputUsdPerMillionTokens: 2,
    });
    const bad = () =>
      parsePriceTable(
        'models:\n  "a:b": { inputUsdPerMillionTokens: -1, outputUsdPerMillionTokens: 1, extra: 2 }\nprices: 3\n',
        "m.yaml",
      );
    expect(bad).toThrow(ConfigError);
    try {
      bad();
    } catch (error) {
      const problems = (error as ConfigError).problems.map((p) => p.message);
      expect(problems.some((p) => p.includes("models.a:b.inputUsdPerMillionTokens"))).toBe(true);
      expect(problems.some((p) => p.includes("extra") || p.includes("known field"))).toBe(true);
      expect(problems.some((p) => p.includes("prices") || p.includes("known field"))).toBe(true);
    }
    expect(() => parsePriceTable("models: [", "m.yaml")).toThrow(/not valid YAML/);
  });
});

describeEachDatabase("runs without a model", (ctx) => {
  afterEach(stopEngines);

  it("fail at once with the message saying how to configure one", async () => {
    const caller = await insertCaller(ctx.database);
    let claimed = 0;
    const { engine } = await startEngine(ctx.database, {
      options: { model: resolveModel({ modelId: undefined }) },
    });
    const handle = await engine.start({
      caller,
      origin: "webhook",
      messages: [{ role: "user", content: "hi" }],
      atStart: () => {
        claimed += 1;
        return [];
      },
    });
    const outcome = await handle.outcome;
    expect(outcome).toMatchObject({ status: "failed", error: { code: "no-model" } });
    expect(outcome.error?.message).toMatch(/^no model configured: set PEERGATE_MODEL=/);
    // The request's own rows are still written exactly once, with the failed run.
    expect(claimed).toBe(1);
    expect(await readRunRow(ctx.database, handle.runId)).toMatchObject({
      status: "failed",
      error: { code: "no-model" },
      segments: 0,
    });
    // The engine keeps serving: listing works, and the run is there.
    expect((await engine.listRuns()).map((r) => r.status)).toEqual(["failed"]);
  });

  it("record a provider failure as model-error", async () => {
    const caller = await insertCaller(ctx.database);
    const { engine } = await startEngine(ctx.database, {
      model: scriptModel([{ fail: "connection refused" }]),
      options: { maxRetries: 0 },
    });
    const { outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({ status: "failed", error: { code: "model-error" } });
    expect(outcome.error?.message).toMatch(/connection refused/);
  });
});
