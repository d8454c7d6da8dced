// Invariants of the ceiling, the effective set and the executor gate over random inventories,
// agents and callers (fast-check). Each property is one a security review would ask about.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeCeiling } from "../../src/policy/ceiling.ts";
import { createCeilingCache } from "../../src/policy/ceiling-cache.ts";
import { checkApprovalRequest, checkToolCall } from "../../src/policy/check-tool-call.ts";
import { effectiveToolSet } from "../../src/policy/effective-set.ts";
import { admittingReasons } from "../../src/policy/reasons.ts";
import { type Inventory, isToolCategory, listToolNames } from "../../src/policy/tools.ts";
import { arbitraryEntry, arbitraryScenario, makeAgent, makeInventory } from "./fixtures.ts";

const runs = { numRuns: 300 };
const liveTiers = ["public", "internal", "private"] as const;

function findTool(inventory: Inventory, name: string) {
  return inventory.names.get(name)?.tool;
}

describe("computeCeiling", () => {
  it("admits only inventory tools, explains every tool once, in inventory order", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const ceiling = computeCeiling(inventory, agent, caller);
        expect(ceiling.decisions.map((d) => d.tool)).toEqual(inventory.tools.map((t) => t.name));
        for (const name of ceiling.admitted) {
          expect(inventory.names.get(name)?.kind).toBe("tool");
        }
        for (const d of ceiling.decisions) {
          expect(d.admitted).toBe(ceiling.admitted.has(d.tool));
          expect(d.admitted).toBe(admittingReasons.has(d.reason));
        }
      }),
      runs,
    );
  });

  it("none and unknown tiers give the empty set whatever allow holds", () => {
    fc.assert(
      fc.property(
        arbitraryScenario,
        fc.string().filter((t) => !liveTiers.includes(t as never)),
        ({ inventory, agent, caller }, tier) => {
          const everything = [...inventory.names.keys(), ...caller.allow];
          const ceiling = computeCeiling(inventory, agent, { ...caller, tier, allow: everything });
          expect(ceiling.admitted.size).toBe(0);
          const expected = tier === "none" ? "caller-revoked" : "tier-unknown";
          for (const d of ceiling.decisions) expect(d.reason).toBe(expected);
        },
      ),
      runs,
    );
  });

  it("raising the tier only ever adds read-only, non-egress tools (and never removes any)", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const sets = liveTiers.map(
          (tier) => computeCeiling(inventory, agent, { ...caller, tier }).admitted,
        );
        for (let i = 1; i < sets.length; i++) {
          const lower = sets[i - 1] as ReadonlySet<string>;
          const higher = sets[i] as ReadonlySet<string>;
          for (const name of lower) expect(higher.has(name)).toBe(true);
          for (const name of higher) {
            if (lower.has(name)) continue;
            const tool = findTool(inventory, name);
            expect(tool?.risk).toBe("read-only");
            expect(tool?.egress).toBe(false);
          }
        }
      }),
      runs,
    );
  });

  it("an acting or egress tool is admitted only if allow names it exactly", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const ceiling = computeCeiling(inventory, agent, caller);
        const allow = new Set(caller.allow);
        for (const name of ceiling.admitted) {
          const tool = findTool(inventory, name);
          if (tool === undefined) throw new Error(`admitted ${name} is not in the inventory`);
          if (tool.risk !== "read-only" || tool.egress) expect(allow.has(name)).toBe(true);
        }
      }),
      runs,
    );
  });

  it("never admits a tool the agent denies, does not offer, or carves out", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const ceiling = computeCeiling(inventory, agent, caller);
        const denied = new Set(agent.deniedTools);
        const offered = new Set(agent.tools);
        for (const name of ceiling.admitted) {
          const tool = findTool(inventory, name);
          if (tool === undefined) throw new Error(`admitted ${name} is not in the inventory`);
          expect(tool.needsPerson || tool.persistsOperatorState).toBe(false);
          expect(denied.has(tool.category)).toBe(false);
          for (const n of listToolNames(tool)) expect(denied.has(n)).toBe(false);
          const offeredByName = [tool.name, ...tool.aliases].some((n) => offered.has(n));
          expect(offeredByName || offered.has(tool.category)).toBe(true);
        }
      }),
      runs,
    );
  });

  it("is deterministic: equal inputs (even fresh copies) give equal ceilings", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const first = computeCeiling(inventory, agent, caller);
        const again = computeCeiling(
          inventory,
          { ...agent, tools: [...agent.tools] },
          {
            ...caller,
            allow: [...caller.allow],
          },
        );
        const rebuilt = computeCeiling(
          makeInventory(
            inventory.tools.map((t) => ({ ...t, twoPhase: t.executeHalf !== undefined })),
          ),
          agent,
          caller,
        );
        for (const other of [again, rebuilt]) {
          expect([...other.admitted]).toEqual([...first.admitted]);
          expect(other.decisions).toEqual(first.decisions);
          expect(other.unknownAllowEntries).toEqual(first.unknownAllowEntries);
        }
      }),
      runs,
    );
  });

  it("reports exactly the allow entries that are not canonical tool names", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const ceiling = computeCeiling(inventory, agent, caller);
        const expected = [
          ...new Set(caller.allow.filter((e) => inventory.names.get(e)?.kind !== "tool")),
        ];
        expect(ceiling.unknownAllowEntries).toEqual(expected);
      }),
      runs,
    );
  });
});

