// The effective tool set of a run: DESIGN §3's six steps, in order, on the built-in inventory.
import { describe, expect, it } from "vitest";
import { type Ceiling, computeCeiling } from "../../src/policy/ceiling.ts";
import { effectiveToolSet } from "../../src/policy/effective-set.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";
import { makeAgent, makeCaller } from "./fixtures.ts";

const built = createInventory(builtinTools, "builtins");
if (!built.ok) throw new Error("built-ins refused");
const inventory = built.inventory;

/** A ceiling admitting every tool: shows what the effective set does on its own. */
const everything: Ceiling = {
  admitted: new Set(builtinTools.map((t) => t.name)),
  decisions: [],
  unknownAllowEntries: [],
};

function namesOf(set: ReturnType<typeof effectiveToolSet>) {
  return Object.fromEntries([...set.names].map(([name, entry]) => [name, entry.kind]));
}

describe("effectiveToolSet", () => {
  it("adds aliases and hidden halves of what remains, and advertises only the tools", () => {
    const agent = makeAgent({ tools: ["find", "write_file", "get_time"] });
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "internal", allow: ["write_file"] }),
    );
    const set = effectiveToolSet(inventory, agent, ceiling);
    expect(namesOf(set)).toEqual({
      find: "tool",
      glob: "alias",
      write_file: "tool",
      execute_write_file: "execute-half",
      get_time: "tool",
    });
    expect(set.offered.map((t) => t.name)).toEqual(["find", "get_time", "write_file"]);
  });

  it("step 1: an alias in the agent's tools brings in its tool", () => {
    const agent = makeAgent({ tools: ["glob"] });
    const set = effectiveToolSet(inventory, agent, everything);
    expect(namesOf(set)).toEqual({ find: "tool", glob: "alias" });
  });

  it("step 1: a hidden half in the agent's tools brings in nothing", () => {
    const agent = makeAgent({ tools: ["execute_write_file"] });
    expect(effectiveToolSet(inventory, agent, everything).names.size).toBe(0);
  });

  it("steps 2 and 6: a denial removes the tool and every name that points at it", () => {
    for (const denied of ["find", "glob"]) {
      const set = effectiveToolSet(inventory, makeAgent({ deniedTools: [denied] }), everything);
      expect(set.names.has("find")).toBe(false);
      expect(set.names.has("glob")).toBe(false);
    }
    for (const denied of ["execute_command", "execute_execute_command", "shell"]) {
      const set = effectiveToolSet(inventory, makeAgent({ deniedTools: [denied] }), everything);
      expect(set.names.has("execute_command")).toBe(false);
      expect(set.names.has("execute_execute_command")).toBe(false);
    }
  });

  it("step 3: carve-outs are removed even when the ceiling admits them", () => {
    const set = effectiveToolSet(inventory, makeAgent(), everything);
    expect(set.names.has("ask_user_question")).toBe(false);
    expect(set.names.has("manage_memory")).toBe(false);
    expect(set.names.has("read_file")).toBe(true);
  });

  it("step 4: nothing outside the ceiling, and a revoked caller's set is empty", () => {
    const agent = makeAgent();
    const revoked = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "none", allow: ["write_file"] }),
    );
    const set = effectiveToolSet(inventory, agent, revoked);
    expect(set.names.size).toBe(0);
    expect(set.offered).toEqual([]);
  });

  it("a resumed run is narrowed to the set it started with, never wider", () => {
    const agent = makeAgent();
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "private", allow: ["write_file", "execute_command"] }),
    );
    const set = effectiveToolSet(inventory, agent, ceiling, {
      within: new Set(["read_file", "write_file", "web_fetch"]),
    });
    // web_fetch was in the original set but is not in today's ceiling: it stays out.
    expect(namesOf(set)).toEqual({
      read_file: "tool",
      write_file: "tool",
      execute_write_file: "execute-half",
    });
  });
});
