// Memoised ceilings. A ceiling depends only on (inventory version, agent version, caller version),
// so the hot path is one Map lookup by caller name plus three comparisons. The cache holds one
// generation: when the inventory or agent version changes (a policy reload), every entry is dropped
// at once instead of lingering until evicted.
//
// Revocation must never be outlived by a cache entry. Callers bump `version` on every change, and
// the entry also remembers the tier it was computed for: a caller whose tier is now `none` (or
// anything else) misses even if a version bump was forgotten.
//
// Eviction is first-in-first-out past `maxEntries`: a hit does not reorder, which keeps it one
// lookup; a hot caller evicted by a burst of new ones costs one recomputation.
import type { AgentToolPolicy } from "./agent-tools.ts";
import { type CallerCeilingInput, type Ceiling, computeCeiling } from "./ceiling.ts";
import type { Inventory } from "./tools.ts";

export type CeilingCache = {
  /**
   * The caller's ceiling, computed at most once per (inventory, agent, caller version, tier).
   * Entries are keyed by `caller.name`, so it must identify one caller: qualify it (`peer:x`,
   * `webhook:x`) if peers and webhooks can share a name.
   */
  get(inventory: Inventory, agent: AgentToolPolicy, caller: CallerCeilingInput): Ceiling;
  readonly size: number;
  clear(): void;
};

type Entry = { readonly version: number; readonly tier: string; readonly ceiling: Ceiling };

export const defaultCeilingCacheEntries = 10_000;

export function createCeilingCache(options: { readonly maxEntries?: number } = {}): CeilingCache {
  const maxEntries = Math.max(1, Math.floor(options.maxEntries ?? defaultCeilingCacheEntries));
  let inventoryVersion: string | undefined;
  let agentVersion: string | undefined;
  const entries = new Map<string, Entry>();

  return {
    get(inventory, agent, caller) {
      if (inventory.version !== inventoryVersion || agent.version !== agentVersion) {
        entries.clear();
        inventoryVersion = inventory.version;
        agentVersion = agent.version;
      }
      const entry = entries.get(caller.name);
      if (entry !== undefined && entry.version === caller.version && entry.tier === caller.tier) {
        return entry.ceiling;
      }
      const ceiling = computeCeiling(inventory, agent, caller);
      // Re-inserting moves a recomputed caller to the back of the eviction order.
      entries.delete(caller.name);
      if (entries.size >= maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done !== true) entries.delete(oldest.value);
      }
      entries.set(caller.name, { version: caller.version, tier: caller.tier, ceiling });
      return ceiling;
    },
    get size() {
      return entries.size;
    },
    clear() {
      entries.clear();
      inventoryVersion = undefined;
      agentVersion = undefined;
    },
  };
}
