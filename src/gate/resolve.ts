// Whether one tool call runs, parks for an operator, or is refused (DESIGN §10): the caller's
// approval policy, the operator's per-tool overrides, a tool's safety override for this one call,
// and command-allowlist coverage, resolved in one order so that every combination has one answer.
//
// The order follows the reference resolution for approval modes, with `auto` playing `yolo` and
// the risk policies playing the tiers that prompt above a level:
//   1. `deny` refuses, under every policy, whatever else is true;
//   1b. a fetch outside the caller's URL grants asks under every policy, `auto` included, and over
//      `allow`: HTTP approval is independent of risk (DESIGN §11);
//   2. under `auto`, `prompt` parks and anything else runs (a safety override is recorded in the
//      reason, but does not ask: `auto` is the operator saying nobody is asked);
//   3. under a risk policy a safety override parks, naming its reason, even over `allow` and over
//      an allowlisted command: the tool saw something in this call the operator did not foresee;
//   4. `prompt` parks, even an allowlisted command;
//   5. `allow` runs;
//   6. an allowlisted command runs;
//   7. otherwise the policy decides by risk: at or below the policy's level runs, above it parks.
//
// The overrides themselves (their values, the stricter of the caller's and the agent's) are read
// in src/policy/overrides.ts. When a call would park, the caller's "nobody there" setting decides
// whether it parks or is declined with a message to the model naming what would let it run
// (`resolveNobodyThere`).
import {
  type ApprovalPolicy,
  type NobodyThere,
  type ResolvedOverride,
  resolveToolOverride,
  type ToolOverrides,
} from "../policy/overrides.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import type { Risk } from "../policy/tools.ts";

/** A tool asking for a person for this one call, and why (a denylist near-miss, a floor reason). */
export type SafetyOverride = { readonly reason: string };

export type CallAction = "run" | "park" | "refuse";

/** Which step of the order decided; stable literals for records and audit events. */
export type DecisionRule =
  | "override-deny"
  | "url-grant"
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
  /** A URL (or a redirect hop) outside the caller's URL grants, and why: asks under every policy. */
  readonly outsideGrants?: { readonly reason: string } | undefined;
};

const riskRank: Readonly<Record<Risk, number>> = {
  "read-only": 0,
  "low-risk": 1,
  "high-risk": 2,
  unknown: 3,
};

/** A risk policy admits calls at or below its level; `unknown` is above every level. */
export function policyAdmits(policy: ApprovalPolicy, risk: Risk): boolean {
  if (policy === "auto") return true;
  if (risk === "unknown") return false;
  return riskRank[risk] <= riskRank[policy];
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
  // 1b. Outside the URL grants a fetch asks, whatever the policy or an allow override says.
  if (input.outsideGrants !== undefined) {
    return {
      action: "park",
      rule: "url-grant",
      reason: `Needs approval: the URL is outside this caller's URL grants (${input.outsideGrants.reason}); a fetch outside the grants asks under every approval policy, auto included.`,
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

export type ResolvedCall =
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
    case "url-grant":
      return `a URL grant covering this URL for this caller, or an operator approving this one call (set this caller to park calls that need a person)`;
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
export function resolveNobodyThere(
  decision: CallDecision,
  mode: NobodyThere,
  tool: string,
): ResolvedCall {
  if (decision.action !== "park" || mode === "park") return decision;
  return {
    action: "decline",
    rule: decision.rule,
    reason: `Declined, nobody can approve it for this caller: ${decision.reason}`,
    modelMessage: `The call to ${quoteUntrusted(tool)} was not run: it needs an operator's approval (${decision.reason}) and this caller's calls that need a person are declined. What would let it run: ${whatWouldFix(decision, tool)}.`,
  };
}
