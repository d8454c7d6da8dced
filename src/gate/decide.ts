// How the executor decides one tool call (DESIGN §9-10), in this order. What is read from the
// call's arguments comes from the tool's descriptor (`reads`, declared in the tool's own file) or
// from a declared command tool's shape; this file names no tool.
//
// 1. The risk floor, for a tool that reads an argv (the shell tool) and declared command tools:
//    the argv the call would run ([program, ...args]; a structured tool's [program, ...arguments];
//    a fixed tool's [program, ...args, ...arguments] with its operator-written part not judged as
//    the model's). Its reasons are a safety override: under every policy but `auto` the call
//    parks, naming them.
// 2. Coverage by the command allowlists (the caller's ∪ the agent's), by parsed key; for a tool
//    that reads a URL, the URL grants on the URL it connects to: outside them the call asks under
//    every policy, and inside them every redirect hop is checked too.
// 3. The classifier, for a tool of `unknown` risk, only when its verdict can change the outcome
//    and the caller's budget has something left (src/gate/classifier-budget.ts); it never lowers
//    the floor and every failure reads as high-risk.
// 4. `decideCall` (overrides, URL grants, policy, coverage, safety) and `resolveNobodyThere`.
import type { ToolCallDecisionRecord } from "../db/schema.ts";
import { explainCoverage } from "../policy/command-key.ts";
import { readToolOverride, resolveToolOverride, type ToolOverrides } from "../policy/overrides.ts";
import type { Risk, ToolDescriptor } from "../policy/tools.ts";
import { checkUrlGrant } from "../policy/url-grants.ts";
import { floorChainCommand } from "../tools/declared/chain.ts";
import { argvKey } from "../tools/shell/command-keys.ts";
import { assessArgvRisk } from "../tools/shell/shell-risk.ts";
import { type ClassifierResult, combineRisk, needsClassifier } from "./command-classifier.ts";
import type { RunControls } from "./controls.ts";
import {
  decideCall,
  type ResolvedCall,
  resolveNobodyThere,
  type SafetyOverride,
} from "./resolve.ts";

/** A declared command tool as the floor needs it. */
export type CommandToolShape =
  | { readonly mode: "fixed"; readonly program: string; readonly args: readonly string[] }
  | { readonly mode: "structured" }
  /** Each stage is matched against the allowlist and asks on its own (src/gate/batch.ts). */
  | { readonly mode: "chain" | "script" };

/** A classifier call: the verdict, and its model and cost for the record and the budget. */
export type Classification = {
  readonly result: ClassifierResult;
  readonly model: string;
  readonly costUsd?: number | undefined;
};

export type DecisionDeps = {
  readonly controls: RunControls;
  /** Rates one command; absent when no model is available (then the command stays unknown). */
  readonly classify?: ((command: string) => Promise<Classification>) | undefined;
  /** Declared command tools by name. */
  readonly commandTools?: ReadonlyMap<string, CommandToolShape> | undefined;
};

export type CallDecisionOutcome = {
  readonly resolved: ResolvedCall;
  readonly record: ToolCallDecisionRecord;
  /** A fetch under a URL grant: every redirect hop must stay inside the grants too. */
  readonly checkRedirects: boolean;
};

/** The argv a call would run, for the floor and the allowlist; undefined for other tools. */
export function callArgv(
  tool: ToolDescriptor,
  args: unknown,
  commandTools: ReadonlyMap<string, CommandToolShape> | undefined,
): { argv: string[]; fixedArgs: number } | undefined {
  const input = (typeof args === "object" && args !== null ? args : {}) as Record<string, unknown>;
  const strings = (v: unknown) =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  const own = tool.reads?.argv?.(args);
  if (own !== undefined) return { argv: [...own], fixedArgs: 0 };
  const declared = commandTools?.get(tool.name);
  if (declared === undefined) return undefined;
  if (declared.mode === "fixed") {
    return {
      argv: [declared.program, ...declared.args, ...strings(input.arguments)],
      fixedArgs: 1 + declared.args.length,
    };
  }
  // A chain's or script's stages are keyed and gated one by one as they are reached.
  if (declared.mode !== "structured" || typeof input.program !== "string") return undefined;
  return { argv: [input.program, ...strings(input.arguments)], fixedArgs: 0 };
}

/** One line of a command for the classifier and the record. */
export function formatCommand(argv: readonly string[]): string {
  return argv.map((w) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(w) ? w : JSON.stringify(w))).join(" ");
}

function overridesFor(controls: RunControls, tool: string): ToolOverrides {
  return {
    caller: readToolOverride(controls.overrides.caller, tool),
    agent: readToolOverride(controls.overrides.agent, tool),
  };
}

/** True when an override refuses `tool`: the call is answered like a tool that does not exist. */
export function isDenied(controls: RunControls, tool: string): boolean {
  return resolveToolOverride(overridesFor(controls, tool))?.value === "deny";
}

