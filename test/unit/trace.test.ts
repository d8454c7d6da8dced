// src/trace.ts and the model-call telemetry (src/runs/model-telemetry.ts) against the real SDK
// with an in-memory exporter: off, nothing is recorded and nothing is passed to the AI SDK; on, a
// model call through the AI SDK becomes a `chat <model>` span with the GenAI attributes, holding
// the prompt and the answer only when content is allowed; a log line inside a span carries its
// ids; an incoming traceparent is taken only when well formed.
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { generateText } from "ai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.ts";
import { modelCallTelemetry } from "../../src/runs/model-telemetry.ts";
import { resolveModel } from "../../src/runs/resolve-model.ts";
import { inSpan, remoteContext, setTracing, startSpan, tracing } from "../../src/trace.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";

const exporter = new InMemorySpanExporter();
let stub: OpenAiStub;
let baseUrl: string;

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
  stub = createOpenAiStub();
  baseUrl = await stub.listen();
  stub.respondWith(() => ({ text: "the answer-words", usage: { prompt: 7, completion: 3 } }));
});

afterAll(async () => {
  setTracing(false);
  trace.disable();
  context.disable();
  await stub.close();
});

afterEach(() => {
  setTracing(false);
  exporter.reset();
});

function model() {
  const resolved = resolveModel({
    modelId: "openai-compatible:unit-model",
    baseUrl,
    apiKey: "unit-key",
  });
  if (!resolved.ok) throw new Error(resolved.message);
  return resolved.model;
}

async function oneModelCall() {
  const telemetry = modelCallTelemetry();
  try {
    await inSpan("outer", {}, () =>
      generateText({ model: model(), prompt: "the prompt-words", ...telemetry.options }),
    );
  } finally {
    telemetry.close();
  }
}

describe("traces", () => {
  it("record nothing and hand the AI SDK nothing while off", async () => {
    expect(tracing()).toBe(false);
    expect(modelCallTelemetry().options).toEqual({});
    expect(startSpan("x", {}).isRecording()).toBe(false);
    expect(await inSpan("x", {}, (span) => span.isRecording())).toBe(false);
    await oneModelCall();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("make a model call a GenAI span under the active one, without content by default", async () => {
    setTracing(true);
    await oneModelCall();
    const spans = exporter.getFinishedSpans();
    const outer = spans.find((s) => s.name === "outer");
    const chat = spans.find((s) => s.name === "chat unit-model");
    expect(chat?.parentSpanContext?.spanId).toBe(outer?.spanContext().spanId);
    expect(chat?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "unit-model",
      "gen_ai.usage.input_tokens": 7,
      "gen_ai.usage.output_tokens": 3,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    const everything = JSON.stringify(spans.map((s) => s.attributes));
    expect(everything).not.toContain("prompt-words");
    expect(everything).not.toContain("answer-words");
    expect(everything).not.toContain("unit-key");
  });

  it("carry the prompt and the answer only when the operator allows content", async () => {
    setTracing(true, { content: true });
    await oneModelCall();
    const chat = exporter.getFinishedSpans().find((s) => s.name === "chat unit-model");
    expect(String(chat?.attributes["gen_ai.input.messages"])).toContain("prompt-words");
    expect(String(chat?.attributes["gen_ai.output.messages"])).toContain("answer-words");
  });

  it("put the span's ids on a log line written inside it, and none outside", async () => {
    setTracing(true);
    const lines: string[] = [];
    const logger = createLogger({ level: "info", write: (l) => lines.push(l) });
    const ids = await inSpan("logged", {}, (span) => {
      logger.info("inside");
      return span.spanContext();
    });
    logger.info("outside");
    const [inside, outside] = lines.map((l) => JSON.parse(l));
    expect(inside).toMatchObject({ trace_id: ids.traceId, span_id: ids.spanId });
    expect(outside.trace_id).toBeUndefined();
  });

  it("continue a well-formed traceparent and ignore a malformed one", async () => {
    setTracing(true);
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = remoteContext(`00-${traceId}-00f067aa0ba902b7-00`, undefined);
    const child = await inSpan("child", {}, (s) => s.spanContext(), { parent });
    expect(child.traceId).toBe(traceId);
    for (const bad of [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      `ff-${traceId}-00f067aa0ba902b7-01`,
      `00-${traceId}-00f067aa0ba902b7-01-extra`,
      `00-${traceId.toUpperCase()}-00f067aa0ba902b7-01`,
      "garbage",
    ]) {
      expect(remoteContext(bad, undefined), bad).toBeUndefined();
    }
  });
});
