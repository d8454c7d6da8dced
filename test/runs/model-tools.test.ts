// What the model is offered: the set's offered tools this process implements, under names a
// provider accepts, with the implementation's description and JSON schema; never a hidden half.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { computeCeiling } from "../../src/policy/ceiling.ts";
import { effectiveToolSet } from "../../src/policy/effective-set.ts";
import { createInventory, describeTool } from "../../src/policy/tools.ts";
import { isAutoApproved } from "../../src/runs/approval-policy.ts";
import { buildModelTools } from "../../src/runs/model-tools.ts";
import type { ToolImplementation } from "../../src/tools/types.ts";

function implement(name: string, inputSchema: z.ZodType = z.strictObject({})): ToolImplementation {
  return {
    name,
    description: `does ${name}`,
    inputSchema,
    execute: async () => ({ ok: true, content: "" }),
  };
}

describe("buildModelTools", () => {
  const built = createInventory(
    [
      describeTool({
        name: "notes.search",
        category: "mcp",
        risk: "read-only",
        disclosure: "public",
        egress: false,
      }),
      describeTool({
        name: "notes_search",
        category: "mcp",
        risk: "read-only",
        disclosure: "public",
        egress: false,
      }),
      describeTool({
        name: "write_it",
        category: "custom",
        risk: "high-risk",
        disclosure: "public",
        egress: false,
        twoPhase: true,
      }),
      describeTool({
        name: "unimplemented",
        category: "custom",
        risk: "read-only",
        disclosure: "public",
        egress: false,
      }),
    ],
    "v1",
  );
  if (!built.ok) throw new Error("inventory");
  const inventory = built.inventory;
  const agent = { tools: ["mcp", "custom"], deniedTools: [], version: "a1" };
  const ceiling = computeCeiling(inventory, agent, {
    name: "c",
    tier: "public",
    allow: ["write_it"],
    version: 1,
  });
  const set = effectiveToolSet(inventory, agent, ceiling);
  const implementations = new Map(
    [
      implement("notes.search", z.strictObject({ query: z.string().describe("what to find") })),
      implement("notes_search"),
      implement("write_it"),
    ].map((t) => [t.name, t]),
  );

  it("offers implemented tools only, renaming what a provider would refuse", () => {
    const { tools, renamed } = buildModelTools(
      set,
      implementations,
      new Set(inventory.names.keys()),
    );
    // `notes_search` is taken by another tool: the dotted one gets a name of its own.
    expect(Object.keys(tools).sort()).toEqual(["notes_search", "notes_search_2", "write_it"]);
    expect(renamed).toEqual(new Map([["notes_search_2", "notes.search"]]));
    expect(set.names.has("execute_write_it")).toBe(true);
    expect(Object.keys(tools)).not.toContain("execute_write_it");
    const offered = tools.notes_search_2;
    if (offered === undefined) throw new Error("notes_search_2 not offered");
    const schema = (offered.inputSchema as { jsonSchema: unknown }).jsonSchema;
    expect(schema).toMatchObject({
      type: "object",
      properties: { query: { type: "string", description: "what to find" } },
      required: ["query"],
    });
    expect(offered.description).toBe("does notes.search");
  });

  it("builds once per effective set: the same set offers the same tools, new implementations rebuild", () => {
    const first = buildModelTools(set, implementations, inventory.names);
    expect(buildModelTools(set, implementations, inventory.names)).toBe(first);
    const reloaded = new Map(implementations);
    const rebuilt = buildModelTools(set, reloaded, inventory.names);
    expect(rebuilt).not.toBe(first);
    expect(Object.keys(rebuilt.tools).sort()).toEqual(Object.keys(first.tools).sort());
    // A narrower set (a resumed run's) is another object, with tools of its own.
    const narrowed = effectiveToolSet(inventory, agent, ceiling, { within: new Set(["write_it"]) });
    expect(Object.keys(buildModelTools(narrowed, implementations, inventory.names).tools)).toEqual([
      "write_it",
    ]);
  });
});

describe("isAutoApproved", () => {
  it.each([
    ["auto", "unknown", true],
    ["auto", "high-risk", true],
    ["read-only", "read-only", true],
    ["read-only", "low-risk", false],
    ["low-risk", "low-risk", true],
    ["low-risk", "high-risk", false],
    ["high-risk", "high-risk", true],
    ["high-risk", "unknown", false],
    ["read-only", "unknown", false],
  ] as const)("policy %s, risk %s → %s", (policy, risk, expected) => {
    expect(isAutoApproved(policy, risk)).toBe(expected);
  });
});
