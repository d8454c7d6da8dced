// DESIGN §3, row by row, and every reason code the ceiling can give.
import { describe, expect, it } from "vitest";
import { computeCeiling } from "../../src/policy/ceiling.ts";
import { ceilingReasons } from "../../src/policy/reasons.ts";
import { createInventory, type Disclosure, type Risk, type Tier } from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";
import { makeAgent, makeCaller, makeInventory } from "./fixtures.ts";

function decide(
  tool: { risk: Risk; disclosure: Disclosure; egress: boolean },
  tier: string,
  allow: string[] = [],
) {
  const inventory = makeInventory([{ name: "probe", category: "custom", ...tool }]);
  const ceiling = computeCeiling(inventory, makeAgent(), makeCaller({ tier, allow }));
  const [decision] = ceiling.decisions;
  return { decision, admitted: ceiling.admitted.has("probe") };
}

describe("row 1: tier unknown or none → empty set", () => {
  const anyTool = { risk: "read-only", disclosure: "public", egress: false } as const;
  it.each([
    ["none", "caller-revoked"],
    ["Public", "tier-unknown"],
    ["PRIVATE", "tier-unknown"],
    ["private ", "tier-unknown"],
    ["", "tier-unknown"],
    ["admin", "tier-unknown"],
    ["__proto__", "tier-unknown"],
    ["\u0440ublic", "tier-unknown"], // Cyrillic р
  ])("tier %j refuses even a public read-only tool named in allow (%s)", (tier, reason) => {
    const { decision, admitted } = decide(anyTool, tier, ["probe"]);
    expect(admitted).toBe(false);
    expect(decision?.reason).toBe(reason);
  });

  it("revocation is total: every built-in refused although allow names them all", () => {
    const builtins = createInventory(builtinTools, "builtins");
    if (!builtins.ok) throw new Error("built-ins refused");
    const all = builtinTools.map((t) => t.name);
    const ceiling = computeCeiling(
      builtins.inventory,
      makeAgent(),
      makeCaller({ tier: "none", allow: all }),
    );
    expect(ceiling.admitted.size).toBe(0);
    expect(new Set(ceiling.decisions.map((d) => d.reason))).toEqual(new Set(["caller-revoked"]));
  });
});

describe("row 2: read-only AND non-egress → admitted iff disclosure ≤ tier", () => {
  const table: [Disclosure, Tier, boolean][] = [
    ["public", "public", true],
    ["public", "internal", true],
    ["public", "private", true],
    ["internal", "public", false],
    ["internal", "internal", true],
    ["internal", "private", true],
    ["private", "public", false],
    ["private", "internal", false],
    ["private", "private", true],
  ];
  it.each(table)("disclosure %s at tier %s → admitted %s", (disclosure, tier, expected) => {
    const { decision, admitted } = decide({ risk: "read-only", disclosure, egress: false }, tier);
    expect(admitted).toBe(expected);
    expect(decision?.reason).toBe(expected ? "tier-admits-read-only" : "disclosure-above-tier");
  });

  it("an allow entry does not lift disclosure: the tier alone decides these tools", () => {
    const { decision, admitted } = decide(
      { risk: "read-only", disclosure: "private", egress: false },
      "public",
      ["probe"],
    );
    expect(admitted).toBe(false);
    expect(decision?.reason).toBe("disclosure-above-tier");
  });
});

describe("row 3: anything else → admitted only if named in allow", () => {
  const kinds: [string, Risk, boolean, string][] = [
    ["low-risk", "low-risk", false, "acting-tool-needs-allow"],
    ["high-risk", "high-risk", false, "acting-tool-needs-allow"],
    ["unknown risk", "unknown", false, "acting-tool-needs-allow"],
    ["acting with egress", "high-risk", true, "acting-tool-needs-allow"],
    ["read-only with egress", "read-only", true, "egress-needs-allow"],
  ];
  for (const [label, risk, egress, refusal] of kinds) {
    for (const tier of ["public", "internal", "private"] as const) {
      for (const disclosure of ["public", "private"] as const) {
        it(`${label}, disclosure ${disclosure}, tier ${tier}: refused without allow, admitted with it`, () => {
          const without = decide({ risk, disclosure, egress }, tier);
          expect(without.admitted).toBe(false);
          expect(without.decision?.reason).toBe(refusal);
          const withAllow = decide({ risk, disclosure, egress }, tier, ["probe"]);
          expect(withAllow.admitted).toBe(true);
          expect(withAllow.decision?.reason).toBe("named-in-allow");
        });
      }
    }
  }
});

