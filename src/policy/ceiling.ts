// The ceiling: the exact set of tools a caller's runs may touch (DESIGN §3), with one reason per
// inventory tool. It is a pure function of (inventory, agent, caller).
//
// Precedence, first match wins, so each tool gets exactly one reason:
//   1. caller-revoked           tier `none`: revocation is total, no allow entry survives
//   2. tier-unknown             any string that is not exactly a tier fails closed the same way
//   3. denied-by-agent          deniedTools names the tool (any of its names) or its category
//   4. not-offered-by-agent     the agent's tools (names and categories) do not bring it in
//   5. needs-a-person           carve-out: a caller run has nobody to ask
//   6. persists-operator-state  carve-out: a caller run never changes the operator's saved state
//   7. read-only AND non-egress: tier-admits-read-only if disclosure ≤ tier, else
//      disclosure-above-tier (an allow entry does not lift disclosure: DESIGN §3 admits these
//      tools by tier alone)
//   8. anything else: named-in-allow if allow names its canonical name, else
//      acting-tool-needs-allow (risk above read-only, even if it also has egress) or
//      egress-needs-allow (read-only but egress)
// So revocation beats everything, and the agent's denials and carve-outs beat any allow entry.
//
// Allow entries match canonical names exactly (a Map lookup: case, confusables, zero-width and
// trailing spaces never match, and `__proto__` is just a string). An alias or a hidden half in
// allow names no tool and is reported with the other unknown entries.
//
// Speed: everything that depends only on the inventory (decision objects, which are shared and
// frozen) or only on (inventory, agent) is computed once and reused, so a cold ceiling is one pass
// over the tools plus one lookup per allow entry.
import { type AgentToolPolicy, eligibleCode, viewAgentTools } from "./agent-tools.ts";
import {
  admittingReasons,
  type CeilingReason,
  ceilingReasons,
  explainReason,
  reasonCode,
} from "./reasons.ts";
import {
  foldToolName,
  type Inventory,
  rankDisclosure,
  rankTier,
  type ToolDescriptor,
} from "./tools.ts";

/** The caller as the ceiling sees it. `tier` is a string so that a bad value can fail closed. */
export type CallerCeilingInput = {
  readonly name: string;
  readonly tier: string;
  readonly allow: readonly string[];
  /** Bumped on every change to the caller; part of the ceiling cache key. */
  readonly version: number;
};

export type CeilingDecision = {
  readonly tool: string;
  readonly admitted: boolean;
  readonly reason: CeilingReason;
  readonly sentence: string;
};

export type Ceiling = {
  /** Canonical names of the admitted tools. */
  readonly admitted: ReadonlySet<string>;
  /** One decision per inventory tool, in inventory order. */
  readonly decisions: readonly CeilingDecision[];
  /** Allow entries that name no tool, in first-seen order, each once. */
  readonly unknownAllowEntries: readonly string[];
};

const reasonCount = ceilingReasons.length;

/** Facts derived from an inventory alone, computed once per inventory object. */
type CompiledInventory = {
  /** 1 when the tool is read-only and non-egress: the only kind a tier can admit. */
  readonly passive: Uint8Array;
  readonly disclosureRank: Uint8Array;
  /** Shared decision objects, indexed by tool index * reasonCount + reason code; filled lazily. */
  readonly decisions: (CeilingDecision | undefined)[];
};

const compiled = new WeakMap<Inventory, CompiledInventory>();

function compileInventory(inventory: Inventory): CompiledInventory {
  const found = compiled.get(inventory);
  if (found !== undefined) return found;
  const n = inventory.tools.length;
  const passive = new Uint8Array(n);
  const disclosureRank = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const tool = inventory.tools[i];
    if (tool === undefined) continue;
    passive[i] = tool.risk === "read-only" && !tool.egress ? 1 : 0;
    disclosureRank[i] = rankDisclosure(tool.disclosure);
  }
  // Filled with undefined up front so the array stays in fast (not dictionary) mode.
  const decisions = new Array<CeilingDecision | undefined>(n * reasonCount).fill(undefined);
  const result: CompiledInventory = { passive, disclosureRank, decisions };
  compiled.set(inventory, result);
  return result;
}

