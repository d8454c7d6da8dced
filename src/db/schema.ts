// Everything peergate keeps in Postgres (DESIGN.md §5-7). One schema serves PGlite and a real
// PostgreSQL; migrations in drizzle/ are generated from this file by `npm run db:generate`.
//
// Closed vocabularies are `text` with a CHECK constraint rather than pg enums: adding a value is
// then a plain migration on both drivers (ALTER TYPE … ADD VALUE cannot be used in the transaction
// that adds it). Timestamps are `timestamptz(3)`: millisecond precision, so a JS Date round-trips
// exactly (the audit chain hashes them). Secrets are never stored in clear: credentials hold a
// SHA-256 and a short display prefix (plus, for GitHub webhook secrets, a sealed copy).
//
// One file over 500 lines on purpose: drizzle-kit generates the migrations from this one file
// (drizzle.config.ts), and the lint rules that keep layers off the tables name it.
import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  date,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  pgView,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import {
  type ApprovalPolicy,
  approvalPolicies,
  type CallerBudgets,
  type CallerJwtSettings,
  type CallerKind,
  type ClassifierMode,
  type CredentialKind,
  callerKinds,
  classifierModes,
  credentialKinds,
  type Caller as DomainCaller,
  type StoredUrlGrants,
  type Tier,
  tiers,
  type WhenNobody,
  whenNobodyModes,
} from "../domain/caller.ts";
import {
  type PendingApproval,
  type PendingBatch,
  type PendingInput,
  type RunBudgetLimits,
  type RunBudgetUsed,
  type RunError,
  type RunOrigin,
  type RunStatus,
  runOrigins,
  runStatuses,
  type StopKind,
  stopKinds,
  type ToolCallStatus,
  toolCallStatuses,
} from "../domain/run.ts";

/** `timestamptz(3)`, read and written as a JS Date. */
function timestamptz(name: string) {
  return timestamp(name, { withTimezone: true, precision: 3, mode: "date" });
}

function createdAt() {
  return timestamptz("created_at").notNull().defaultNow();
}

function updatedAt() {
  return timestamptz("updated_at").notNull().defaultNow();
}

/** `name IN ('a', 'b', …)` for a CHECK constraint; values are our own literals, not input. */
function isOneOf(column: string, values: readonly string[]) {
  const list = values.map((v) => `'${v.replaceAll("'", "''")}'`).join(", ");
  return sql.raw(`"${column}" IN (${list})`);
}

/** The precise-controls words (DESIGN §10), re-exported for the columns below. */
export type {
  ApprovalPolicy,
  Caller,
  CallerBudgets,
  CallerJwtSettings,
  CallerKind,
  ClassifierMode,
  CredentialKind,
  StoredUrlGrants,
  Tier,
  WhenNobody,
} from "../domain/caller.ts";
// The domain words live in src/domain/ (nothing with side effects); the columns below are typed
// with them, and the row types at the end are checked to be exactly them.
export {
  approvalPolicies,
  callerKinds,
  classifierModes,
  credentialKinds,
  tiers,
  whenNobodyModes,
} from "../domain/caller.ts";
export type {
  PendingApproval,
  PendingBatch,
  PendingInput,
  QueuedApproval,
  RunBudgetLimits,
  RunBudgetUsed,
  RunError,
  RunOrigin,
  RunStatus,
  StopKind,
  ToolCallStatus,
} from "../domain/run.ts";
export { runOrigins, runStatuses, stopKinds, toolCallStatuses } from "../domain/run.ts";

/**
 * The precise controls a run started with (src/gate/controls.ts): narrowing the caller later
 * applies from the next step, widening never does, so the run combines these with the caller's
 * current ones, the stricter side winning.
 */
export type RunControlsSnapshot = {
  commands: string[];
  toolOverrides: Record<string, string>;
  urlGrants: StoredUrlGrants | null;
  whenNobody: WhenNobody | null;
  /** Absent in runs recorded before the switch existed: `on`. */
  classifier?: ClassifierMode;
};

