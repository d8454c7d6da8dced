// The words an operator and a caller read about tools, as closed lists: how risky a tool is, what
// it may disclose, its category, why a ceiling gives or withholds it, and what happens when an
// approval finds nobody there. The admin API's contract names them (src/http/routes/), and the
// pure policy code decides with them (src/policy/, which re-exports them beside their rules).

/** Risk levels in order, lowest first: the one definition of the order (`unknown` is highest). */
export const riskLevels = ["read-only", "low-risk", "high-risk", "unknown"] as const;
export type Risk = (typeof riskLevels)[number];

export const disclosureLevels = ["public", "internal", "private"] as const;
export type Disclosure = (typeof disclosureLevels)[number];

export const toolCategories = ["files", "shell", "web", "context", "custom", "mcp"] as const;
export type ToolCategory = (typeof toolCategories)[number];

/**
 * The one reason a ceiling gives for each tool. The order is the precedence documented in
 * src/policy/ceiling.ts; indexes are used as small integer codes on the hot path
 * (src/policy/reasons.ts), so append new reasons at the end only if their precedence allows.
 */
export const ceilingReasons = [
  "caller-revoked",
  "tier-unknown",
  "denied-by-agent",
  "not-offered-by-agent",
  "needs-a-person",
  "persists-operator-state",
  "tier-admits-read-only",
  "disclosure-above-tier",
  "named-in-allow",
  "acting-tool-needs-allow",
  "egress-needs-allow",
] as const;
export type CeilingReason = (typeof ceilingReasons)[number];

/** What a call that needs a person does when nobody is there to answer: park or decline. */
export const nobodyThereModes = ["park", "decline"] as const;
export type NobodyThere = (typeof nobodyThereModes)[number];
