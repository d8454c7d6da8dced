// What the served agent itself offers, resolved against an inventory: which tools its `tools`
// entries (names and categories) bring in, which its `deniedTools` take out, and which are carved
// out because a caller run cannot ask a person or persist operator state. This part of a ceiling
// depends only on (inventory, agent), so it is computed once per pair and shared by every caller.
//
// A denial naming any name of a tool (its canonical name, an alias, its hidden half) or its
// category denies the whole tool: `deniedTools: [glob]` must not leave `find` reachable under its
// own name, and denying `execute_execute_command` must not leave a shell that can only propose.
import { reasonCode } from "./reasons.ts";
import { type Inventory, isToolCategory, type ToolDescriptor } from "./tools.ts";

/** The agent config as far as tools are concerned. `version` is a content hash from the loader. */
export type AgentToolPolicy = {
  readonly tools: readonly string[];
  readonly deniedTools: readonly string[];
  readonly version: string;
};

/** In `AgentToolView.verdicts`: the agent leaves the decision to the caller's ceiling. */
export const eligibleCode = 255;

export type AgentToolView = {
  /**
   * Indexed like `inventory.tools`: a `reasonCode` (denied-by-agent, not-offered-by-agent,
   * needs-a-person, persists-operator-state) or `eligibleCode`.
   */
  readonly verdicts: Uint8Array;
  /** Tools the agent's `tools` entries bring in (before denials), by index. */
  readonly offered: Uint8Array;
  /** Tools its `deniedTools` entries take out, by index. */
  readonly denied: Uint8Array;
};

const views = new WeakMap<Inventory, WeakMap<AgentToolPolicy, AgentToolView>>();

/** Marks every tool an entry list names, by category or by any of the tool's names. */
function markEntries(inventory: Inventory, entries: readonly string[], into: Uint8Array): void {
  const tools = inventory.tools;
  for (const entry of entries) {
    if (isToolCategory(entry)) {
      for (let i = 0; i < tools.length; i++) {
        if (tools[i]?.category === entry) into[i] = 1;
      }
      continue;
    }
    const found = inventory.names.get(entry);
    if (found !== undefined) into[found.index] = 1;
  }
}

/**
 * Resolves the agent's tool entries against the inventory. Memoised on the identity of both
 * objects (never on the version string alone, so two different objects can never share a view).
 */
export function viewAgentTools(inventory: Inventory, agent: AgentToolPolicy): AgentToolView {
  let byAgent = views.get(inventory);
  if (byAgent === undefined) {
    byAgent = new WeakMap();
    views.set(inventory, byAgent);
  }
  const cached = byAgent.get(agent);
  if (cached !== undefined) return cached;

  const n = inventory.tools.length;
  const offered = new Uint8Array(n);
  const denied = new Uint8Array(n);
  // Only a tool's own name or an alias offers it; naming a hidden half offers nothing.
  markEntries(
    inventory,
    agent.tools.filter((entry) => inventory.names.get(entry)?.kind !== "execute-half"),
    offered,
  );
  markEntries(inventory, agent.deniedTools, denied);

  const verdicts = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    // i < tools.length, and the inventory is frozen: the element is always there.
    const tool = inventory.tools[i] as ToolDescriptor;
    verdicts[i] =
      denied[i] === 1
        ? reasonCode.deniedByAgent
        : offered[i] !== 1
          ? reasonCode.notOfferedByAgent
          : tool.needsPerson
            ? reasonCode.needsAPerson
            : tool.persistsOperatorState
              ? reasonCode.persistsOperatorState
              : eligibleCode;
  }
  const view: AgentToolView = Object.freeze({ verdicts, offered, denied });
  byAgent.set(agent, view);
  return view;
}