/** How the engine decided one tool call (src/gate/decide.ts), for `runs show` and audit. */
export type ToolCallDecisionRecord = {
  action: "run" | "park" | "refuse" | "decline";
  rule: string;
  reason: string;
  risk?: string;
  floorReasons?: string[];
  coveredBy?: string;
  key?: string | null;
  /** web_fetch outside the URL grants: why the URL (or a redirect hop) is not granted. */
  urlReason?: string;
  classifier?: {
    model: string;
    verdict: string;
    failure?: string;
    reason: string;
    inputTokens?: number;
    outputTokens?: number;
    costUsd?: number;
    latencyMs: number;
  };
};

export const callers = pgTable(
  "callers",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    name: text("name").notNull().unique(),
    kind: text("kind").$type<CallerKind>().notNull(),
    tier: text("tier").$type<Tier>().notNull().default("none"),
    allow: text("allow").array().notNull().default(sql`'{}'::text[]`),
    approvalPolicy: text("approval_policy").$type<ApprovalPolicy>().notNull().default("auto"),
    budgets: jsonb("budgets").$type<CallerBudgets>().notNull().default({}),
    /** Webhook callers: the fixed prompt; the payload is fenced in as untrusted data. */
    promptTemplate: text("prompt_template"),
    /** Webhook callers: event names that fire a run (e.g. `issues.opened`); null means all. */
    eventFilter: text("event_filter").array(),
    jwt: jsonb("jwt").$type<CallerJwtSettings>(),
    /** Command allowlist entries (`git status`): keys that run without asking (DESIGN §10). */
    commands: text("commands").array().notNull().default(sql`'{}'::text[]`),
    /** Tool name → `allow`, `deny` or `prompt`. */
    toolOverrides: jsonb("tool_overrides").$type<Record<string, string>>().notNull().default({}),
    /** web_fetch URL grants; null means none set (fetches follow the approval policy). */
    urlGrants: jsonb("url_grants").$type<StoredUrlGrants>(),
    /** `park` or `decline` a call that needs a person; null means the kind's default. */
    whenNobody: text("when_nobody").$type<WhenNobody>(),
    /** `off`: the command risk classifier never rates this caller's commands. */
    classifier: text("classifier").$type<ClassifierMode>().notNull().default("on"),
    /** Bumped on every change, for compare-and-set updates and cache invalidation. */
    version: integer("version").notNull().default(1),
    revokedAt: timestamptz("revoked_at"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    // A JWT request finds its peer by the token's issuer: an index lookup, however many peers.
    index("callers_jwt_issuer_idx").on(sql`(${t.jwt}->>'issuer')`).where(sql`"jwt" IS NOT NULL`),
    check("callers_kind_check", isOneOf("kind", callerKinds)),
    check("callers_tier_check", isOneOf("tier", tiers)),
    check("callers_approval_policy_check", isOneOf("approval_policy", approvalPolicies)),
    check(
      "callers_when_nobody_check",
      sql`"when_nobody" IS NULL OR ${isOneOf("when_nobody", whenNobodyModes)}`,
    ),
    check("callers_classifier_check", isOneOf("classifier", classifierModes)),
  ],
);

export const credentials = pgTable(
  "credentials",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    /** Null for the operator's own admin and operator tokens. */
    callerId: uuid("caller_id").references(() => callers.id, { onDelete: "cascade" }),
    kind: text("kind").$type<CredentialKind>().notNull(),
    /** Hex SHA-256 of the secret: the lookup key. The secret itself is shown once, never stored. */
    secretHash: text("secret_hash").notNull().unique(),
    /** First characters of the secret, for telling credentials apart in listings and the audit. */
    prefix: text("prefix").notNull(),
    /**
     * `webhook-secret` only: GitHub's HMAC needs the secret itself, so it is kept sealed under a
     * key that never enters the database (src/auth/sealed-secrets.ts). Null for every other kind.
     */
    sealedSecret: text("sealed_secret"),
    createdAt: createdAt(),
    /** Set when a rotation gives the old credential a grace period. */
    expiresAt: timestamptz("expires_at"),
    revokedAt: timestamptz("revoked_at"),
  },
  (t) => [
    index("credentials_caller_id_idx").on(t.callerId),
    check("credentials_kind_check", isOneOf("kind", credentialKinds)),
    check(
      "credentials_sealed_secret_check",
      sql`"sealed_secret" IS NULL OR "kind" = 'webhook-secret'`,
    ),
  ],
);