/** Decides one call whose arguments passed the tool's schema; never throws. */
export async function decideToolCall(
  deps: DecisionDeps,
  tool: ToolDescriptor,
  args: unknown,
): Promise<CallDecisionOutcome> {
  const { controls } = deps;
  const overrides = overridesFor(controls, tool.name);
  const override = resolveToolOverride(overrides);
  let risk: Risk = tool.risk;
  let safety: SafetyOverride | undefined;
  let covered = false;
  let coveredBy: string | undefined;
  let checkRedirects = false;
  let outsideGrants: { reason: string } | undefined;
  const record: {
    -readonly [K in keyof ToolCallDecisionRecord]?: ToolCallDecisionRecord[K];
  } = {};

  const command = callArgv(tool, args, deps.commandTools);
  if (command !== undefined) {
    const floor = assessArgvRisk(command.argv, tool.risk, { fixedArgs: command.fixedArgs });
    if (floor.reasons.length > 0) {
      record.floorReasons = [...floor.reasons];
      safety = { reason: `the risk floor: ${floor.reasons.join("; ")}` };
      risk = floor.risk;
    }
    const key = argvKey(command.argv);
    record.key = key.key?.text ?? null;
    const coverage = explainCoverage(key, controls.commands);
    if (coverage.covered) {
      covered = true;
      coveredBy = coverage.entry.text;
    }
    if (tool.risk === "unknown" && !controls.classifier) {
      // Turned off for this caller: nothing rates the command, so an uncovered one stays
      // `unknown`, above every risk policy: it asks (or is declined) unless an entry covers it.
      risk = "unknown";
      if (!covered) {
        record.classifier = {
          model: "",
          verdict: "off",
          reason: "the classifier is off for this caller: an uncovered command asks",
          latencyMs: 0,
        };
      }
    } else if (tool.risk === "unknown") {
      const floorRisk = floor.reasons.length > 0 ? "high-risk" : "read-only";
      const need = needsClassifier({
        policy: controls.policy,
        covered,
        floorRisk,
        override: override?.value,
        safety,
      });
      if (need.needed && deps.classify !== undefined) {
        const classified = await deps.classify(formatCommand(command.argv));
        const { result } = classified;
        risk = combineRisk(floorRisk, result.verdict);
        record.classifier = {
          model: classified.model,
          verdict: result.verdict,
          ...(result.failure ? { failure: result.failure } : {}),
          reason: result.reason,
          ...(result.usage.inputTokens === undefined
            ? {}
            : { inputTokens: result.usage.inputTokens }),
          ...(result.usage.outputTokens === undefined
            ? {}
            : { outputTokens: result.usage.outputTokens }),
          ...(classified.costUsd === undefined ? {} : { costUsd: classified.costUsd }),
          latencyMs: Math.round(result.usage.latencyMs),
        };
      } else if (!need.needed) {
        risk = need.risk;
      }
    }
  } else if (deps.commandTools?.get(tool.name)?.mode === "chain") {
    // A chain's stages are gated one by one as they are reached, but what the floor finds in any
    // of them is a safety override for the whole call: no `allow` override runs it unasked.
    const input = (typeof args === "object" && args !== null ? args : {}) as { command?: unknown };
    const floor = floorChainCommand(
      typeof input.command === "string" ? input.command : "",
      tool.risk,
    );
    if (floor.reasons.length > 0) {
      record.floorReasons = [...floor.reasons];
      safety = { reason: `the risk floor: ${floor.reasons.join("; ")}` };
      risk = floor.risk;
    }
  } else if (tool.reads?.url !== undefined && controls.urlGrants !== undefined) {
    const check = checkUrlGrant(tool.reads.url(args) ?? "", controls.urlGrants);
    if (check.granted) {
      covered = true;
      coveredBy = `URL grant ${check.entry}`;
      checkRedirects = true;
    } else {
      // Outside the grants a fetch is not something the operator foresaw: it asks, under every
      // policy (HTTP approval is independent of risk).
      risk = "unknown";
      outsideGrants = { reason: check.reason };
      record.urlReason = check.reason;
    }
  }

  const decision = decideCall({
    tool: tool.name,
    policy: controls.policy,
    risk,
    overrides,
    safety,
    covered,
    coveredBy,
    outsideGrants,
  });
  const resolved = resolveNobodyThere(decision, controls.whenNobody, tool.name);
  return {
    resolved,
    // Under every policy, `auto` included: a hop outside the grants asks like the URL would.
    checkRedirects: checkRedirects && resolved.action === "run",
    record: {
      ...record,
      action: resolved.action,
      rule: resolved.rule,
      reason: resolved.reason,
      risk,
      ...(coveredBy === undefined ? {} : { coveredBy }),
    },
  };
}

/** A redirect hop outside the grants of a fetch that ran under them: it asks, or is declined. */
export function decideRedirect(
  controls: RunControls,
  tool: ToolDescriptor,
  reason: string,
): CallDecisionOutcome {
  const decision = decideCall({
    tool: tool.name,
    policy: controls.policy,
    risk: "unknown",
    outsideGrants: { reason },
  });
  const resolved = resolveNobodyThere(decision, controls.whenNobody, tool.name);
  return {
    resolved,
    checkRedirects: false,
    record: {
      action: resolved.action,
      rule: resolved.rule,
      reason: resolved.reason,
      urlReason: reason,
    },
  };
}
