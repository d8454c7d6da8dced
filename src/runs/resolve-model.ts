// Which language model runs use: `policies/agent.yaml`'s `model`, or PEERGATE_MODEL over it, as
// `provider:model`. Resolution never throws: with no model (or a bad id) it returns the sentence
// the operator needs, the server keeps serving, and every run fails at once with it (`no-model`).
//
// Keys are passed in, never read here from the environment (src/main.ts reads the environment).
// Without an explicit key the OpenAI and Anthropic providers fall back to their own documented
// variables (OPENAI_API_KEY, ANTHROPIC_API_KEY) when a call is made.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";

export const modelProviders = ["openai", "anthropic", "openai-compatible"] as const;
export type ModelProvider = (typeof modelProviders)[number];

export type ResolvedModel =
  | {
      readonly ok: true;
      readonly model: LanguageModel;
      /** `provider:model`, as configured: the key of the price table. */
      readonly id: string;
    }
  | { readonly ok: false; readonly message: string };

export type ResolveModelInput = {
  /** `provider:model`; undefined or empty means none is configured. */
  readonly modelId: string | undefined;
  /** `openai-compatible` (required there), or a proxy for the other providers. */
  readonly baseUrl?: string | undefined;
  readonly apiKey?: string | undefined;
};

const howToConfigure =
  "set PEERGATE_MODEL=openai:<model>, anthropic:<model> or openai-compatible:<model> " +
  "(with PEERGATE_MODEL_BASE_URL), or `model:` in policies/agent.yaml (see README)";

function fail(message: string): ResolvedModel {
  return { ok: false, message };
}

/**
 * Builds the AI SDK model for `provider:model`.
 *
 * @example
 * const resolved = resolveModel({ modelId: "openai-compatible:qwen2.5-7b-instruct",
 *   baseUrl: "http://127.0.0.1:11434/v1" });
 * if (!resolved.ok) logger.warn(resolved.message);
 */
export function resolveModel(input: ResolveModelInput): ResolvedModel {
  const id = input.modelId?.trim() ?? "";
  if (id === "") return fail(`no model configured: ${howToConfigure}`);
  const colon = id.indexOf(":");
  const provider = colon === -1 ? "" : id.slice(0, colon);
  const name = colon === -1 ? "" : id.slice(colon + 1).trim();
  if (!(modelProviders as readonly string[]).includes(provider) || name === "") {
    return fail(
      `model ${JSON.stringify(id)} is not provider:model with a provider of ${modelProviders.join(", ")}: ${howToConfigure}`,
    );
  }
  const baseURL = input.baseUrl?.trim() || undefined;
  const apiKey = input.apiKey || undefined;
  if (baseURL !== undefined && !isHttpUrl(baseURL)) {
    return fail(`PEERGATE_MODEL_BASE_URL ${JSON.stringify(baseURL)} is not an http(s) URL`);
  }
  switch (provider as ModelProvider) {
    case "openai":
      return { ok: true, id, model: createOpenAI({ baseURL, apiKey })(name) };
    case "anthropic":
      return { ok: true, id, model: createAnthropic({ baseURL, apiKey })(name) };
    case "openai-compatible":
      if (baseURL === undefined) {
        return fail(
          `model ${JSON.stringify(id)} needs PEERGATE_MODEL_BASE_URL, the server's OpenAI-compatible API root (e.g. http://127.0.0.1:11434/v1 for Ollama)`,
        );
      }
      return {
        ok: true,
        id,
        model: createOpenAICompatible({
          name: "openai-compatible",
          baseURL,
          apiKey,
          // Streamed answers carry token usage only when asked: budgets need it.
          includeUsage: true,
        }).chatModel(name),
      };
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}