export const runs = pgTable(
  "runs",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id),
    origin: text("origin").$type<RunOrigin>().notNull(),
    a2aTaskId: text("a2a_task_id"),
    a2aContextId: text("a2a_context_id"),
    status: text("status").$type<RunStatus>().notNull().default("submitted"),
    approvalPolicy: text("approval_policy").$type<ApprovalPolicy>().notNull(),
    /** The effective tool set at the first segment; a resumed run never gets more than this. */
    toolSet: text("tool_set").array().notNull(),
    /** Segments started so far; a resumed parked run starts another. */
    segments: integer("segments").notNull().default(0),
    budgetLimits: jsonb("budget_limits").$type<RunBudgetLimits>().notNull().default({}),
    budgetUsed: jsonb("budget_used")
      .$type<RunBudgetUsed>()
      .notNull()
      .default({ tokens: 0, costUsd: 0, durationMs: 0, steps: 0 }),
    pendingApproval: jsonb("pending_approval").$type<PendingApproval>(),
    /** While parked: the rest of the tool batch the pending call belongs to. */
    pendingBatch: jsonb("pending_batch").$type<PendingBatch>(),
    /** While `input-required`: the question the run asked its caller (src/domain/run.ts). */
    pendingInput: jsonb("pending_input").$type<PendingInput>(),
    /** The caller's precise controls when the run first stepped; null until then. */
    controls: jsonb("controls").$type<RunControlsSnapshot>(),
    /**
     * The conversation so far (AI SDK ModelMessages without the system prompt): the caller's input,
     * then every model turn and tool result, so a parked run can resume on any instance.
     */
    messages: jsonb("messages").$type<unknown[]>().notNull().default([]),
    /** The model the run last used (`provider:model`), for prices and the admin view. */
    modelId: text("model_id"),
    /** A parked run expires (is rejected) at this time. */
    parkedUntil: timestamptz("parked_until"),
    /** The instance executing the run and its last heartbeat; a stale heartbeat means orphaned. */
    ownerInstanceId: text("owner_instance_id"),
    heartbeatAt: timestamptz("heartbeat_at"),
    result: jsonb("result"),
    error: jsonb("error").$type<RunError>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    startedAt: timestamptz("started_at"),
    /** When the current segment started; recovery charges its wall time up to the last heartbeat. */
    segmentStartedAt: timestamptz("segment_started_at"),
    finishedAt: timestamptz("finished_at"),
    /**
     * A cancel recorded for a working run: the instance executing it reads this between steps, so
     * the cancel holds when the NOTIFY that makes it fast is lost.
     */
    cancelRequestedAt: timestamptz("cancel_requested_at"),
    cancelReason: text("cancel_reason"),
    /** Who asked for the stop (src/domain/run.ts); null reads as `cancel` (rows before it). */
    stopKind: text("stop_kind").$type<StopKind>(),
  },
  (t) => [
    index("runs_caller_status_idx").on(t.callerId, t.status),
    index("runs_status_parked_until_idx").on(t.status, t.parkedUntil),
    index("runs_owner_instance_idx").on(t.ownerInstanceId),
    index("runs_a2a_task_idx").on(t.a2aTaskId),
    // listRuns: newest first, for everyone or for one caller.
    index("runs_created_at_idx").on(t.createdAt),
    index("runs_caller_created_at_idx").on(t.callerId, t.createdAt),
    check("runs_origin_check", isOneOf("origin", runOrigins)),
    check("runs_status_check", isOneOf("status", runStatuses)),
    check("runs_approval_policy_check", isOneOf("approval_policy", approvalPolicies)),
    check("runs_segments_check", sql`"segments" >= 0`),
    check("runs_stop_kind_check", sql`"stop_kind" IS NULL OR ${isOneOf("stop_kind", stopKinds)}`),
  ],
);