describe("the memoised ceiling", () => {
  it("returns what computeCeiling returns, for any sequence of callers and versions", () => {
    fc.assert(
      fc.property(
        arbitraryScenario,
        fc.array(
          fc.record({ tier: fc.constantFrom("none", ...liveTiers, "bogus"), bump: fc.boolean() }),
          {
            maxLength: 10,
          },
        ),
        ({ inventory, agent, caller }, steps) => {
          const cache = createCeilingCache({ maxEntries: 3 });
          let current = caller;
          for (const step of steps) {
            current = {
              ...current,
              tier: step.tier,
              version: current.version + (step.bump ? 1 : 0),
            };
            const cached = cache.get(inventory, agent, current);
            expect([...cached.admitted]).toEqual([
              ...computeCeiling(inventory, agent, current).admitted,
            ]);
          }
        },
      ),
      runs,
    );
  });
});

describe("effectiveToolSet", () => {
  it("never holds a denied tool, whatever aliases or halves point at it, even given a ceiling that ignored the denials", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        // A ceiling computed without the agent's denials: the effective set must apply them itself.
        const careless = { ...agent, deniedTools: [] };
        const ceiling = computeCeiling(inventory, careless, caller);
        const set = effectiveToolSet(inventory, agent, ceiling);
        const denied = new Set(agent.deniedTools);
        for (const [name, entry] of set.names) {
          expect(denied.has(name)).toBe(false);
          expect(denied.has(entry.tool.category)).toBe(false);
          for (const n of listToolNames(entry.tool)) expect(denied.has(n)).toBe(false);
        }
      }),
      runs,
    );
  });

  it("holds only ceiling tools, their aliases and their halves, and offers no hidden half", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const ceiling = computeCeiling(inventory, agent, caller);
        const set = effectiveToolSet(inventory, agent, ceiling);
        for (const [name, entry] of set.names) {
          expect(ceiling.admitted.has(entry.tool.name)).toBe(true);
          expect(inventory.names.get(name)?.kind).toBe(entry.kind);
        }
        for (const tool of set.offered) {
          expect(set.names.get(tool.name)?.kind).toBe("tool");
          expect(tool.needsPerson || tool.persistsOperatorState).toBe(false);
        }
      }),
      runs,
    );
  });
});

describe("checkToolCall", () => {
  it("a hidden half is never callable by the model", () => {
    fc.assert(
      fc.property(arbitraryScenario, ({ inventory, agent, caller }) => {
        const set = effectiveToolSet(inventory, agent, computeCeiling(inventory, agent, caller));
        for (const name of inventory.names.keys()) {
          const check = checkToolCall(set, name, "model");
          if (check.allowed) expect(check.kind).not.toBe("execute-half");
          if (inventory.names.get(name)?.kind === "execute-half") expect(check.allowed).toBe(false);
        }
      }),
      runs,
    );
  });

  it("a name outside the set gets exactly the refusal of a name that exists nowhere", () => {
    const empty = makeInventory([]);
    const nowhere = effectiveToolSet(
      empty,
      makeAgent(),
      computeCeiling(empty, makeAgent(), { name: "c", tier: "private", allow: [], version: 1 }),
    );
    fc.assert(
      fc.property(
        arbitraryScenario.chain((s) =>
          fc.record({ s: fc.constant(s), name: arbitraryEntry(s.inventory) }),
        ),
        ({ s, name }) => {
          const set = effectiveToolSet(
            s.inventory,
            s.agent,
            computeCeiling(s.inventory, s.agent, s.caller),
          );
          fc.pre(!set.names.has(name));
          for (const origin of ["model", "approval"] as const) {
            expect(checkToolCall(set, name, origin)).toEqual(checkToolCall(nowhere, name, origin));
          }
        },
      ),
      runs,
    );
  });

  it("an approval request is honoured only from the tool registered to make it", () => {
    fc.assert(
      fc.property(
        arbitraryScenario.chain((s) =>
          fc.record({
            s: fc.constant(s),
            from: arbitraryEntry(s.inventory),
            target: arbitraryEntry(s.inventory),
          }),
        ),
        ({ s, from, target }) => {
          const set = effectiveToolSet(
            s.inventory,
            s.agent,
            computeCeiling(s.inventory, s.agent, s.caller),
          );
          const check = checkApprovalRequest(set, from, target);
          const owner = set.names.get(from);
          const bound =
            owner !== undefined &&
            owner.kind !== "execute-half" &&
            owner.tool.executeHalf === target &&
            set.names.get(target)?.kind === "execute-half";
          expect(check.allowed).toBe(bound);
          if (!check.allowed) expect(check.code).toBe("approval-not-bound");
        },
      ),
      runs,
    );
  });
});

it("categories are never tool names, so agent entries are unambiguous", () => {
  fc.assert(
    fc.property(arbitraryScenario, ({ inventory }) => {
      for (const name of inventory.names.keys()) expect(isToolCategory(name)).toBe(false);
    }),
    { numRuns: 50 },
  );
});
