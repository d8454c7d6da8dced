// The ceiling explanation as data: what `peergate ceiling` prints and what
// `GET /admin/v1/callers/:name/ceiling` returns, computed the same way for both.
import type { AgentToolPolicy } from "./agent-tools.ts";
import {
  type CallerCeilingInput,
  type Ceiling,
  type CeilingDecision,
  computeCeiling,
  explainUnknownAllowEntry,
} from "./ceiling.ts";
import { effectiveToolSet } from "./effective-set.ts";
import type { Inventory, ToolDescriptor, ToolNameKind } from "./tools.ts";

export type CeilingReport = {
  caller: { name?: string; tier: string; allow: readonly string[] };
  inventoryVersion: string;
  agentVersion: string;
  admitted: string[];
  decisions: readonly CeilingDecision[];
  unknownAllowEntries: { entry: string; note: string }[];
  /** Every name a run of this caller answers to: tools, aliases, hidden halves. */
  runNames: { name: string; tool: string; kind: ToolNameKind }[];
};

export function reportCeiling(
  inventory: Inventory,
  agent: AgentToolPolicy & { readonly version: string },
  caller: CallerCeilingInput,
  ceiling: Ceiling = computeCeiling(inventory, agent, caller),
): CeilingReport {
  return {
    caller: { name: caller.name, tier: caller.tier, allow: caller.allow },
    inventoryVersion: inventory.version,
    agentVersion: agent.version,
    admitted: [...ceiling.admitted],
    decisions: ceiling.decisions,
    unknownAllowEntries: ceiling.unknownAllowEntries.map((entry) => ({
      entry,
      note: explainUnknownAllowEntry(inventory, entry),
    })),
    runNames: [...effectiveToolSet(inventory, agent, ceiling).names].map(([name, entry]) => ({
      name,
      tool: entry.tool.name,
      kind: entry.kind,
    })),
  };
}

export type ToolView = {
  name: string;
  category: ToolDescriptor["category"];
  risk: ToolDescriptor["risk"];
  disclosure: ToolDescriptor["disclosure"];
  egress: boolean;
  aliases: readonly string[];
  executeHalf: string | null;
  needsPerson: boolean;
  persistsOperatorState: boolean;
  description: string;
};

export function describeInventory(inventory: Inventory): {
  inventoryVersion: string;
  tools: ToolView[];
} {
  return {
    inventoryVersion: inventory.version,
    tools: inventory.tools.map((tool) => ({
      name: tool.name,
      category: tool.category,
      risk: tool.risk,
      disclosure: tool.disclosure,
      egress: tool.egress,
      aliases: tool.aliases,
      executeHalf: tool.executeHalf ?? null,
      needsPerson: tool.needsPerson,
      persistsOperatorState: tool.persistsOperatorState,
      description: tool.description,
    })),
  };
}