export const toolCalls = pgTable(
  "tool_calls",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    callId: text("call_id").notNull(),
    tool: text("tool").notNull(),
    argsDigest: text("args_digest").notNull(),
    status: text("status").$type<ToolCallStatus>().notNull(),
    /** Why it failed or was refused (`tool-unavailable`, `hidden-half`, `timeout` …). */
    code: text("code"),
    /** The run segment that made the call (a resumed run starts a new one). */
    segment: integer("segment").notNull().default(1),
    outputTruncated: boolean("output_truncated").notNull().default(false),
    /** How the call was decided: rule, reason, floor reasons, coverage, the classifier's verdict. */
    decision: jsonb("decision").$type<ToolCallDecisionRecord>(),
    createdAt: createdAt(),
    startedAt: timestamptz("started_at"),
    finishedAt: timestamptz("finished_at"),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.callId] }),
    check("tool_calls_status_check", isOneOf("status", toolCallStatuses)),
  ],
);

/** A2A task store; a task is visible only to the caller that created it. */
export const a2aTasks = pgTable(
  "a2a_tasks",
  {
    id: text("id").primaryKey(),
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id),
    contextId: text("context_id").notNull(),
    task: jsonb("task").notNull(),
    /** The seq of the task's last event in `a2a_task_events` (0: none yet). */
    eventSeq: integer("event_seq").notNull().default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("a2a_tasks_caller_context_idx").on(t.callerId, t.contextId),
    // ListTasks: a caller's newest first, read from the index rather than sorting all its tasks
    // (bench/growth.ts: the sort made a page grow with the caller's task count).
    // Ascending, read backwards: ORDER BY … DESC puts nulls first, as a backward scan does.
    index("a2a_tasks_caller_updated_idx").on(t.callerId, t.updatedAt, t.id),
    // Pruning, oldest first; created_at never changes, so updates of a task stay HOT.
    index("a2a_tasks_created_at_idx").on(t.createdAt),
  ],
);

/**
 * How many tasks each caller has: ListTasks' total without counting the caller's tasks (at 100 000
 * of them a count grew with the table: bench/growth.ts). Kept by triggers on `a2a_tasks`
 * (drizzle/0016_task_counts.sql), in the transaction of each insert and delete whichever code
 * writes them, so it cannot drift from the rows; the application only reads it. A task's caller
 * never changes (a trigger refuses it), so no update can move a task between counts.
 */
export const a2aTaskCounts = pgTable("a2a_task_counts", {
  callerId: uuid("caller_id")
    .primaryKey()
    .references(() => callers.id, { onDelete: "cascade" }),
  tasks: bigint("tasks", { mode: "number" }).notNull(),
});

/**
 * Every event a task streamed, in order (src/a2a/task-events.ts is the one writer): `seq` is the
 * task's own counter (`a2a_tasks.event_seq`, bumped under the task's row lock, so it rises by one
 * per event whichever instance records it) and the event's id on the wire. A client that lost its
 * stream resubscribes with the last id it saw and gets what followed from here.
 */
export const a2aTaskEvents = pgTable(
  "a2a_task_events",
  {
    taskId: text("task_id")
      .notNull()
      .references(() => a2aTasks.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    callerId: uuid("caller_id").notNull(),
    /** The event as streamed: a 1.0 StreamResponse in ProtoJSON, without its id. */
    event: jsonb("event").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.taskId, t.seq] }),
    index("a2a_task_events_created_idx").on(t.createdAt),
  ],
);

/**
 * One row per accepted webhook delivery. A delivery id (GitHub's X-GitHub-Delivery) is claimed
 * once by the unique constraint; senders without one (IFTTT) are deduplicated on the body hash
 * within a window by `claimWebhookDelivery` (src/db/webhook-claims.ts).
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id),
    deliveryId: text("delivery_id"),
    bodySha256: text("body_sha256").notNull(),
    receivedAt: timestamptz("received_at").notNull().defaultNow(),
    /**
     * Null once the run is pruned (src/db/retention.ts): the claim outlives it, and a delivery
     * whose run is gone reads as done, never as failed and retryable.
     */
    runId: uuid("run_id").references(() => runs.id, { onDelete: "set null" }),
  },
  (t) => [
    unique("webhook_deliveries_caller_delivery_key").on(t.callerId, t.deliveryId),
    index("webhook_deliveries_body_idx").on(t.callerId, t.bodySha256, t.receivedAt),
    // Pruning: the oldest claims first; a pruned run's claims found by its id (the SET NULL).
    index("webhook_deliveries_received_at_idx").on(t.receivedAt),
    index("webhook_deliveries_run_idx").on(t.runId),
  ],
);

