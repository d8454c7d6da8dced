// The precise controls one run is held to (DESIGN §10): its approval policy, its tool set, the
// command allowlist, the per-tool overrides, the web_fetch URL grants and what happens when a
// call needs a person. A run starts with its caller's controls and re-reads the caller before
// every step: narrowing applies from the next step, widening never reaches a running or resumed
// run. So what a run uses is always the stricter of what it started with and what the caller
// has now, field by field:
//
// - policy: the stricter of the two (read-only > low-risk > high-risk > auto);
// - tool set: the ceiling now ∩ the set the run started with (the run core computes it);
// - commands: entries in both lists (a removed entry is gone, a new one never arrives);
// - overrides, per tool: deny > prompt > none > allow (a new deny or prompt arrives, a removed
//   one stays, and an allow holds only while both sides say allow);
// - URL grants: entries in both (when both restrict); a restriction that appears arrives, one
//   that disappears stays;
// - nobody there: decline when either says decline.
//
// The agent-wide lists (agent.yaml) are the operator's files, read at start-up; they are united
// with the caller's (commands, grants) or combined with it, the stricter winning (overrides).
import type { Caller, RunControlsSnapshot, StoredUrlGrants, WhenNobody } from "../db/schema.ts";
import { type AllowEntry, parseAllowEntry } from "../policy/command-key.ts";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import {
  type ApprovalPolicy,
  defaultNobodyThere,
  isNobodyThere,
  isToolOverride,
  type NobodyThere,
} from "../policy/overrides.ts";
import { compileUrlGrants, type UrlGrants } from "../policy/url-grants.ts";

export type AgentControls = {
  readonly commands?: readonly string[] | undefined;
  readonly toolOverrides?: Readonly<Record<string, string>> | undefined;
  readonly urlGrants?: StoredUrlGrants | undefined;
};

/** What the executor decides each call with; replaced (never edited) between steps. */
export type RunControls = {
  readonly policy: ApprovalPolicy;
  readonly set: EffectiveToolSet;
  /** Caller ∪ agent entries, parsed; a stored entry that no longer parses is dropped. */
  readonly commands: readonly AllowEntry[];
  readonly overrides: {
    readonly caller: Readonly<Record<string, unknown>>;
    readonly agent: Readonly<Record<string, unknown>>;
  };
  /** Undefined when neither the caller nor the agent restricts web_fetch by URL. */
  readonly urlGrants: UrlGrants | undefined;
  readonly whenNobody: NobodyThere;
  /** False when the caller turned the classifier off: an uncovered command stays `unknown`. */
  readonly classifier: boolean;
};

/** A mutable holder: the segment swaps `current` after each between-steps check. */
export type RunControlsHolder = { current: RunControls };

const policyStrictness: Readonly<Record<ApprovalPolicy, number>> = {
  auto: 0,
  "high-risk": 1,
  "low-risk": 2,
  "read-only": 3,
};

/** The stricter of two approval policies. */
export function stricterPolicy(a: ApprovalPolicy, b: ApprovalPolicy): ApprovalPolicy {
  return (policyStrictness[b] ?? 3) > (policyStrictness[a] ?? 3) ? b : a;
}

/** The caller's controls as a run records them when it first steps. */
export function snapshotControls(caller: Caller): RunControlsSnapshot {
  return {
    commands: [...(caller.commands ?? [])],
    toolOverrides: { ...(caller.toolOverrides ?? {}) },
    urlGrants: caller.urlGrants ?? null,
    whenNobody: caller.whenNobody ?? null,
    classifier: caller.classifier ?? "on",
  };
}

function overrideRank(value: unknown): number {
  if (value === undefined || value === null) return 1;
  if (!isToolOverride(value)) return 3;
  return { allow: 0, prompt: 2, deny: 3 }[value];
}

function combineOverrides(
  a: Readonly<Record<string, unknown>>,
  b: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const tool of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const left = Object.hasOwn(a, tool) ? a[tool] : undefined;
    const right = Object.hasOwn(b, tool) ? b[tool] : undefined;
    const rank = Math.max(overrideRank(left), overrideRank(right));
    // allow only when both say allow; none when either says none and neither is stricter.
    const value = rank === 0 ? "allow" : rank === 1 ? undefined : rank === 2 ? "prompt" : "deny";
    if (value !== undefined) out[tool] = value;
  }
  return out;
}

function intersect(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  const right = new Set(b ?? []);
  return (a ?? []).filter((x) => right.has(x));
}

function combineGrants(
  a: StoredUrlGrants | null,
  b: StoredUrlGrants | null,
): StoredUrlGrants | null {
  if (a === null) return b;
  if (b === null) return a;
  return {
    hosts: intersect(a.hosts, b.hosts),
    suffixes: intersect(a.suffixes, b.suffixes),
    prefixes: intersect(a.prefixes, b.prefixes),
  };
}

/** The caller side a run uses: the stricter of its start snapshot and the caller now. */
export function narrowSnapshot(
  started: RunControlsSnapshot,
  now: RunControlsSnapshot,
): RunControlsSnapshot {
  const whenNobody: WhenNobody | null =
    started.whenNobody === "decline" || now.whenNobody === "decline"
      ? "decline"
      : (now.whenNobody ?? started.whenNobody);
  return {
    commands: intersect(started.commands, now.commands),
    toolOverrides: combineOverrides(started.toolOverrides, now.toolOverrides) as Record<
      string,
      string
    >,
    urlGrants: combineGrants(started.urlGrants, now.urlGrants),
    whenNobody,
    // Off is the narrower: it holds from the next step; on again never reaches the run.
    classifier: started.classifier === "off" || now.classifier === "off" ? "off" : "on",
  };
}

function parseEntries(entries: readonly string[]): AllowEntry[] {
  const out: AllowEntry[] = [];
  for (const text of entries) {
    const parsed = parseAllowEntry(text);
    if ("entry" in parsed) out.push(parsed.entry);
  }
  return out;
}

function unite(a: StoredUrlGrants | null, b: StoredUrlGrants | undefined): UrlGrants | undefined {
  if (a === null && b === undefined) return undefined;
  const compiled = compileUrlGrants({
    hosts: [...(a?.hosts ?? []), ...(b?.hosts ?? [])],
    suffixes: [...(a?.suffixes ?? []), ...(b?.suffixes ?? [])],
    prefixes: [...(a?.prefixes ?? []), ...(b?.prefixes ?? [])],
  });
  // Stored grants were validated when set; if one no longer compiles, nothing is granted.
  return compiled.ok ? compiled.grants : { hosts: new Set(), suffixes: [], prefixes: [] };
}

/** The controls to decide calls with, from the caller side (already narrowed) and the agent's. */
export function buildRunControls(input: {
  readonly policy: ApprovalPolicy;
  readonly set: EffectiveToolSet;
  readonly caller: RunControlsSnapshot;
  readonly kind: Caller["kind"];
  readonly agent: AgentControls;
}): RunControls {
  const { caller, agent } = input;
  return {
    policy: input.policy,
    set: input.set,
    commands: parseEntries([...caller.commands, ...(agent.commands ?? [])]),
    overrides: { caller: caller.toolOverrides, agent: agent.toolOverrides ?? {} },
    urlGrants: unite(caller.urlGrants, agent.urlGrants),
    whenNobody: isNobodyThere(caller.whenNobody)
      ? caller.whenNobody
      : defaultNobodyThere(input.kind),
    classifier: caller.classifier !== "off",
  };
}
