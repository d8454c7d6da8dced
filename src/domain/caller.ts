// Who may call peergate, in the project's own words. The database stores these (src/db/schema.ts
// types its columns with them), the services decide on them, and the surfaces (http/, a2a/, cli/)
// read them from here, never from the database layer. Nothing here has a side effect.

export const callerKinds = ["peer", "github", "ifttt", "webhook"] as const;
/** How a caller reaches peergate: an A2A peer, or one of the webhook senders. */
export type CallerKind = (typeof callerKinds)[number];

export const tiers = ["none", "public", "internal", "private"] as const;
/** How much of the served agent a caller may see; `none` sees nothing (DESIGN §4). */
export type Tier = (typeof tiers)[number];

/** `auto`, or the risk level above which a call parks for an operator (DESIGN §5). */
export const approvalPolicies = ["auto", "read-only", "low-risk", "high-risk"] as const;
export type ApprovalPolicy = (typeof approvalPolicies)[number];

export const credentialKinds = [
  "token",
  "webhook-secret",
  "ifttt-secret",
  "admin",
  "operator",
] as const;
export type CredentialKind = (typeof credentialKinds)[number];

/** Per-run limits a caller is configured with, plus daily totals. Absent means unlimited. */
export type CallerBudgets = {
  tokens?: number;
  costUsd?: number;
  durationMs?: number;
  steps?: number;
  concurrentRuns?: number;
  daily?: { tokens?: number; costUsd?: number; runs?: number };
};

/** How a peer's JWTs are verified (DESIGN §6). Key material here is public. */
export type CallerJwtSettings = {
  issuer: string;
  audience: string;
  algorithms: string[];
  maxAgeSeconds: number;
  jwk?: Record<string, unknown>;
  pem?: string;
  jwksUrl?: string;
};

/** A caller as stored: its identity, its ceiling (tier and allow list), its policy and budgets. */
/** URL grants for web_fetch as stored (DESIGN §10): hosts, host suffixes, URL prefixes. */
export type StoredUrlGrants = { hosts?: string[]; suffixes?: string[]; prefixes?: string[] };

export const whenNobodyModes = ["park", "decline"] as const;
/** The command risk classifier for a caller: `off` makes every uncovered command ask. */
export const classifierModes = ["on", "off"] as const;
export type ClassifierMode = (typeof classifierModes)[number];
export type WhenNobody = (typeof whenNobodyModes)[number];

export type Caller = {
  id: string;
  name: string;
  kind: CallerKind;
  tier: Tier;
  /** Tool names granted beyond the tier. */
  allow: string[];
  approvalPolicy: ApprovalPolicy;
  budgets: CallerBudgets;
  /** Webhook callers: the fixed prompt; the payload is fenced in as untrusted data. */
  promptTemplate: string | null;
  /** Webhook callers: event names that fire a run (e.g. `issues.opened`); null means all. */
  eventFilter: string[] | null;
  jwt: CallerJwtSettings | null;
  /** Command allowlist entries (`git status`): keys that run without asking (DESIGN §10). */
  commands: string[];
  /** Tool name → `allow`, `deny` or `prompt`. */
  toolOverrides: Record<string, string>;
  /** web_fetch URL grants; null means none set (fetches follow the approval policy). */
  urlGrants: StoredUrlGrants | null;
  /** `park` or `decline` a call that needs a person; null means the kind's default. */
  whenNobody: WhenNobody | null;
  /** `off`: the classifier never rates this caller's commands (an uncovered one always asks). */
  classifier: ClassifierMode;
  /** Bumped on every change, for compare-and-set updates and cache invalidation. */
  version: number;
  revokedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

/** What a caller event says happened to a caller (src/services/caller-events.ts). */
export type CallerChange = "created" | "updated" | "revoked" | "restored" | "rotated" | "deleted";

/**
 * What a callers file manages: `callers export` writes these fields and `callers apply` makes them
 * true (push grants included), so export → apply is a round trip.
 */
export const managedCallerFields = [
  "tier",
  "allow",
  "approvalPolicy",
  "budgets",
  "promptTemplate",
  "eventFilter",
  "jwt",
  "commands",
  "toolOverrides",
  "urlGrants",
  "whenNobody",
  "classifier",
  "pushHosts",
] as const;

/**
 * The header that carries the operator token on the admin API: the second credential that
 * widening a caller and approving a parked run need besides the admin token.
 */
export const operatorTokenHeader = "X-Peergate-Operator-Token";