/**
 * Notices sent to the operator's notify targets about a parked run (src/notify/): `parked` when it
 * parks, `expiring` when its approval window is about to close. The primary key is the claim: the
 * one instance whose insert lands sends that notice, so several instances never send it twice.
 */
export const runNotices = pgTable(
  "run_notices",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    /** The pending call the notice is about: a run that parks again is noticed again. */
    callId: text("call_id").notNull(),
    kind: text("kind").$type<"parked" | "expiring">().notNull(),
    instanceId: text("instance_id").notNull(),
    claimedAt: timestamptz("claimed_at").notNull().defaultNow(),
    /** `sending` while the claiming instance tries; then `sent` or `failed` (after the retries). */
    status: text("status").$type<"sending" | "sent" | "failed">().notNull().default("sending"),
    attempts: integer("attempts").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.runId, t.callId, t.kind] })],
);

/** JWT ids already used, kept until the token expires; the primary key refuses a replay. */
export const jwtReplays = pgTable(
  "jwt_replays",
  {
    issuer: text("issuer").notNull(),
    jti: text("jti").notNull(),
    expiresAt: timestamptz("expires_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.issuer, t.jti] }),
    index("jwt_replays_expires_at_idx").on(t.expiresAt),
  ],
);

/** Per-caller daily totals; `day` is the UTC date (YYYY-MM-DD). */
export const dailyUsage = pgTable(
  "daily_usage",
  {
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id, { onDelete: "cascade" }),
    day: date("day", { mode: "string" }).notNull(),
    tokens: bigint("tokens", { mode: "number" }).notNull().default(0),
    costUsd: numeric("cost_usd", { precision: 14, scale: 6, mode: "number" }).notNull().default(0),
    runs: integer("runs").notNull().default(0),
    /**
     * Tokens and dollars held by runs admitted today and not yet ended (src/runs/admission.ts):
     * admission grants a run part of what `tokens + reserved_tokens` leaves of the daily limit,
     * and the run's end gives it back; what the run spent is in `tokens`/`cost_usd` by then.
     */
    reservedTokens: bigint("reserved_tokens", { mode: "number" }).notNull().default(0),
    reservedCostUsd: numeric("reserved_cost_usd", { precision: 14, scale: 6, mode: "number" })
      .notNull()
      .default(0),
  },
  (t) => [primaryKey({ columns: [t.callerId, t.day] })],
);

/**
 * One row per caller: how many of its runs hold a concurrency slot (`submitted` or `working`).
 * Admission takes a slot with one conditional UPDATE (`running < limit`); every way a run leaves
 * those statuses in src/runs/run-state.ts gives it back in the same transaction.
 */
export const callerSlots = pgTable("caller_slots", {
  callerId: uuid("caller_id")
    .primaryKey()
    .references(() => callers.id, { onDelete: "cascade" }),
  running: integer("running").notNull().default(0),
});

/**
 * The append-only, hash-chained audit trail, written as an outbox, in two insert-only tables.
 * `appendAuditEvent` (src/db/audit.ts) inserts an event here inside the caller's transaction;
 * the chainer (src/db/audit-chainer.ts) later inserts its link into `audit_chain`, in
 * (xact_id, id) order. Neither table's rows are ever updated: triggers added by migrations
 * refuse UPDATE, DELETE and TRUNCATE on both.
 */
export const auditEvents = pgTable(
  "audit_events",
  {
    /** Insertion order; has gaps (rolled-back inserts). Not hashed. */
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    /**
     * The inserting transaction's id (`pg_current_xact_id()`). Events are chained in
     * (xact_id, id) order, and only once every transaction older than the chainer's snapshot has
     * ended, so a slow transaction can never be overtaken. Not hashed.
     */
    xactId: bigint("xact_id", { mode: "number" })
      .notNull()
      .default(sql`(pg_current_xact_id()::text::bigint)`),
    /** The database clock when the event was written (not when it was chained). */
    createdAt: timestamptz("created_at").notNull().default(sql`clock_timestamp()`),
    /** Written as an AuditActor and an AuditKind (src/domain/audit.ts); read as stored. */
    actor: text("actor").notNull(),
    kind: text("kind").notNull(),
    subject: text("subject"),
    data: jsonb("data").notNull(),
  },
  (t) => [
    // A subject's or a kind's events by transaction, the chain's order: the admin's filtered
    // pages of the trail (readAuditPage) read only their own rows. The kind's by time serves the overview's counts.
    index("audit_events_subject_idx").on(t.subject, t.xactId),
    index("audit_events_kind_chain_order_idx").on(t.kind, t.xactId),
    index("audit_events_kind_idx").on(t.kind, t.createdAt),
    // The chain order: the chainer reads what follows the head's event in it.
    index("audit_events_chain_order_idx").on(t.xactId, t.id),
  ],
);

