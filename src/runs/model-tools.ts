// What the model is offered: the run's `offered` tools that this process implements, each with its
// implementation's description and argument schema, and nothing else (never a hidden half, never
// an alias). The AI SDK tools have no `execute`: the engine runs every call itself, through the
// executor's gate, including calls to names it never offered.
//
// Providers limit function names (OpenAI: [A-Za-z0-9_-], at most 64), while peergate's may hold
// dots (MCP tools are `server.tool`). Such a tool is offered under a sanitised name, and only that
// exact name is translated back; every other name reaches the gate exactly as the model sent it.
import { jsonSchema, type ToolSet, tool } from "ai";
import { z } from "zod";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import type { ToolImplementation } from "../tools/types.ts";

const providerNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

export type ModelTools = {
  readonly tools: ToolSet;
  /** Model-facing name → canonical name, for the offered tools renamed for the provider. */
  readonly renamed: ReadonlyMap<string, string>;
};

const schemas = new WeakMap<z.ZodType, Record<string, unknown>>();

/** The JSON schema the model sees for a tool's arguments (validation is the engine's, with zod). */
function describeSchema(schema: z.ZodType): Record<string, unknown> {
  const cached = schemas.get(schema);
  if (cached) return cached;
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(schema, {
      target: "draft-7",
      io: "input",
      unrepresentable: "any",
    }) as Record<string, unknown>;
    delete json.$schema;
  } catch {
    json = { type: "object" };
  }
  schemas.set(schema, json);
  return json;
}

type Built = {
  readonly implementations: ReadonlyMap<string, ToolImplementation>;
  readonly reserved: NamesKnown;
  readonly modelTools: ModelTools;
};

/** What `reserved` must answer: whether the inventory knows a name (a Set or the names' Map). */
type NamesKnown = { has(name: string): boolean };

/**
 * Per effective set (one object per policy generation, caller version and narrowing, see
 * run-core.ts `toolSetFor`): the model's tools depend on nothing else, so every run of a caller
 * offers the same objects until the policies or the caller change (issue 28).
 */
const built = new WeakMap<EffectiveToolSet, Built>();

/**
 * Builds the tools a run offers the model. `reserved` holds every name the inventory knows, so a
 * sanitised name can never coincide with another tool's name, alias or hidden half. Built once per
 * (set, implementations, reserved): the result is shared, and nobody modifies it.
 */
export function buildModelTools(
  set: EffectiveToolSet,
  implementations: ReadonlyMap<string, ToolImplementation>,
  reserved: NamesKnown,
): ModelTools {
  const hit = built.get(set);
  if (hit && hit.implementations === implementations && hit.reserved === reserved) {
    return hit.modelTools;
  }
  const modelTools = buildAfresh(set, implementations, reserved);
  built.set(set, { implementations, reserved, modelTools });
  return modelTools;
}

function buildAfresh(
  set: EffectiveToolSet,
  implementations: ReadonlyMap<string, ToolImplementation>,
  reserved: NamesKnown,
): ModelTools {
  const tools: ToolSet = {};
  const renamed = new Map<string, string>();
  for (const descriptor of set.offered) {
    const impl = implementations.get(descriptor.name);
    if (impl === undefined) continue;
    let name = descriptor.name;
    if (!providerNamePattern.test(name)) {
      const base = name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60);
      name = base;
      for (let n = 2; reserved.has(name) || name in tools; n++) name = `${base}_${n}`;
      renamed.set(name, descriptor.name);
    }
    tools[name] = tool({
      description: impl.description || descriptor.description,
      inputSchema: jsonSchema(describeSchema(impl.inputSchema)),
    });
  }
  return { tools, renamed };
}
