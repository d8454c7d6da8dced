// The effective tool set of one run (DESIGN §3), built in exactly the stated order:
//   1. the agent's `tools` (names, aliases and categories)
//   2. minus its `deniedTools`
//   3. minus the carve-outs for what a caller run cannot do (ask a person, persist operator state)
//   4. intersect the caller's ceiling (and, for a resumed run, the set it started with)
//   5. add the aliases and hidden execute halves of what remains
//   6. apply the denials again, so nothing an alias or a half brought back survives a denial
// Steps 2 and 6 overlap on purpose: step 6 is the one that holds even if a later change lets step 5
// add a name from somewhere else.
import { type AgentToolPolicy, viewAgentTools } from "./agent-tools.ts";
import type { Ceiling } from "./ceiling.ts";
import type { Inventory, ToolDescriptor, ToolNameEntry } from "./tools.ts";

export type EffectiveToolSet = {
  /** The tools a run advertises to the model, in inventory order. Hidden halves are never here. */
  readonly offered: readonly ToolDescriptor[];
  /** Every name the executor accepts, exactly as spelled: canonical names, aliases, hidden halves. */
  readonly names: ReadonlyMap<string, ToolNameEntry>;
};

export type EffectiveSetOptions = {
  /**
   * Canonical names a resumed run started with: the result is narrowed to them, so a resumed run
   * is never wider than its first segment (DESIGN §5).
   */
  readonly within?: ReadonlySet<string>;
};

/** Computes the run's effective tool set. Never throws. */
export function effectiveToolSet(
  inventory: Inventory,
  agent: AgentToolPolicy,
  ceiling: Ceiling,
  options: EffectiveSetOptions = {},
): EffectiveToolSet {
  const view = viewAgentTools(inventory, agent);
  const deniedNames = new Set(agent.deniedTools);
  const offered: ToolDescriptor[] = [];
  const names = new Map<string, ToolNameEntry>();

  for (const [index, tool] of inventory.tools.entries()) {
    if (view.offered[index] !== 1) continue; // 1
    if (view.denied[index] === 1) continue; // 2
    if (tool.needsPerson || tool.persistsOperatorState) continue; // 3
    if (!ceiling.admitted.has(tool.name)) continue; // 4
    if (options.within !== undefined && !options.within.has(tool.name)) continue;
    offered.push(tool);
    // 5: every name the inventory registered for this tool.
    names.set(tool.name, { tool, kind: "tool", index });
    for (const alias of tool.aliases) names.set(alias, { tool, kind: "alias", index });
    if (tool.executeHalf !== undefined) {
      names.set(tool.executeHalf, { tool, kind: "execute-half", index });
    }
  }

  // 6
  for (const [name, entry] of names) {
    if (deniedNames.has(name) || view.denied[entry.index] === 1) names.delete(name);
  }
  const kept = offered.filter((tool) => names.get(tool.name)?.kind === "tool");
  return { offered: kept, names };
}
