// The memoised ceiling: one lookup on a hit, a recomputation on any change that matters.
import { describe, expect, it } from "vitest";
import { createCeilingCache } from "../../src/policy/ceiling-cache.ts";
import { makeAgent, makeCaller, makeInventory } from "./fixtures.ts";

const inventory = makeInventory([
  { name: "reader", category: "files", risk: "read-only", disclosure: "public", egress: false },
  { name: "writer", category: "files", risk: "high-risk", disclosure: "public", egress: false },
]);
const agent = makeAgent();

describe("createCeilingCache", () => {
  it("returns the same ceiling object for the same caller version", () => {
    const cache = createCeilingCache();
    const caller = makeCaller({ allow: ["writer"] });
    const first = cache.get(inventory, agent, caller);
    expect(cache.get(inventory, agent, { ...caller })).toBe(first);
    expect([...first.admitted]).toEqual(["reader", "writer"]);
  });

  it("recomputes when the caller's version changes", () => {
    const cache = createCeilingCache();
    cache.get(inventory, agent, makeCaller({ allow: ["writer"], version: 1 }));
    const narrowed = cache.get(inventory, agent, makeCaller({ allow: [], version: 2 }));
    expect([...narrowed.admitted]).toEqual(["reader"]);
  });

  it("never serves a stale ceiling after revocation, even if the version was not bumped", () => {
    const cache = createCeilingCache();
    cache.get(inventory, agent, makeCaller({ allow: ["writer"], version: 7 }));
    const revoked = cache.get(
      inventory,
      agent,
      makeCaller({ tier: "none", allow: ["writer"], version: 7 }),
    );
    expect(revoked.admitted.size).toBe(0);
  });

  it("drops everything when the inventory or the agent version changes", () => {
    const cache = createCeilingCache();
    const caller = makeCaller({ allow: ["writer"] });
    const first = cache.get(inventory, agent, caller);
    const otherAgent = makeAgent({ deniedTools: ["writer"] });
    const second = cache.get(inventory, otherAgent, caller);
    expect(second).not.toBe(first);
    expect([...second.admitted]).toEqual(["reader"]);
    expect(cache.size).toBe(1);

    const otherInventory = makeInventory([
      { name: "reader", category: "files", risk: "read-only", disclosure: "public", egress: false },
    ]);
    const third = cache.get(otherInventory, otherAgent, caller);
    expect(third.decisions.map((d) => d.tool)).toEqual(["reader"]);
  });

  it("is bounded, evicting the oldest entry first", () => {
    const cache = createCeilingCache({ maxEntries: 3 });
    const [a, b, c, d] = ["a", "b", "c", "d"].map((name) => makeCaller({ name }));
    if (!a || !b || !c || !d) throw new Error("four callers expected");
    const first = [a, b, c, d].map((caller) => cache.get(inventory, agent, caller));
    expect(cache.size).toBe(3);
    // b, c, d are still cached; a was evicted and is recomputed.
    expect(cache.get(inventory, agent, d)).toBe(first[3]);
    expect(cache.get(inventory, agent, b)).toBe(first[1]);
    expect(cache.get(inventory, agent, a)).not.toBe(first[0]);
    expect(cache.size).toBe(3);
  });

  it("keys callers by name in a Map: prototype names are ordinary callers", () => {
    const cache = createCeilingCache();
    const proto = cache.get(inventory, agent, makeCaller({ name: "__proto__", tier: "none" }));
    const ctor = cache.get(
      inventory,
      agent,
      makeCaller({ name: "constructor", allow: ["writer"] }),
    );
    expect(proto.admitted.size).toBe(0);
    expect(ctor.admitted.has("writer")).toBe(true);
    expect(cache.get(inventory, agent, makeCaller({ name: "__proto__", tier: "none" }))).toBe(
      proto,
    );
  });

  it("clear() empties it", () => {
    const cache = createCeilingCache();
    cache.get(inventory, agent, makeCaller());
    cache.clear();
    expect(cache.size).toBe(0);
  });
});
