// The one reason a ceiling gives for each tool, and the sentence an operator reads for it. The
// order of `ceilingReasons` is the precedence documented in ceiling.ts; indexes are used as small
// integer codes on the hot path, so append new reasons at the end only if their precedence allows.
// The list itself is a domain word (src/domain/tool-words.ts).
import { type CeilingReason, ceilingReasons } from "../domain/tool-words.ts";
import type { ToolDescriptor } from "./tools.ts";

export { type CeilingReason, ceilingReasons };

/** Small integer codes for the reasons, equal to their index in `ceilingReasons`. */
export const reasonCode = {
  callerRevoked: 0,
  tierUnknown: 1,
  deniedByAgent: 2,
  notOfferedByAgent: 3,
  needsAPerson: 4,
  persistsOperatorState: 5,
  tierAdmitsReadOnly: 6,
  disclosureAboveTier: 7,
  namedInAllow: 8,
  actingToolNeedsAllow: 9,
  egressNeedsAllow: 10,
} as const satisfies Record<string, number>;

export const admittingReasons: ReadonlySet<CeilingReason> = new Set([
  "tier-admits-read-only",
  "named-in-allow",
]);

function describeAction(tool: ToolDescriptor): string {
  const parts: string[] = [];
  if (tool.risk !== "read-only") parts.push(`can change things (risk: ${tool.risk})`);
  if (tool.egress) parts.push("sends data off this machine");
  return parts.join(" and ");
}

/** The plain sentence for one tool and one reason. Depends on nothing else, so it can be shared. */
export function explainReason(tool: ToolDescriptor, reason: CeilingReason): string {
  const name = tool.name;
  switch (reason) {
    case "caller-revoked":
      return "The caller's tier is none (revoked): no tool is reachable, whatever its allow list says.";
    case "tier-unknown":
      return "The caller's tier is not one of none, public, internal, private, so nothing is admitted.";
    case "denied-by-agent":
      return `The agent's deniedTools removes ${name} from every run.`;
    case "not-offered-by-agent":
      return `The agent's tools list does not include ${name}, so no run is offered it.`;
    case "needs-a-person":
      return `${name} needs a person to answer, and a caller run has nobody to ask.`;
    case "persists-operator-state":
      return `${name} changes the operator's own saved state, which a caller run may never do.`;
    case "tier-admits-read-only":
      return `${name} only reads, keeps data on this machine, and its answers (at most ${tool.disclosure}) fit the caller's tier.`;
    case "disclosure-above-tier":
      return `${name} only reads, but its answers can carry ${tool.disclosure} information, above the caller's tier; only a higher tier admits it, not an allow entry.`;
    case "named-in-allow":
      return `${name} ${describeAction(tool)}; it is admitted because the caller's allow list names it.`;
    case "acting-tool-needs-allow":
    case "egress-needs-allow":
      return `${name} ${describeAction(tool)}; no tier admits it, only naming it in the caller's allow list does.`;
  }
}
