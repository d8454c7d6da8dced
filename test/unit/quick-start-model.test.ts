// The quick start names its model the way the servers it lists name them (issue 27): Ollama
// answers only to a tag it has pulled (`qwen2.5:7b-instruct`; `qwen2.5-7b-instruct` is "model not
// found"), so the README's `ollama pull` line, its `PEERGATE_MODEL` and its price line must all
// name the same tag, and the other servers' rows must give each a name it accepts.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { resolveModel } from "../../src/runs/resolve-model.ts";

const readme = readFileSync(path.resolve(import.meta.dirname, "../../README.md"), "utf8");
/** Ollama's model names: `name:tag`, lower case, as `ollama list` prints them. */
const ollamaTag = /^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)?:[a-z0-9][a-z0-9._-]*$/;

describe("the README's quick start model", () => {
  const pulled = /^ollama pull (\S+)$/m.exec(readme)?.[1];
  const exported = /^export PEERGATE_MODEL=(\S+)$/m.exec(readme)?.[1];
  const priced = /^ {2}"(openai-compatible:[^"]+)": \{ inputUsdPerMillionTokens: 0/m.exec(
    readme,
  )?.[1];

  it("is an Ollama tag, pulled, configured and priced under one name", () => {
    expect(pulled).toMatch(ollamaTag);
    expect(exported).toBe(`openai-compatible:${pulled}`);
    expect(priced).toBe(exported);
  });

  it("reaches the server under that tag: only the first colon separates the provider", () => {
    const resolved = resolveModel({ modelId: exported, baseUrl: "http://127.0.0.1:11434/v1" });
    expect(resolved.ok).toBe(true);
    const model = resolved.ok ? (resolved.model as { modelId?: string }) : undefined;
    expect(model?.modelId).toBe(pulled);
  });

  it("names a model each listed server accepts", () => {
    const rows = Object.fromEntries(
      [
        ...readme.matchAll(
          /^\| (Ollama|LM Studio|vLLM|llama\.cpp `llama-server`) \|.*\| `(openai-compatible:[^`]+)` \|$/gm,
        ),
      ].map((m) => [m[1], m[2]]),
    );
    expect(rows.Ollama).toBe(exported);
    // vLLM serves a Hugging Face id unless told otherwise; LM Studio its identifier, no colon tag.
    expect(rows.vLLM).toMatch(/^openai-compatible:[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/);
    expect(rows["LM Studio"]).toMatch(/^openai-compatible:[a-z0-9._-]+$/);
    expect(rows["llama.cpp `llama-server`"]).toMatch(/^openai-compatible:/);
  });
});
