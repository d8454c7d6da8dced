// Model latency for /metrics: the configured model wrapped so every call (a turn of a run, the
// command classifier's question) is timed from the request until the model's answer starts
// (a streamed answer: the first part; a whole answer: its end), by model and outcome. The timings
// are this instance's own, unlike the database-read gauges in src/metrics.ts.
import { type LanguageModel, wrapLanguageModel } from "ai";
import type { ResolvedModel } from "./runs/resolve-model.ts";

export type ModelCallOutcome = "ok" | "error";
export type ModelCallListener = (model: string, seconds: number, outcome: ModelCallOutcome) => void;

/** Where timed model calls are told; /metrics subscribes (createMetrics({ modelCalls })). */
export type ModelCallLog = {
  record(model: string, seconds: number, outcome: ModelCallOutcome): void;
  subscribe(listener: ModelCallListener): void;
};

export function createModelCallLog(): ModelCallLog {
  const listeners: ModelCallListener[] = [];
  return {
    record: (model, seconds, outcome) => {
      for (const listener of listeners) listener(model, seconds, outcome);
    },
    subscribe: (listener) => {
      listeners.push(listener);
    },
  };
}

/** The same model, timed into `log`; a model given by name only (a string) is left as it is. */
export function timeModelCalls(resolved: ResolvedModel, log: ModelCallLog): ResolvedModel {
  if (!resolved.ok || typeof resolved.model === "string") return resolved;
  const id = resolved.id;
  const timed = async <T>(call: () => PromiseLike<T>): Promise<T> => {
    const started = performance.now();
    try {
      const result = await call();
      log.record(id, (performance.now() - started) / 1000, "ok");
      return result;
    } catch (error) {
      log.record(id, (performance.now() - started) / 1000, "error");
      throw error;
    }
  };
  const model: LanguageModel = wrapLanguageModel({
    model: resolved.model,
    middleware: {
      wrapGenerate: ({ doGenerate }) => timed(doGenerate),
      wrapStream: ({ doStream }) => timed(doStream),
    },
  });
  return { ...resolved, model };
}
