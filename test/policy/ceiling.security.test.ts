// Hostile inputs to the ceiling: names that look like real tools, prototype keys, huge allow lists,
// and the precedence rules an attacker would lean on (allow versus revocation, denial, carve-outs).
import { describe, expect, it } from "vitest";
import { computeCeiling, explainUnknownAllowEntry } from "../../src/policy/ceiling.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";
import { listHostileVariants, makeAgent, makeCaller } from "./fixtures.ts";

const built = createInventory(builtinTools, "builtins");
if (!built.ok) throw new Error("built-ins refused");
const inventory = built.inventory;
const agent = makeAgent();
const actingOrEgress = builtinTools.filter(
  (t) => (t.risk !== "read-only" || t.egress) && !t.needsPerson && !t.persistsOperatorState,
);

describe("allow entries that only look like a tool", () => {
  for (const tool of actingOrEgress) {
    const variants = listHostileVariants(tool.name);
    it(`${tool.name}: ${variants.length} look-alikes admit nothing and are all reported`, () => {
      const ceiling = computeCeiling(
        inventory,
        agent,
        makeCaller({ tier: "private", allow: variants }),
      );
      expect(ceiling.admitted.has(tool.name)).toBe(false);
      for (const name of ceiling.admitted) {
        const admittedTool = builtinTools.find((t) => t.name === name);
        expect(admittedTool?.risk).toBe("read-only");
        expect(admittedTool?.egress).toBe(false);
      }
      expect(ceiling.unknownAllowEntries).toEqual(variants);
    });
  }

  it("includes the Cyrillic а, zero-width, RTL and trailing-space cases explicitly", () => {
    const hostile = [
      "web_fetch".replace("e", "\u0435"),
      "write_file\u200b",
      "\u202ewrite_file",
      "write_file ",
      "Write_File",
      "execute_command".replace("e", "\u0435"),
    ];
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "private", allow: hostile }),
    );
    expect([...ceiling.admitted]).toEqual(["read_file", "ls", "find", "grep", "stat", "get_time"]);
    expect(ceiling.unknownAllowEntries).toEqual(hostile);
  });

  it("explains near misses so an operator sees why the entry did nothing", () => {
    expect(explainUnknownAllowEntry(inventory, "Write_File")).toMatch(/looks like write_file/);
    expect(explainUnknownAllowEntry(inventory, "write_file ")).toMatch(/looks like write_file/);
    expect(explainUnknownAllowEntry(inventory, "\u202ewrite_file\u200b")).toMatch(
      /looks like write_file/,
    );
    expect(explainUnknownAllowEntry(inventory, "glob")).toMatch(/alias of find/);
    expect(explainUnknownAllowEntry(inventory, "execute_write_file")).toMatch(
      /hidden execute half/,
    );
    expect(explainUnknownAllowEntry(inventory, "__proto__")).toBe("names no tool");
  });
});

describe("prototype keys", () => {
  it.each(["__proto__", "constructor", "toString", "hasOwnProperty", "prototype", "valueOf"])(
    "%s in allow admits nothing and is reported",
    (entry) => {
      const ceiling = computeCeiling(
        inventory,
        agent,
        makeCaller({ tier: "public", allow: [entry] }),
      );
      expect([...ceiling.admitted]).toEqual(["get_time"]);
      expect(ceiling.unknownAllowEntries).toEqual([entry]);
    },
  );

  it("a caller named __proto__ with tier __proto__ gets nothing", () => {
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ name: "__proto__", tier: "__proto__", allow: ["write_file"] }),
    );
    expect(ceiling.admitted.size).toBe(0);
    expect(ceiling.decisions.every((d) => d.reason === "tier-unknown")).toBe(true);
  });

  it("does not pollute Object.prototype", () => {
    computeCeiling(inventory, agent, makeCaller({ allow: ["__proto__", "constructor"] }));
    expect(({} as Record<string, unknown>).write_file).toBeUndefined();
    expect(Object.keys(Object.prototype)).toEqual([]);
  });
});