/**
 * One link per chained event, written once by the chainer: `seq` contiguous from 1 in chain
 * order, the hash of the link before and the event's own hash (src/db/audit.ts says what it
 * covers). Narrow on purpose: chaining writes this row and never touches the event's.
 */
export const auditChain = pgTable(
  "audit_chain",
  {
    seq: bigint("seq", { mode: "number" }).primaryKey(),
    /** The chained event (`audit_events.id`); chained at most once. No foreign key: an event is
     * never deleted (the trigger), and the key's per-row check would lock the event's row. */
    eventId: bigint("event_id", { mode: "number" }).notNull(),
    prevHash: text("prev_hash").notNull(),
    hash: text("hash").notNull(),
  },
  (t) => [uniqueIndex("audit_chain_event_idx").on(t.eventId)],
);

/**
 * Every event with its link, if it has one yet (seq, prev_hash and hash null until chained): a
 * view over the two tables, created by the migration that split them, for reading and tests.
 */
export const auditTrail = pgView("audit_trail", {
  id: bigint("id", { mode: "number" }).notNull(),
  xactId: bigint("xact_id", { mode: "number" }).notNull(),
  seq: bigint("seq", { mode: "number" }),
  createdAt: timestamptz("created_at").notNull(),
  actor: text("actor").notNull(),
  kind: text("kind").notNull(),
  subject: text("subject"),
  data: jsonb("data").notNull(),
  prevHash: text("prev_hash"),
  hash: text("hash"),
}).existing();

/**
 * Signed heads over pruned prefixes of the audit chain (src/db/audit-prune.ts). Before the links
 * 1..seq and their events are deleted, a checkpoint records the hash of link `seq` — the head of
 * the pruned prefix — signed with a key derived from the server's secret key, so the retained
 * suffix still verifies against it. Insert-only: triggers refuse UPDATE, DELETE and TRUNCATE, and
 * allow deleting audit rows only at or below the highest checkpoint's seq.
 */
export const auditCheckpoints = pgTable("audit_checkpoints", {
  /** The last pruned link's seq: links 1..seq may be deleted. */
  seq: bigint("seq", { mode: "number" }).primaryKey(),
  /** That link's hash: the chain head over the pruned prefix. */
  hash: text("hash").notNull(),
  /** Events the prefix held (= seq, since seqs are contiguous from 1). */
  count: bigint("count", { mode: "number" }).notNull(),
  createdAt: timestamptz("created_at").notNull(),
  /** The signing key's id (its RFC 7638 thumbprint), and the Ed25519 signature (base64url). */
  keyId: text("key_id").notNull(),
  signature: text("signature").notNull(),
});

/** Live peergate instances sharing the database; runs name their owner here. */
export const instances = pgTable("instances", {
  id: text("id").primaryKey(),
  hostname: text("hostname").notNull(),
  pid: integer("pid").notNull(),
  startedAt: timestamptz("started_at").notNull().defaultNow(),
  heartbeatAt: timestamptz("heartbeat_at").notNull().defaultNow(),
});

/** The stored row is the domain's Caller, field for field (checked below). */
export type CallerRow = typeof callers.$inferSelect;

/**
 * Where a caller may have push notifications sent (DESIGN §10): URL grant entries in the forms of
 * src/policy/url-grants.ts — a host (`hooks.example.com`, default ports), a suffix
 * (`.example.com`) or a URL prefix (`https://hooks.example.com:8443/a2a`). None by default.
 */
export const callerPushHosts = pgTable(
  "caller_push_hosts",
  {
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id, { onDelete: "cascade" }),
    entry: text("entry").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.callerId, t.entry] })],
);