describe("the built-in inventory under the default agent categories", () => {
  const built = createInventory(builtinTools, "builtins");
  if (!built.ok) throw new Error("built-ins refused");
  const inventory = built.inventory;
  const agent = makeAgent({ tools: ["files", "context", "web"] });

  it.each([
    ["public", [], ["get_time"]],
    ["internal", [], ["ls", "find", "stat", "get_time"]],
    ["private", [], ["read_file", "ls", "find", "grep", "stat", "get_time"]],
    ["public", ["write_file", "web_fetch"], ["get_time", "web_fetch", "write_file"]],
    // execute_command is outside the agent's categories: allow cannot bring it in.
    ["private", ["execute_command"], ["read_file", "ls", "find", "grep", "stat", "get_time"]],
    // Carve-outs beat allow.
    [
      "private",
      ["ask_user_question", "manage_memory"],
      ["read_file", "ls", "find", "grep", "stat", "get_time"],
    ],
  ])("tier %s, allow %j → %j", (tier, allow, expected) => {
    const ceiling = computeCeiling(inventory, agent, makeCaller({ tier, allow }));
    expect([...ceiling.admitted]).toEqual(expected);
  });
});

describe("every reason code", () => {
  const inventory = makeInventory([
    { name: "reader", category: "files", risk: "read-only", disclosure: "public", egress: false },
    {
      name: "secret",
      category: "files",
      risk: "read-only",
      disclosure: "private",
      egress: false,
    },
    { name: "writer", category: "files", risk: "high-risk", disclosure: "public", egress: false },
    {
      name: "allowed",
      category: "files",
      risk: "high-risk",
      disclosure: "public",
      egress: false,
    },
    { name: "fetcher", category: "web", risk: "read-only", disclosure: "public", egress: true },
    {
      name: "asker",
      category: "context",
      risk: "read-only",
      disclosure: "public",
      egress: false,
      needsPerson: true,
    },
    {
      name: "memory",
      category: "context",
      risk: "low-risk",
      disclosure: "private",
      egress: false,
      persistsOperatorState: true,
    },
    { name: "sh_tool", category: "shell" },
    { name: "banned", category: "files", risk: "read-only", disclosure: "public", egress: false },
  ]);
  const agent = makeAgent({ tools: ["files", "web", "context"], deniedTools: ["banned"] });

  const expected: Record<string, string> = {
    reader: "tier-admits-read-only",
    secret: "disclosure-above-tier",
    writer: "acting-tool-needs-allow",
    allowed: "named-in-allow",
    fetcher: "egress-needs-allow",
    asker: "needs-a-person",
    memory: "persists-operator-state",
    sh_tool: "not-offered-by-agent",
    banned: "denied-by-agent",
  };

  it("gives each tool its reason, with the reasons of a live caller", () => {
    const ceiling = computeCeiling(
      inventory,
      agent,
      makeCaller({ tier: "public", allow: ["allowed", "banned", "asker", "memory", "sh_tool"] }),
    );
    expect(Object.fromEntries(ceiling.decisions.map((d) => [d.tool, d.reason]))).toEqual(expected);
    expect([...ceiling.admitted].sort()).toEqual(["allowed", "reader"]);
  });

  it("covers the whole reason list, including revoked and unknown tiers", () => {
    const seen = new Set(Object.values(expected));
    seen.add(
      computeCeiling(inventory, agent, makeCaller({ tier: "none" })).decisions[0]?.reason ?? "",
    );
    seen.add(
      computeCeiling(inventory, agent, makeCaller({ tier: "root" })).decisions[0]?.reason ?? "",
    );
    expect([...seen].sort()).toEqual([...ceilingReasons].sort());
  });

  it("explains every decision with a sentence naming the tool (or the caller's tier)", () => {
    for (const tier of ["public", "none", "bogus"]) {
      const ceiling = computeCeiling(inventory, agent, makeCaller({ tier, allow: ["allowed"] }));
      for (const d of ceiling.decisions) {
        expect(d.sentence.length).toBeGreaterThan(20);
        if (d.reason === "caller-revoked" || d.reason === "tier-unknown") {
          expect(d.sentence).toMatch(/tier/);
        } else {
          expect(d.sentence).toContain(d.tool);
        }
        expect(d.admitted).toBe(
          d.reason === "tier-admits-read-only" || d.reason === "named-in-allow",
        );
      }
    }
  });
});

describe("undeclared metadata", () => {
  it("reads as unknown risk, private disclosure and egress: only allow admits it", () => {
    const inventory = makeInventory([{ name: "mystery", category: "mcp" }]);
    const tool = inventory.tools[0];
    expect(tool).toMatchObject({ risk: "unknown", disclosure: "private", egress: true });
    const agent = makeAgent();
    expect(computeCeiling(inventory, agent, makeCaller({ tier: "private" })).admitted.size).toBe(0);
    expect(
      computeCeiling(inventory, agent, makeCaller({ tier: "public", allow: ["mystery"] })).admitted,
    ).toEqual(new Set(["mystery"]));
  });
});