describe("aliases and hidden halves in allow", () => {
  it("an alias in allow names no tool (allow matches canonical names only)", () => {
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "public", allow: ["glob"] }),
    );
    expect(ceiling.admitted.has("find")).toBe(false);
    expect(ceiling.unknownAllowEntries).toEqual(["glob"]);
  });

  it("a hidden half in allow admits neither half", () => {
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "private", allow: ["execute_write_file", "execute_execute_command"] }),
    );
    expect(ceiling.admitted.has("write_file")).toBe(false);
    expect(ceiling.admitted.has("execute_command")).toBe(false);
    expect(ceiling.admitted.has("execute_write_file")).toBe(false);
    expect(ceiling.unknownAllowEntries).toEqual(["execute_write_file", "execute_execute_command"]);
  });
});

describe("precedence", () => {
  it("revocation beats allow, denial and everything else", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ deniedTools: ["write_file"] }),
      makeCaller({ tier: "none", allow: builtinTools.map((t) => t.name) }),
    );
    expect(ceiling.admitted.size).toBe(0);
    expect(ceiling.decisions.map((d) => d.reason)).toEqual(
      builtinTools.map(() => "caller-revoked"),
    );
  });

  it("agent denial beats allow, and a denied alias denies its tool", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ deniedTools: ["write_file", "glob"] }),
      makeCaller({ tier: "private", allow: ["write_file", "find"] }),
    );
    const reasons = new Map(ceiling.decisions.map((d) => [d.tool, d.reason]));
    expect(reasons.get("write_file")).toBe("denied-by-agent");
    expect(reasons.get("find")).toBe("denied-by-agent");
    expect(ceiling.admitted.has("write_file")).toBe(false);
    expect(ceiling.admitted.has("find")).toBe(false);
  });

  it("denying a hidden half denies the whole two-phase tool", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ deniedTools: ["execute_execute_command"] }),
      makeCaller({ tier: "private", allow: ["execute_command"] }),
    );
    expect(ceiling.admitted.has("execute_command")).toBe(false);
    expect(ceiling.decisions.find((d) => d.tool === "execute_command")?.reason).toBe(
      "denied-by-agent",
    );
  });

  it("denying a category denies every tool in it", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ deniedTools: ["files"] }),
      makeCaller({ tier: "private", allow: ["write_file"] }),
    );
    expect([...ceiling.admitted]).toEqual(["get_time"]);
  });

  it("carve-outs beat allow at every tier", () => {
    for (const tier of ["public", "internal", "private"]) {
      const ceiling = computeCeiling(
        inventory,
        agent,
        makeCaller({ tier, allow: ["ask_user_question", "manage_memory"] }),
      );
      expect(ceiling.admitted.has("ask_user_question")).toBe(false);
      expect(ceiling.admitted.has("manage_memory")).toBe(false);
      const reasons = new Map(ceiling.decisions.map((d) => [d.tool, d.reason]));
      expect(reasons.get("ask_user_question")).toBe("needs-a-person");
      expect(reasons.get("manage_memory")).toBe("persists-operator-state");
    }
  });

  it("an agent that does not offer a tool keeps it out whatever allow says", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ tools: ["get_time"] }),
      makeCaller({ tier: "private", allow: ["write_file", "execute_command"] }),
    );
    expect([...ceiling.admitted]).toEqual(["get_time"]);
  });

  it("an agent naming a hidden half in its tools offers nothing by it", () => {
    const ceiling = computeCeiling(
      inventory,
      makeAgent({ tools: ["execute_write_file"] }),
      makeCaller({ tier: "private", allow: ["write_file"] }),
    );
    expect(ceiling.admitted.size).toBe(0);
  });
});

describe("a 10 000-entry allow list", () => {
  const huge = Array.from({ length: 10_000 }, (_, i) =>
    i % 3 === 0 ? `write_file${"\u200b".repeat(1 + (i % 5))}` : i % 3 === 1 ? `x${i}` : "__proto__",
  );

  it("admits nothing it does not name exactly, and reports each unknown entry once", () => {
    const ceiling = computeCeiling(inventory, agent, makeCaller({ tier: "public", allow: huge }));
    expect([...ceiling.admitted]).toEqual(["get_time"]);
    expect(ceiling.unknownAllowEntries).toHaveLength(new Set(huge).size);
    expect(ceiling.unknownAllowEntries.slice(0, 3)).toEqual([huge[0], huge[1], huge[2]]);
  });

  it("admits the one real entry hidden in it", () => {
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({
        tier: "public",
        allow: [...huge.slice(0, 5_000), "web_fetch", ...huge.slice(5_000)],
      }),
    );
    expect([...ceiling.admitted]).toEqual(["get_time", "web_fetch"]);
  });
});
