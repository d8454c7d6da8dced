// Authority has two keys (DESIGN §9). The admin token reads, narrows and revokes; a write that
// widens what a caller may do also needs the operator token, because the admin token is the one a
// process on this machine may come to read. Whether a write widens is decided here, by comparing
// the caller before and after, never by which route or field the request used: a PATCH that sends
// every field unchanged but one is judged by that one.
//
// Minting a credential hands whoever asks the caller's authority, so it is judged as creating the
// caller anew: `describeWidening(floorCaller, caller)`. A caller at the floor (public tier, no
// allow entries, default budgets, no push grants) can only use public read-only tools, so its
// credential needs the admin token alone; any other caller's credential needs the operator too
// (rotation included). Grants kept beside the caller row count as well: push grants live in
// `caller_push_hosts`, and the credential of a caller holding one carries a destination an
// operator approved, whatever its tier.
import {
  type ApprovalPolicy,
  type CallerBudgets,
  type CallerJwtSettings,
  type StoredUrlGrants,
  type Tier,
  tiers,
} from "../db/schema.ts";
import { operatorTokenHeader } from "../domain/caller.ts";
import { ForbiddenError, type Problem } from "../errors.ts";
import { defaultBudgets } from "./caller-input.ts";

/** What the rules read of a caller. */
export type AuthorityFields = {
  tier: Tier;
  allow: readonly string[];
  approvalPolicy: ApprovalPolicy;
  budgets: CallerBudgets;
  promptTemplate: string | null;
  eventFilter: readonly string[] | null;
  jwt: CallerJwtSettings | null;
  /** Absent reads as none (a caller row always has them). */
  commands?: readonly string[];
  toolOverrides?: Readonly<Record<string, string>>;
  urlGrants?: StoredUrlGrants | null;
  /** Absent reads as `on` (the default). */
  classifier?: "on" | "off";
  /**
   * Push grants (`caller_push_hosts`, src/services/set-push-hosts.ts). Absent reads as none: only
   * a writer that read them compares them (rotation does; a PATCH cannot change them).
   */
  pushHosts?: readonly string[];
};

export type Widening = { field: string; message: string };

/** The least a caller can be created with on the admin token alone. */
export const floorCaller: AuthorityFields = {
  tier: "public",
  allow: [],
  // The mildest policy: at the floor only read-only tools exist, so nothing would park anyway.
  approvalPolicy: "auto",
  budgets: defaultBudgets,
  promptTemplate: null,
  eventFilter: null,
  jwt: null,
  commands: [],
  toolOverrides: {},
  urlGrants: null,
  classifier: "on",
  pushHosts: [],
};

/** allow < none < prompt < deny: a step left lets the tool do more. */
function overrideRank(value: string | undefined): number {
  if (value === undefined) return 1;
  return value === "allow" ? 0 : value === "prompt" ? 2 : 3;
}

/** Precise controls (DESIGN §10): a new command entry, a milder override, a new URL grant. */
function widenedControls(b: AuthorityFields, a: AuthorityFields): Widening[] {
  const before = {
    commands: b.commands ?? [],
    toolOverrides: b.toolOverrides ?? {},
    urlGrants: b.urlGrants ?? null,
  };
  const after = {
    commands: a.commands ?? [],
    toolOverrides: a.toolOverrides ?? {},
    urlGrants: a.urlGrants ?? null,
  };
  const out: Widening[] = [];
  // Off, every uncovered command asks; on, the classifier may let some run without asking.
  if ((b.classifier ?? "on") === "off" && (a.classifier ?? "on") === "on") {
    out.push({
      field: "classifier",
      message: "classifier: off → on (its verdicts may let commands run)",
    });
  }
  const commands = after.commands.filter((c) => !before.commands.includes(c));
  if (commands.length) {
    out.push({
      field: "commands",
      message: `commands: adds ${commands.map((c) => JSON.stringify(c)).join(", ")}`,
    });
  }
  for (const tool of Object.keys(after.toolOverrides)) {
    const from = Object.hasOwn(before.toolOverrides, tool) ? before.toolOverrides[tool] : undefined;
    const to = after.toolOverrides[tool];
    if (overrideRank(to) < overrideRank(from)) {
      out.push({
        field: `toolOverrides.${tool}`,
        message: `toolOverrides.${tool}: ${from ?? "none"} → ${to}`,
      });
    }
  }
  for (const tool of Object.keys(before.toolOverrides)) {
    if (Object.hasOwn(after.toolOverrides, tool)) continue;
    if (overrideRank(undefined) < overrideRank(before.toolOverrides[tool])) {
      out.push({
        field: `toolOverrides.${tool}`,
        message: `toolOverrides.${tool}: ${before.toolOverrides[tool]} → none`,
      });
    }
  }
  if (before.urlGrants !== null && after.urlGrants === null) {
    out.push({ field: "urlGrants", message: "urlGrants: removed (fetches no longer restricted)" });
  }
  for (const list of ["hosts", "suffixes", "prefixes"] as const) {
    const had = before.urlGrants?.[list] ?? [];
    const added = (after.urlGrants?.[list] ?? []).filter((e) => !had.includes(e));
    if (added.length) {
      out.push({
        field: `urlGrants.${list}`,
        message: `urlGrants.${list}: adds ${added.map((e) => JSON.stringify(e)).join(", ")}`,
      });
    }
  }
  return out;
}

/** Strictest first: `read-only` parks the most calls, `auto` none (src/runs/approval-policy.ts). */
const approvalRank: Readonly<Record<ApprovalPolicy, number>> = {
  "read-only": 0,
  "low-risk": 1,
  "high-risk": 2,
  auto: 3,
};

