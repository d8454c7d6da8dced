// The per-tool overrides `allow | deny | prompt` and "nobody there" (DESIGN §10): their values,
// how a stored one is read, and which of the caller's and the agent-wide one applies. How a call
// is then decided (policy, overrides, safety, coverage) is src/gate/resolve.ts.
//
// Overrides come from two places, the caller's own and the agent-wide one, and the stricter wins
// (deny > prompt > allow): both are the operator's, and neither may widen what the other narrows.
// A value that is not one of the three reads as `deny`, like every unrecognised value in policy.
import { type ApprovalPolicy, approvalPolicies } from "../domain/caller.ts";
import { type NobodyThere, nobodyThereModes } from "../domain/tool-words.ts";

/** `auto`, or the risk level at or below which a call runs without asking (the domain's word). */
export const approvalPolicyLevels = approvalPolicies;
export type { ApprovalPolicy };

export const toolOverrideValues = ["allow", "deny", "prompt"] as const;
export type ToolOverride = (typeof toolOverrideValues)[number];

export type OverrideSource = "caller" | "agent";

/** The overrides for the one tool being called; either may be absent. */
export type ToolOverrides = {
  readonly caller?: unknown;
  readonly agent?: unknown;
};

const strictness: Readonly<Record<ToolOverride, number>> = { allow: 0, prompt: 1, deny: 2 };

export function isToolOverride(value: unknown): value is ToolOverride {
  return typeof value === "string" && (toolOverrideValues as readonly string[]).includes(value);
}

export function isApprovalPolicy(value: unknown): value is ApprovalPolicy {
  return typeof value === "string" && (approvalPolicyLevels as readonly string[]).includes(value);
}

/**
 * The override for `tool` in a map of tool name → override, read as an own property only (a
 * `__proto__` or `constructor` key is a tool name like any other, never a prototype's member).
 */
export function readToolOverride(
  map: Readonly<Record<string, unknown>> | undefined,
  tool: string,
): unknown {
  if (map === undefined || !Object.hasOwn(map, tool)) return undefined;
  return map[tool];
}

export type ResolvedOverride = {
  readonly value: ToolOverride;
  readonly from: OverrideSource;
  /** True when the stored value was not one of the three and reads as `deny`. */
  readonly unrecognised: boolean;
};

function normalize(value: unknown, from: OverrideSource): ResolvedOverride | undefined {
  if (value === undefined || value === null) return undefined;
  if (isToolOverride(value)) return { value, from, unrecognised: false };
  return { value: "deny", from, unrecognised: true };
}

/** The stricter of the caller's and the agent-wide override; the caller's on a tie. */
export function resolveToolOverride(
  overrides: ToolOverrides | undefined,
): ResolvedOverride | undefined {
  const caller = normalize(overrides?.caller, "caller");
  const agent = normalize(overrides?.agent, "agent");
  if (caller === undefined) return agent;
  if (agent === undefined) return caller;
  return strictness[agent.value] > strictness[caller.value] ? agent : caller;
}

// --- Nobody there: park or decline -------------------------------------------------------------

export { type NobodyThere, nobodyThereModes };

export function isNobodyThere(value: unknown): value is NobodyThere {
  return typeof value === "string" && (nobodyThereModes as readonly string[]).includes(value);
}

/** Caller kinds as the callers table stores them. */
export type CallerKindName = "peer" | "github" | "ifttt" | "webhook";

/**
 * A webhook sender fires and forgets: nobody on its side can answer, and a parked run would hold
 * its budget and time until an operator happens to look. Declining finishes the run with a report
 * of what it could not do. A peer holds an A2A task it can watch (the task shows it is waiting),
 * so parking is what lets a person approve the call. Any other kind reads as decline: nobody waits
 * on a run nobody knows is waiting.
 */
export function defaultNobodyThere(kind: CallerKindName): NobodyThere {
  return kind === "peer" ? "park" : "decline";
}
