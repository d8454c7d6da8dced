// Whether one tool call runs, parks for an operator, or is refused (DESIGN §10): the caller's
// approval policy, the operator's per-tool overrides, a tool's safety override for this one call,
// and command-allowlist coverage, resolved in one order so that every combination has one answer.
//
// The order follows the reference resolution for approval modes, with `auto` playing `yolo` and
// the risk policies playing the tiers that prompt above a level:
//   1. `deny` refuses, under every policy, whatever else is true;
//   2. under `auto`, `prompt` parks and anything else runs (a safety override is recorded in the
//      reason, but does not ask: `auto` is the operator saying nobody is asked);
//   3. under a risk policy a safety override parks, naming its reason, even over `allow` and over
//      an allowlisted command: the tool saw something in this call the operator did not foresee;
//   4. `prompt` parks, even an allowlisted command;
//   5. `allow` runs;
//   6. an allowlisted command runs;
//   7. otherwise the policy decides by risk: at or below the policy's level runs, above it parks.
//
// Overrides come from two places, the caller's own and the agent-wide one, and the stricter wins
// (deny > prompt > allow): both are the operator's, and neither may widen what the other narrows.
// A value that is not one of the three reads as `deny`, like every unrecognised value in policy.
//
// When a call would park, the caller's "nobody there" setting decides whether it parks or is
// declined with a message to the model naming what would let it run (`settleNobodyThere`).
import { type ApprovalPolicy, approvalPolicies } from "../domain/caller.ts";
import { quoteUntrusted } from "./quote.ts";
import type { Risk } from "./tools.ts";

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

/** A tool asking for a person for this one call, and why (a denylist near-miss, a floor reason). */
export type SafetyOverride = { readonly reason: string };

export type CallAction = "run" | "park" | "refuse";

/** Which step of the order decided; stable literals for records and audit events. */
export type DecisionRule =
  | "override-deny"
  | "override-prompt"
  | "override-allow"
  | "auto"
  | "safety"
  | "allowlist"
  | "policy-admits"
  | "policy-parks";

export type CallDecision = {
  readonly action: CallAction;
  readonly rule: DecisionRule;
  /** A sentence for the operator: the run record, `runs show`, the audit event. */
  readonly reason: string;
};

export type CallDecisionInput = {
  /** The tool's canonical name, for the reason. */
  readonly tool: string;
  readonly policy: ApprovalPolicy;
  /** The call's risk: the tool's declared level, or a command's floor combined with a verdict. */
  readonly risk: Risk;
  readonly overrides?: ToolOverrides | undefined;
  readonly safety?: SafetyOverride | undefined;
  /** True when a command allowlist entry covers the command (never for a command with hazards). */
  readonly covered?: boolean | undefined;
  /** The entry that covered it, for the reason. */
  readonly coveredBy?: string | undefined;
};

const strictness: Readonly<Record<ToolOverride, number>> = { allow: 0, prompt: 1, deny: 2 };

const riskRank: Readonly<Record<Risk, number>> = {
  "read-only": 0,
  "low-risk": 1,
  "high-risk": 2,
  unknown: 3,
};

export function isToolOverride(value: unknown): value is ToolOverride {
  return typeof value === "string" && (toolOverrideValues as readonly string[]).includes(value);
}

export function isApprovalPolicy(value: unknown): value is ApprovalPolicy {
  return typeof value === "string" && (approvalPolicyLevels as readonly string[]).includes(value);
}