const budgetKeys = ["tokens", "costUsd", "durationMs", "steps", "concurrentRuns"] as const;
const dailyKeys = ["tokens", "costUsd", "runs"] as const;

/** A limit that is absent is unlimited: removing one is raising it to infinity. */
function raised(before: number | undefined, after: number | undefined): boolean {
  if (before === undefined) return false;
  return after === undefined || after > before;
}

const show = (v: unknown) => (v === undefined ? "unlimited" : JSON.stringify(v));

function widenedBudgets(before: CallerBudgets, after: CallerBudgets): Widening[] {
  const out: Widening[] = [];
  for (const key of budgetKeys) {
    if (raised(before[key], after[key])) {
      out.push({
        field: `budgets.${key}`,
        message: `budgets.${key}: ${show(before[key])} → ${show(after[key])}`,
      });
    }
  }
  for (const key of dailyKeys) {
    const from = before.daily?.[key];
    const to = after.daily?.[key];
    if (raised(from, to)) {
      out.push({
        field: `budgets.daily.${key}`,
        message: `budgets.daily.${key}: ${show(from)} → ${show(to)}`,
      });
    }
  }
  return out;
}

/** A new key, issuer or audience is a new way to authenticate as the caller. */
function widenedJwt(
  before: CallerJwtSettings | null,
  after: CallerJwtSettings | null,
): string | undefined {
  if (after === null) return undefined;
  if (before === null) return "JWTs are accepted where they were not";
  const identity = (s: CallerJwtSettings) =>
    JSON.stringify([s.issuer, s.audience, s.jwksUrl ?? null, s.jwk ?? null, s.pem ?? null]);
  if (identity(before) !== identity(after)) return "a different key, issuer or audience is trusted";
  const added = after.algorithms.filter((a) => !before.algorithms.includes(a));
  if (added.length) return `algorithms added: ${added.join(", ")}`;
  if (after.maxAgeSeconds > before.maxAgeSeconds) {
    return `maxAgeSeconds ${before.maxAgeSeconds} → ${after.maxAgeSeconds}`;
  }
  return undefined;
}

/** `issues` covers `issues.opened`; no filter at all covers every event. */
function widenedEvents(before: readonly string[] | null, after: readonly string[] | null) {
  if (before === null) return [];
  if (after === null) return ["every event"];
  const covered = (event: string) =>
    before.includes(event) || before.includes(event.split(".")[0] ?? event);
  return after.filter((event) => !covered(event));
}

/**
 * The fields in which `after` lets the caller do more than `before`, each with a message naming
 * the change. Empty when the change narrows or keeps what the caller may do.
 *
 * The prompt template, event filter and JWT settings steer or reach a caller's authority rather
 * than set it, so they count only for a caller that has more than the floor's (a tier above
 * public or an allow entry): at the floor there is nothing to steer.
 */
export function describeWidening(before: AuthorityFields, after: AuthorityFields): Widening[] {
  const out: Widening[] = [];
  if (tiers.indexOf(after.tier) > tiers.indexOf(before.tier)) {
    out.push({ field: "tier", message: `tier: ${before.tier} → ${after.tier}` });
  }
  const added = [...new Set(after.allow.filter((a) => !before.allow.includes(a)))];
  if (added.length) {
    out.push({
      field: "allow",
      message: `allow: adds ${added.map((a) => JSON.stringify(a)).join(", ")}`,
    });
  }
  if (approvalRank[after.approvalPolicy] > approvalRank[before.approvalPolicy]) {
    out.push({
      field: "approvalPolicy",
      message: `approvalPolicy: ${before.approvalPolicy} → ${after.approvalPolicy} (fewer calls wait for an operator)`,
    });
  }
  out.push(...widenedBudgets(before.budgets, after.budgets));
  out.push(...widenedControls(before, after));
  // A push grant sends the caller's task updates to a destination, whatever its tier.
  const pushed = (after.pushHosts ?? []).filter((h) => !(before.pushHosts ?? []).includes(h));
  if (pushed.length) {
    out.push({
      field: "pushHosts",
      message: `pushHosts: adds ${pushed.map((h) => JSON.stringify(h)).join(", ")}`,
    });
  }

  const reachesMore = tiers.indexOf(after.tier) > tiers.indexOf("public") || after.allow.length > 0;
  if (!reachesMore) return out;
  if (after.promptTemplate !== null && after.promptTemplate !== before.promptTemplate) {
    out.push({
      field: "promptTemplate",
      message: "promptTemplate: new instructions for runs with this caller's tools",
    });
  }
  const events = widenedEvents(before.eventFilter, after.eventFilter);
  if (events.length) {
    out.push({ field: "eventFilter", message: `eventFilter: adds ${events.join(", ")}` });
  }
  const jwt = widenedJwt(before.jwt, after.jwt);
  if (jwt) out.push({ field: "jwt", message: `jwt: ${jwt}` });
  return out;
}

/** The header that carries the operator token on the admin API (a domain word). */
export { operatorTokenHeader };

/** The refusal of a widening presented with the admin token alone. */
export function operatorTokenRequired(what: string, widened: readonly Widening[]): ForbiddenError {
  const problems: Problem[] = widened.map((w) => ({ field: w.field, message: w.message }));
  return new ForbiddenError(
    `${what} needs the operator token as well as the admin token, because it widens what the ` +
      `caller may do (${widened.map((w) => w.field).join(", ")}): send it in the ` +
      `${operatorTokenHeader} header (create it with \`peergate operator-token create\`)`,
    { code: "operator-token-required", problems },
  );
}