/** A2A push notification configs, per task and scoped to the task's caller (push-store.ts). */
export const pushConfigs = pgTable(
  "push_configs",
  {
    /** Surrogate key; the client-visible id is `configId`, unique per task. */
    id: uuid("id").primaryKey().defaultRandom(),
    /** No foreign key: a config sent with SendMessage is stored before the task's first write. */
    taskId: text("task_id").notNull(),
    callerId: uuid("caller_id")
      .notNull()
      .references(() => callers.id, { onDelete: "cascade" }),
    configId: text("config_id").notNull(),
    /** The TaskPushNotificationConfig in its 1.0 ProtoJSON form, without its secrets. */
    config: jsonb("config").notNull(),
    /** `token` and `authentication.credentials`, sealed with the secret key (push-store.ts). */
    sealedSecrets: text("sealed_secrets"),
    /** The wire version it was registered over: the body shape its deliveries take. */
    wireVersion: text("wire_version").notNull(),
    createdAt: createdAt(),
  },
  (t) => [unique("push_configs_task_config_key").on(t.taskId, t.configId)],
);

/**
 * The push outbox: one row per (config, stored task update), written in the transaction of the
 * update (push-outbox.ts) and claimed by any instance's worker (push-worker.ts). A delivery runs
 * only when no earlier one of its config is still pending, so each receiver sees updates in order.
 */
export const pushDeliveries = pgTable(
  "push_deliveries",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    pushConfigId: uuid("push_config_id")
      .notNull()
      .references(() => pushConfigs.id, { onDelete: "cascade" }),
    taskId: text("task_id").notNull(),
    callerId: uuid("caller_id").notNull(),
    /** The task as stored by the update (1.0 ProtoJSON). */
    task: jsonb("task").notNull(),
    state: text("state").$type<"pending" | "delivered" | "failed">().notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamptz("next_attempt_at").notNull().defaultNow(),
    /** While set and in the future, a worker holds the delivery; past it, any worker may retake it. */
    leaseUntil: timestamptz("lease_until"),
    lastError: text("last_error"),
    createdAt: createdAt(),
    finishedAt: timestamptz("finished_at"),
  },
  (t) => [
    check("push_deliveries_state_check", isOneOf("state", ["pending", "delivered", "failed"])),
    index("push_deliveries_pending_idx").on(t.nextAttemptAt, t.id).where(sql`state = 'pending'`),
    index("push_deliveries_config_pending_idx")
      .on(t.pushConfigId, t.id)
      .where(sql`state = 'pending'`),
    // Pruning, oldest first (src/db/retention.ts).
    index("push_deliveries_created_at_idx").on(t.createdAt),
  ],
);

export type NewCaller = typeof callers.$inferInsert;
export type Credential = typeof credentials.$inferSelect;
export type NewCredential = typeof credentials.$inferInsert;
export type Run = typeof runs.$inferSelect;
export type NewRun = typeof runs.$inferInsert;
export type ToolCall = typeof toolCalls.$inferSelect;
export type NewToolCall = typeof toolCalls.$inferInsert;
export type A2aTask = typeof a2aTasks.$inferSelect;
export type NewA2aTask = typeof a2aTasks.$inferInsert;
export type A2aTaskEvent = typeof a2aTaskEvents.$inferSelect;
export type WebhookDelivery = typeof webhookDeliveries.$inferSelect;
export type NewWebhookDelivery = typeof webhookDeliveries.$inferInsert;
export type JwtReplay = typeof jwtReplays.$inferSelect;
export type DailyUsage = typeof dailyUsage.$inferSelect;
export type AuditEvent = typeof auditEvents.$inferSelect;
/** An event as `audit_trail` shows it: with its seq and hashes once chained. */
export type AuditTrailRow = typeof auditTrail.$inferSelect;
export type PushConfigRow = typeof pushConfigs.$inferSelect;
export type PushDelivery = typeof pushDeliveries.$inferSelect;
export type Instance = typeof instances.$inferSelect;
export type RunNotice = typeof runNotices.$inferSelect;
export type AuditCheckpointRow = typeof auditCheckpoints.$inferSelect;

/** True only when A and B are the same type (neither wider). */
type Same<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** A compile error when the callers table and the domain's Caller drift apart. */
export const callerRowIsDomainCaller: Same<CallerRow, DomainCaller> = true;