/** A risk policy admits calls at or below its level; `unknown` is above every level. */
export function policyAdmits(policy: ApprovalPolicy, risk: Risk): boolean {
  if (policy === "auto") return true;
  if (risk === "unknown") return false;
  return riskRank[risk] <= riskRank[policy];
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

function describeOverride(tool: string, override: ResolvedOverride): string {
  const whose = override.from === "caller" ? "The caller's override" : "The agent-wide override";
  const value = override.unrecognised ? "not allow, deny or prompt (read as deny)" : override.value;
  return `${whose} for ${quoteUntrusted(tool)} is ${value}`;
}

function describePolicy(policy: ApprovalPolicy): string {
  return `the approval policy ${policy} runs calls up to ${policy} without asking`;
}

/** Decides whether one call runs, parks for an operator or is refused; never throws. */
export function decideCall(input: CallDecisionInput): CallDecision {
  const { tool, policy, risk, safety } = input;
  const override = resolveToolOverride(input.overrides);
  const covered = input.covered === true;
  const safetyNote = safety === undefined ? "" : ` (safety check: ${safety.reason})`;

  // 1. deny refuses everywhere. The model is told the same as for a tool it was never offered.
  if (override?.value === "deny") {
    return {
      action: "refuse",
      rule: "override-deny",
      reason: `${describeOverride(tool, override)}: refused like a tool that is not available.`,
    };
  }
  // 2. auto plays yolo: only an explicit prompt asks; a safety override is only recorded.
  if (policy === "auto") {
    if (override?.value === "prompt") {
      return {
        action: "park",
        rule: "override-prompt",
        reason: `${describeOverride(tool, override)}: every call asks, even under auto${safetyNote}.`,
      };
    }
    return {
      action: "run",
      rule: override?.value === "allow" ? "override-allow" : "auto",
      reason:
        override === undefined
          ? `The approval policy is auto: every call in the run's set runs${safetyNote}.`
          : `${describeOverride(tool, override)} and the approval policy is auto${safetyNote}.`,
    };
  }
  // 3. A safety override asks under every risk policy, over allow and over the allowlist.
  if (safety !== undefined) {
    return {
      action: "park",
      rule: "safety",
      reason: `Needs approval: ${safety.reason}. Under the approval policy ${policy} this check asks for the call even when an override or the command allowlist would let it run.`,
    };
  }
  // 4. prompt asks, even for an allowlisted command.
  if (override?.value === "prompt") {
    return {
      action: "park",
      rule: "override-prompt",
      reason: `${describeOverride(tool, override)}: every call asks.`,
    };
  }
  // 5. allow runs.
  if (override?.value === "allow") {
    return {
      action: "run",
      rule: "override-allow",
      reason: `${describeOverride(tool, override)}: runs without asking.`,
    };
  }
  // 6. An allowlisted command runs under any policy.
  if (covered) {
    const entry =
      input.coveredBy === undefined ? "" : ` (entry ${quoteUntrusted(input.coveredBy)})`;
    return {
      action: "run",
      rule: "allowlist",
      reason: `The command allowlist covers this command${entry}: runs without asking.`,
    };
  }
  // 7. The policy decides by risk.
  if (policyAdmits(policy, risk)) {
    return {
      action: "run",
      rule: "policy-admits",
      reason: `The call is ${risk} and ${describePolicy(policy)}.`,
    };
  }
  return {
    action: "park",
    rule: "policy-parks",
    reason:
      risk === "unknown"
        ? `The call's risk is unknown (an unclassified command or an undeclared tool) and ${describePolicy(policy)}.`
        : `The call is ${risk} and ${describePolicy(policy)}.`,
  };
}

// --- Nobody there: park or decline -------------------------------------------------------------

export const nobodyThereModes = ["park", "decline"] as const;
export type NobodyThere = (typeof nobodyThereModes)[number];

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

export type SettledCall =
  | {
      readonly action: "run" | "park" | "refuse";
      readonly rule: DecisionRule;
      readonly reason: string;
    }
  | {
      readonly action: "decline";
      readonly rule: DecisionRule;
      readonly reason: string;
      /** The tool result the model reads instead of the tool's output; the run goes on. */
      readonly modelMessage: string;
    };

function whatWouldFix(decision: CallDecision, tool: string): string {
  const name = quoteUntrusted(tool);
  switch (decision.rule) {
    case "safety":
      return `an operator approving this one call (set this caller to park calls that need a person, or ask the operator to run it); no allowlist entry or override lifts this check`;
    case "override-prompt":
      return `removing the prompt override for ${name}, or setting this caller to park calls that need a person so an operator can approve them`;
    default:
      return `an allowlist entry for this command, an allow override for ${name}, a wider approval policy for this caller, or setting it to park calls that need a person so an operator can approve them`;
  }
}

/**
 * What happens to a call nobody is there to approve: a decision that parks either parks or, under
 * `decline`, becomes a refusal the model reads (naming what would let the call run) while the run
 * goes on. Decisions that run or refuse pass through unchanged.
 */
export function settleNobodyThere(
  decision: CallDecision,
  mode: NobodyThere,
  tool: string,
): SettledCall {
  if (decision.action !== "park" || mode === "park") return decision;
  return {
    action: "decline",
    rule: decision.rule,
    reason: `Declined, nobody can approve it for this caller: ${decision.reason}`,
    modelMessage: `The call to ${quoteUntrusted(tool)} was not run: it needs an operator's approval (${decision.reason}) and this caller's calls that need a person are declined. What would let it run: ${whatWouldFix(decision, tool)}.`,
  };
}