function decide(
  tool: ToolDescriptor,
  index: number,
  code: number,
  facts: CompiledInventory,
): CeilingDecision {
  const slot = index * reasonCount + code;
  const cached = facts.decisions[slot];
  if (cached !== undefined) return cached;
  // Codes come only from `reasonCode`, so the lookup always lands.
  const reason = ceilingReasons[code] as CeilingReason;
  const decision: CeilingDecision = Object.freeze({
    tool: tool.name,
    admitted: admittingReasons.has(reason),
    reason,
    sentence: explainReason(tool, reason),
  });
  facts.decisions[slot] = decision;
  return decision;
}

/**
 * Computes the ceiling for one caller: which tools its runs may touch and, for every tool in the
 * inventory, the one reason why or why not. Never throws on any caller input.
 */
export function computeCeiling(
  inventory: Inventory,
  agent: AgentToolPolicy,
  caller: CallerCeilingInput,
): Ceiling {
  const tools = inventory.tools;
  const n = tools.length;
  const facts = compileInventory(inventory);
  const decisions = new Array<CeilingDecision>(n);
  const admitted = new Set<string>();

  // Allow entries are read even for a revoked caller, so the explanation still lists the bad ones.
  const allowed = new Uint8Array(n);
  const unknownAllowEntries: string[] = [];
  let seenUnknown: Set<string> | undefined;
  for (const entry of caller.allow) {
    const found = inventory.names.get(entry);
    if (found !== undefined && found.kind === "tool") {
      allowed[found.index] = 1;
      continue;
    }
    seenUnknown ??= new Set();
    if (!seenUnknown.has(entry)) {
      seenUnknown.add(entry);
      unknownAllowEntries.push(entry);
    }
  }

  const tierRank = rankTier(caller.tier);
  if (tierRank === undefined || tierRank === 0) {
    const code = tierRank === 0 ? reasonCode.callerRevoked : reasonCode.tierUnknown;
    for (let i = 0; i < n; i++) decisions[i] = decide(tools[i] as ToolDescriptor, i, code, facts);
    return { admitted, decisions, unknownAllowEntries };
  }

  const verdicts = viewAgentTools(inventory, agent).verdicts;
  const { passive, disclosureRank } = facts;
  for (let i = 0; i < n; i++) {
    // i < tools.length, and the inventory is frozen: the element is always there.
    const tool = tools[i] as ToolDescriptor;
    let code = verdicts[i] ?? reasonCode.notOfferedByAgent;
    if (code === eligibleCode) {
      if (passive[i] === 1) {
        code =
          (disclosureRank[i] ?? 3) <= tierRank
            ? reasonCode.tierAdmitsReadOnly
            : reasonCode.disclosureAboveTier;
      } else if (allowed[i] === 1) {
        code = reasonCode.namedInAllow;
      } else {
        code =
          tool.risk === "read-only" ? reasonCode.egressNeedsAllow : reasonCode.actingToolNeedsAllow;
      }
    }
    const decision = decide(tool, i, code, facts);
    decisions[i] = decision;
    if (decision.admitted) admitted.add(decision.tool);
  }
  return { admitted, decisions, unknownAllowEntries };
}

/**
 * Why an allow entry names no tool, for an operator: an alias or hidden half (allow takes the
 * tool's own name), a near miss by case or Unicode form (matching is exact), or nothing at all.
 */
export function explainUnknownAllowEntry(inventory: Inventory, entry: string): string {
  const found = inventory.names.get(entry);
  if (found?.kind === "alias") {
    return `an alias of ${found.tool.name}; allow names tools by their own name`;
  }
  if (found?.kind === "execute-half") {
    return `the hidden execute half of ${found.tool.name}; naming ${found.tool.name} brings it`;
  }
  // Spaces and invisible format characters (zero-width, direction marks) removed, then folded.
  const looseForm = (name: string) => foldToolName(name.replace(/[\s\p{Cf}]/gu, ""));
  const loose = looseForm(entry);
  for (const tool of inventory.tools) {
    if (looseForm(tool.name) === loose) {
      return `names no tool: looks like ${tool.name} but differs in case, spacing, invisible characters or Unicode form, and matching is exact`;
    }
  }
  return "names no tool";
}
