// The audit trail: append-only and hash-chained. Each chained event stores the hash of the one
// before it and its own hash = SHA-256(prev_hash + canonical JSON of its content), so editing,
// deleting or reordering a chained event breaks the chain at that event, and `verifyAuditChain`
// names it.
//
// Writing is an outbox. Callers append inside the same transaction as the change the event
// records: one INSERT, no lock, no read, so the change and its event commit together or not at
// all (an event exists iff its transaction committed). The event row is never changed after that.
// `chainAuditEvents` then links committed events in batches, one pass at a time cluster-wide (a
// transaction-scoped advisory lock): one narrow `audit_chain` row per event (seq, event id,
// prev_hash, hash), in a fixed order: by the inserting transaction's id, then insertion id. It
// only takes events whose transaction id is below the oldest transaction still running
// (`pg_snapshot_xmin`): every such transaction has ended, so no event can later appear in front
// of what is already chained — a slow transaction holds the chain back rather than being
// overtaken, and nothing is skipped, chained twice or left as a gap. The chained events are thus
// always a prefix of that order, and "unchained" is everything after the head's event in it.
// src/db/audit-chainer.ts runs the passes on every instance.
//
// NEVER put a secret in an event: no tokens, webhook secrets, passwords, Authorization headers or
// raw signatures. Record a credential's id, display prefix or SHA-256 instead.
//
// What the chain cannot show by itself: someone with write access who recomputes every later
// hash, or who drops events from the very end — nor anything done to the unchained tail before it
// is chained (the append-only trigger still refuses it; verify reports how long the tail is).
// Keep `lastHash` from a verify somewhere else (a log, a ticket) to anchor it.
//
// One file over 500 lines on purpose: the canonical form, the hash, the chaining order and the
// verify walk must agree to the byte, and they share one decoder of stored rows and one list of
// hashed columns; bench/audit.ts also loads this one module from another checkout to compare.
import { hash } from "node:crypto";
import { is, type SQL, sql } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import type { AuditActor, AuditKind } from "../domain/audit.ts";
import { canonicalJson } from "../json-text.ts";
import {
  type AuditCheckpoint,
  type CheckpointKey,
  checkpointText,
  readAuditCheckpoints,
  readChainBounds,
} from "./audit-prune.ts";
import { type Db, type DbOrTx, selectRows } from "./client.ts";
import { advisoryLockSpace, lockKeys } from "./locks.ts";
import { prebuilt } from "./prebuilt.ts";
import { type AuditTrailRow, auditChain, auditEvents } from "./schema.ts";
import { storableJson, storableText } from "./storable.ts";

/** The prev_hash of the first event. */
export const genesisHash = "0".repeat(64);

/** Bumped if the hashed content ever changes shape; part of every hash. */
const contentVersion = 1;

export type AuditEventInput = {
  /** Who acted: `admin`, `operator`, `caller:<name>`, `system`, `instance:<id>` … */
  actor: AuditActor;
  /** What happened, dotted: `caller.created`, `auth.failed`, `run.approved` … (the whole list). */
  kind: AuditKind;
  /** What it happened to, e.g. `caller:<id>` or `run:<id>`. */
  subject?: string | null;
  /** JSON details. Never secrets (see above). */
  data: Record<string, unknown>;
};

/** The stored, not yet chained event: its insertion id (its seq comes once it is chained). */
export type AppendedAuditEvent = { id: number };

/** Where the chain breaks: `duplicate` is a link naming an event an earlier link names too. */
export type AuditChainProblem =
  | "genesis"
  | "gap"
  | "prev-hash"
  | "content"
  | "duplicate"
  | "checkpoint";

/** The latest checkpoint the retained chain starts from (src/db/audit-prune.ts). */
export type VerifiedCheckpoint = { seq: number; hash: string; createdAt: string };

/** Committed events not chained yet: how many, and how long the oldest has waited. */
export type UnchainedAuditTail = { count: number; oldestAgeMs: number | null };

export type AuditChainVerification =
  | {
      ok: true;
      /** Links verified: the retained ones, after any pruned prefix. */
      count: number;
      lastHash: string;
      unchained: UnchainedAuditTail;
      /** Present once a prefix was pruned: the latest checkpoint, its signature checked. */
      checkpoint?: VerifiedCheckpoint;
    }
  | {
      ok: false;
      seq: number;
      reason: AuditChainProblem;
      problem: string;
      unchained: UnchainedAuditTail;
    };

type HashedContent = {
  seq: number;
  createdAt: Date;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
};

/**
 * The hash an event must carry, given the hash of the event before it: SHA-256 of `prevHash`
 * followed by the canonical JSON of {v, seq, createdAt, actor, kind, subject, data}.
 */
export function computeAuditHash(prevHash: string, content: HashedContent): string {
  // canonicalJson of that object, written out: its keys in sorted order, no undefined among them.
  const text =
    `{"actor":${JSON.stringify(content.actor)}` +
    `,"createdAt":${JSON.stringify(content.createdAt.toISOString())}` +
    `,"data":${canonicalJson(content.data)}` +
    `,"kind":${JSON.stringify(content.kind)}` +
    `,"seq":${JSON.stringify(content.seq)}` +
    `,"subject":${JSON.stringify(content.subject)}` +
    `,"v":${contentVersion}}`;
  // One-shot: the same bytes as updating a Hash with both, without creating one per event.
  return hash("sha256", prevHash + text, "hex");
}

/**
 * `data` as the JSON text jsonb will store exactly: no undefined, functions or Dates (JSON
 * serialisation), no NUL and no lone surrogate (storableJson). JSON.stringify writes both of
 * those as a `\u` escape, so text without one is already storable and is serialised once.
 */
function storableJsonText(data: Record<string, unknown>): string {
  const text = JSON.stringify(data);
  if (!text.includes("\\u")) return text;
  return JSON.stringify(storableJson(JSON.parse(text)));
}

const auditWriteListeners = new Set<() => void>();

/**
 * Told, synchronously and before its transaction commits, each time this process writes an audit
 * event (`appendAuditEvent`, or `auditPlaceholderValues` for a statement that embeds one): the
 * audit chainer's cue to look soon (src/db/audit-chainer.ts). Returns an unsubscribe.
 */
export function onAuditWrite(listener: () => void): () => void {
  auditWriteListeners.add(listener);
  return () => auditWriteListeners.delete(listener);
}

function noteAuditWrite(): void {
  for (const listener of auditWriteListeners) listener();
}

/**
 * Records one event. Pass the transaction that makes the change being recorded: the event is
 * stored (unchained) with it, in one INSERT, and commits or rolls back with it. Given the
 * database itself, the INSERT commits on its own. It is chained later, within the chainer's
 * interval (src/db/audit-chainer.ts); `flushAuditChain` waits for that.
 *
 * @example
 * await db.transaction(async (tx) => {
 *   const [caller] = await tx.update(callers).set({ tier: "none" }).where(…).returning();
 *   await appendAuditEvent(tx, { actor: "admin", kind: "caller.revoked", subject: `caller:${caller.id}`, data: { name: caller.name } });
 * });
 */
export async function appendAuditEvent(
  tx: DbOrTx,
  event: AuditEventInput,
): Promise<AppendedAuditEvent> {
  noteAuditWrite();
  // The chainer hashes what jsonb gives back, so only storable JSON goes in. created_at and
  // xact_id are the database's defaults.
  const [row] = await insertAuditEvent(tx, {
    actor: storableText(event.actor),
    kind: storableText(event.kind),
    subject: event.subject == null ? null : storableText(event.subject),
    data: storableJsonText(event.data),
  });
  if (!row) throw new Error("audit insert returned no row");
  return { id: Number(row.id) };
}

/**
 * `appendAuditEvent`'s INSERT, built once (src/db/prebuilt.ts): a plain statement, for the insert
 * builder's per-call work showed in the append's profile, and then drizzle's building of this one
 * in the profile of every run's start.
 */
const insertAuditEvent = prebuilt<
  { actor: string; kind: string; subject: string | null; data: string },
  { id: unknown }
>(
  () => sql`insert into ${auditEvents} (actor, kind, subject, data)
    values (${sql.placeholder("actor")}::text, ${sql.placeholder("kind")}::text,
            ${sql.placeholder("subject")}::text, ${sql.placeholder("data")}::text::jsonb)
    returning id`,
);

/**
 * The same event as `appendAuditEvent`, as an INSERT to embed in a bigger statement (a CTE): one
 * event per row of `source` (a CTE name), so it is written exactly when the change that `source`
 * returns was made — in that statement, so in its transaction. For a prebuilt statement
 * (src/db/prebuilt.ts): the event's fields are placeholders, filled per call with
 * `auditPlaceholderValues(event)`.
 *
 * @example
 * prebuilt(() => sql`with done as (${update}), event as (${auditInsertFrom(sql`done`)}) select count(*) from done`)
 */
export function auditInsertFrom(source: SQL): SQL {
  return sql`insert into ${auditEvents} (actor, kind, subject, data)
    select ${sql.placeholder("auditActor")}::text, ${sql.placeholder("auditKind")}::text,
      ${sql.placeholder("auditSubject")}::text, ${sql.placeholder("auditData")}::text::jsonb
    from ${source}`;
}

/** The values of `auditInsertFrom`'s placeholders for `event`, stored as `appendAuditEvent` stores them. */
export function auditPlaceholderValues(event: AuditEventInput): {
  auditActor: string;
  auditKind: string;
  auditSubject: string | null;
  auditData: string;
} {
  noteAuditWrite();
  return {
    auditActor: storableText(event.actor),
    auditKind: storableText(event.kind),
    auditSubject: event.subject == null ? null : storableText(event.subject),
    auditData: storableJsonText(event.data),
  };
}

export type ChainPassResult = {
  /** Events chained by this call. */
  chained: number;
  /** Another pass held the lock (only when not waiting for it). */
  busy: boolean;
  /** The last batch was full: more may be chainable right away. */
  more: boolean;
};

const defaultChainBatchSize = 1_000;

/** The last link of the chain, with its event's place in the chain order. */
type ChainHead = { seq: number; hash: string; xactId: number | null; id: number | null };

/** Reads the chain's last link; undefined while the chain is empty. */
async function readHead(db: DbOrTx): Promise<ChainHead | undefined> {
  const [row] = await selectRows<{ seq: unknown; hash: string; xact_id: unknown; id: unknown }>(
    db,
    sql`select c.seq, c.hash, e.xact_id, e.id
          from ${auditChain} c left join ${auditEvents} e on e.id = c.event_id
         order by c.seq desc limit 1`,
  );
  if (!row) return undefined;
  return {
    seq: Number(row.seq),
    hash: row.hash,
    xactId: row.xact_id === null ? null : Number(row.xact_id),
    id: row.id === null ? null : Number(row.id),
  };
}

/**
 * Events of `e` (audit_events) not chained yet, given the head: those after the head's event in
 * the chain order. An event of the head's own transaction is also checked against the chain:
 * events written before the outbox (migration 0004) all share one xact_id, and their seq order is
 * not their id order, so after a migration the head need not be the last of them.
 */
function unchainedAfter(head: ChainHead | undefined): SQL {
  if (!head) return sql`true`;
  if (head.xactId === null || head.id === null) {
    // The head's event is missing (verify reports it): whatever has no link is unchained.
    return sql`not exists (select 1 from ${auditChain} c where c.event_id = e.id)`;
  }
  return sql`(e.xact_id, e.id) > (${head.xactId}::bigint, ${head.id}::bigint)
    and (e.xact_id > ${head.xactId}::bigint
         or not exists (select 1 from ${auditChain} c where c.event_id = e.id))`;
}

/** An event's stored content, decoded the one way both the chainer and verify hash it. */
type StoredEvent = {
  id: number;
  createdAt: Date;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
};

type StoredEventRow = {
  id: unknown;
  created_at: unknown;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
};

/** The columns `decodeEvent` reads, of `audit_events e`. */
const eventColumns = sql`e.id, e.created_at, e.actor, e.kind, e.subject, e.data`;

/** As drizzle maps these columns: timestamptz text to a Date, jsonb text to its value. */
function decodeEvent(row: StoredEventRow): StoredEvent {
  const createdAt = row.created_at;
  const data = row.data;
  return {
    id: Number(row.id),
    createdAt: createdAt instanceof Date ? createdAt : new Date(createdAt as string),
    actor: row.actor,
    kind: row.kind,
    subject: row.subject,
    data: typeof data === "string" ? JSON.parse(data) : data,
  };
}

/**
 * One transaction: takes the chain lock, reads the head and chains up to `batchSize` events.
 * Returns how many, or -1 when the lock was held elsewhere and `wait` is false.
 */
async function chainBatch(db: Db, batchSize: number, wait: boolean): Promise<number> {
  return db.transaction(async (tx) => {
    if (wait) {
      await tx.execute(sql`select pg_advisory_xact_lock(${advisoryLockSpace}, ${lockKeys.audit})`);
    } else {
      const [lock] = await selectRows<{ locked: boolean }>(
        tx,
        sql`select pg_try_advisory_xact_lock(${advisoryLockSpace}, ${lockKeys.audit}) as locked`,
      );
      if (!lock?.locked) return -1;
    }
    // READ COMMITTED: each statement below sees what the previous lock holder committed.
    const head = await readHead(tx);
    if (head && head.id === null) {
      throw new Error(
        `the audit chain's last link (seq ${head.seq}) names an event that is not stored: ` +
          "run `peergate audit verify`",
      );
    }
    // One statement, so the snapshot whose xmin bounds the batch is the one that reads it: every
    // transaction below xmin has ended, so every event it committed is visible here.
    const rows = await selectRows<StoredEventRow>(
      tx,
      sql`select ${eventColumns} from ${auditEvents} e
           where ${unchainedAfter(head)}
             and e.xact_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
           order by e.xact_id, e.id
           limit ${batchSize}`,
    );
    if (rows.length === 0) return 0;
    let seq = head?.seq ?? 0;
    let prevHash = head?.hash ?? genesisHash;
    const ids: number[] = [];
    const seqs: number[] = [];
    const prevHashes: string[] = [];
    const hashes: string[] = [];
    for (const row of rows) {
      const event = decodeEvent(row);
      seq += 1;
      const hash = computeAuditHash(prevHash, { ...event, seq });
      ids.push(event.id);
      seqs.push(seq);
      prevHashes.push(prevHash);
      hashes.push(hash);
      prevHash = hash;
    }
    // Hashes are hex and the numbers digits: a comma-joined text is one parameter on both drivers.
    // The primary key (seq) and the unique event_id refuse a link twice, whatever happens.
    await tx.execute(
      sql`insert into ${auditChain} (seq, event_id, prev_hash, hash)
          select * from unnest(string_to_array(${seqs.join(",")}, ',')::bigint[],
                               string_to_array(${ids.join(",")}, ',')::bigint[],
                               string_to_array(${prevHashes.join(",")}, ','),
                               string_to_array(${hashes.join(",")}, ','))`,
    );
    return rows.length;
  });
}

/**
 * Chains committed events, a batch per transaction, until none is chainable now (or `maxBatches`
 * have run). Safe to call from any instance at any time: passes take turns on an advisory lock.
 * It gives up at once (`busy`) when another pass holds the lock, since that pass chains the same
 * events; `wait: true` waits for the lock instead (within the statement deadline).
 * Events of transactions at or above the oldest running one stay unchained until it ends.
 */
export async function chainAuditEvents(
  db: Db,
  options: { batchSize?: number; wait?: boolean; maxBatches?: number } = {},
): Promise<ChainPassResult> {
  const batchSize = options.batchSize ?? defaultChainBatchSize;
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  let chained = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const n = await chainBatch(db, batchSize, options.wait ?? false);
    if (n < 0) return { chained, busy: true, more: false };
    chained += n;
    if (n < batchSize) return { chained, busy: false, more: false };
  }
  return { chained, busy: false, more: true };
}

function toTail(row: { count: unknown; oldestAgeMs: unknown } | undefined): UnchainedAuditTail {
  const count = Number(row?.count ?? 0);
  const age = row?.oldestAgeMs;
  return {
    count,
    oldestAgeMs: count === 0 || age === null || age === undefined ? null : Math.round(Number(age)),
  };
}

const tailColumns = sql`count(*)::int as count,
  (extract(epoch from clock_timestamp() - min(e.created_at)) * 1000)::float8 as "oldestAgeMs"`;

/**
 * How many committed events are not chained yet, and the age of the oldest (database clock):
 * those after the head in the chain order, an index range. Cheap enough for a metric.
 */
export async function readUnchainedTail(db: DbOrTx): Promise<UnchainedAuditTail> {
  const head = await readHead(db);
  const [row] = await selectRows<{ count: unknown; oldestAgeMs: unknown }>(
    db,
    sql`select ${tailColumns} from ${auditEvents} e where ${unchainedAfter(head)}`,
  );
  return toTail(row);
}

/**
 * Every committed event without a link, wherever it sits in the chain order. The same as
 * `readUnchainedTail` unless someone inserted an event by hand with a forged xact_id below the
 * head (which no chaining pass would ever reach). Reads the whole table: for verify.
 */
async function readEveryUnlinkedEvent(db: DbOrTx): Promise<UnchainedAuditTail> {
  const [row] = await selectRows<{ count: unknown; oldestAgeMs: unknown }>(
    db,
    sql`select ${tailColumns} from ${auditEvents} e
         where not exists (select 1 from ${auditChain} c where c.event_id = e.id)`,
  );
  return toTail(row);
}

export type FlushResult = { chained: number; remaining: number };

const flushRetryMs = 5;

/** Unchained events up to `target` in the chain order. */
async function countUnchainedUpTo(db: Db, target: { xactId: number; id: number }) {
  const head = await readHead(db);
  const [left] = await selectRows<{ n: unknown }>(
    db,
    sql`select count(*)::int as n from ${auditEvents} e
         where ${unchainedAfter(head)}
           and (e.xact_id, e.id) <= (${target.xactId}::bigint, ${target.id}::bigint)`,
  );
  return Number(left?.n ?? 0);
}

/**
 * Chains every event committed before the call, waiting for older transactions that are still
 * open to end (they hold the chain back). Rejects after `timeoutMs` (default 30 s) with how
 * many are left, or, with `onTimeout: "return"`, returns that count instead.
 */
export async function flushAuditChain(
  db: Db,
  options: { timeoutMs?: number; batchSize?: number; onTimeout?: "throw" | "return" } = {},
): Promise<FlushResult> {
  const deadline = performance.now() + (options.timeoutMs ?? 30_000);
  // The last event committed so far in the chain order: once it is chained, so is everything
  // committed before the call (the chained events are a prefix of that order).
  const [last] = await selectRows<{ xact_id: unknown; id: unknown }>(
    db,
    sql`select xact_id, id from ${auditEvents} order by xact_id desc, id desc limit 1`,
  );
  if (!last) return { chained: 0, remaining: 0 };
  const target = { xactId: Number(last.xact_id), id: Number(last.id) };
  let chained = 0;
  let remaining = await countUnchainedUpTo(db, target);
  while (remaining > 0) {
    // Not waiting on the lock: a pass elsewhere may be slow, or its instance dead (until
    // PostgreSQL notices and frees the lock); retrying keeps every statement short.
    chained += (await chainAuditEvents(db, { batchSize: options.batchSize })).chained;
    remaining = await countUnchainedUpTo(db, target);
    if (remaining === 0) break;
    if (performance.now() >= deadline) {
      if (options.onTimeout === "return") return { chained, remaining };
      throw new Error(
        `${remaining} audit events still unchained after ${options.timeoutMs ?? 30_000} ms: ` +
          "a transaction older than them is still open, or another chaining pass holds the lock",
      );
    }
    // An older transaction is still open, or another pass is chaining: retry shortly.
    await new Promise((resolve) => setTimeout(resolve, flushRetryMs));
  }
  return { chained, remaining: 0 };
}

/** One link of the walk with its event, if the event is still stored. */
type WalkedLink = {
  seq: number;
  eventId: number;
  prevHash: string;
  hash: string;
  event: StoredEvent | undefined;
};

function checkLink(
  link: WalkedLink,
  expectedSeq: number,
  prevHash: string,
): WalkResult | undefined {
  if (link.seq !== expectedSeq) {
    return {
      ok: false,
      seq: expectedSeq,
      reason: "gap",
      problem: `event ${expectedSeq} is missing (the next one stored is ${link.seq}): deleted?`,
    };
  }
  if (!link.event) {
    return {
      ok: false,
      seq: link.seq,
      reason: "gap",
      problem: `event ${link.seq} is missing (its link names event id ${link.eventId}, which is not stored): deleted?`,
    };
  }
  if (link.prevHash !== prevHash) {
    return {
      ok: false,
      seq: link.seq,
      reason: expectedSeq === 1 ? "genesis" : "prev-hash",
      problem:
        expectedSeq === 1
          ? "the first event does not start the chain (its prev_hash is not the genesis hash)"
          : `prev_hash does not match the hash of event ${expectedSeq - 1}: reordered, replaced or inserted?`,
    };
  }
  if (computeAuditHash(link.prevHash, { ...link.event, seq: link.seq }) !== link.hash) {
    return {
      ok: false,
      seq: link.seq,
      reason: "content",
      problem: "content does not match its hash: edited?",
    };
  }
  return undefined;
}

/**
 * Walks the chain in batches (a cursor on seq: memory stays flat whatever its length) and reports
 * the first broken link, or the event count and the hash of the last event when it is intact;
 * either way with the unchained tail: every committed event without a link.
 *
 * Once a prefix was pruned, the walk starts from the checkpoint over it: every checkpoint's
 * signature is checked with `checkpointKey` (without one, a chain with checkpoints fails closed),
 * the first retained link must follow a checkpoint, and every checkpoint's hash must be the hash
 * of its link where that link is still stored.
 *
 * Given the database (not a transaction), it first chains what was committed before the call,
 * waiting up to `flushTimeoutMs` (default 2 s) for older open transactions; `flush: false`
 * only reads. Whatever is still unchained then is reported as `unchained`, never as a break.
 * `onProgress(verified, total)` is called after every batch.
 */
export async function verifyAuditChain(
  db: DbOrTx,
  options: {
    batchSize?: number;
    flush?: boolean;
    flushTimeoutMs?: number;
    checkpointKey?: Pick<CheckpointKey, "verify"> | undefined;
    onProgress?: (verified: number, total: number) => void;
  } = {},
): Promise<AuditChainVerification> {
  if ((options.flush ?? true) && !is(db, PgTransaction)) {
    await flushAuditChain(db as Db, {
      timeoutMs: options.flushTimeoutMs ?? 2_000,
      onTimeout: "return",
    });
  }
  const result = await walkChain(db, options.batchSize ?? 1_000, options);
  const unchained = await readEveryUnlinkedEvent(db);
  const duplicate = result.ok ? await findDuplicateLink(db, result.count + unchained.count) : null;
  if (duplicate || !result.ok) return { ...(duplicate ?? result), unchained };
  const { checkpoint, ...intact } = result;
  return { ...intact, unchained, ...(checkpoint ? { checkpoint } : {}) };
}

/**
 * A link naming an event that an earlier link names too (a replayed event; the unique index
 * refuses it, so only someone who dropped that index could write one). Each link's hash can be
 * right on its own, so the walk does not see it; the count does: with every link's event stored
 * (the walk checked that), the links and the unlinked events add up to more than the events.
 */
async function findDuplicateLink(
  db: DbOrTx,
  linkedAndUnlinked: number,
): Promise<WalkResult | null> {
  const [stored] = await selectRows<{ n: unknown }>(
    db,
    sql`select count(*)::int as n from ${auditEvents}`,
  );
  if (Number(stored?.n ?? 0) >= linkedAndUnlinked) return null;
  const [first] = await selectRows<{ seq: unknown; first_seq: unknown; event_id: unknown }>(
    db,
    sql`select d.seq, min(c.seq) as first_seq, d.event_id
          from ${auditChain} d join ${auditChain} c on c.event_id = d.event_id and c.seq < d.seq
         group by d.seq, d.event_id order by d.seq limit 1`,
  );
  if (!first) return null;
  return {
    ok: false,
    seq: Number(first.seq),
    reason: "duplicate",
    problem: `event ${first.seq} names the event already chained as ${first.first_seq}: replayed?`,
  };
}

type WalkResult =
  | { ok: true; count: number; lastHash: string; checkpoint?: VerifiedCheckpoint }
  | { ok: false; seq: number; reason: AuditChainProblem; problem: string };

type WalkedRow = StoredEventRow & {
  seq: unknown;
  event_id: unknown;
  prev_hash: string;
  hash: string;
};

type Broken = Extract<WalkResult, { ok: false }>;

/** A checkpoint whose signature does not hold, or undefined when all do. */
function checkSignatures(
  checkpoints: AuditCheckpoint[],
  key: Pick<CheckpointKey, "verify"> | undefined,
): Broken | undefined {
  for (const c of checkpoints) {
    if (!key) {
      return {
        ok: false,
        seq: c.seq,
        reason: "checkpoint",
        problem: `the checkpoint at event ${c.seq} cannot be checked: no checkpoint key was given (the server's secret key)`,
      };
    }
    if (!key.verify(checkpointText(c), c.signature)) {
      return {
        ok: false,
        seq: c.seq,
        reason: "checkpoint",
        problem: `the checkpoint at event ${c.seq} does not carry a valid signature of this server's key: altered or forged?`,
      };
    }
  }
  return undefined;
}

/**
 * Where the walk starts: at the genesis, or after a pruned prefix, from the checkpoint that ends
 * it. A prune that stopped half-way leaves links below a checkpoint: those are walked from their
 * own prev_hash and must reach the checkpoint's hash (checked on the way).
 */
function startOfWalk(
  first: number,
  checkpoints: AuditCheckpoint[],
): { prevHash: string | undefined } | Broken {
  if (first === 1) return { prevHash: genesisHash };
  const exact = checkpoints.find((c) => c.seq === first - 1);
  if (exact) return { prevHash: exact.hash };
  if (checkpoints.some((c) => c.seq >= first)) return { prevHash: undefined };
  return {
    ok: false,
    seq: 1,
    reason: "gap",
    problem: `events 1 to ${first - 1} are missing and no checkpoint covers them: deleted?`,
  };
}

async function walkChain(
  db: DbOrTx,
  batchSize: number,
  options: {
    checkpointKey?: Pick<CheckpointKey, "verify"> | undefined;
    onProgress?: (verified: number, total: number) => void;
  },
): Promise<WalkResult> {
  const checkpoints = await readAuditCheckpoints(db);
  const badSignature = checkSignatures(checkpoints, options.checkpointKey);
  if (badSignature) return badSignature;
  const latest = checkpoints.at(-1);
  const bounds = await readChainBounds(db);
  if (!bounds) {
    if (latest) {
      return {
        ok: false,
        seq: latest.seq,
        reason: "gap",
        problem: `a checkpoint covers events up to ${latest.seq}, but no event after it is stored: deleted?`,
      };
    }
    options.onProgress?.(0, 0);
    return { ok: true, count: 0, lastHash: genesisHash };
  }
  const start = startOfWalk(bounds.first, checkpoints);
  if ("ok" in start) return start;
  const signed = new Map(checkpoints.map((c) => [c.seq, c.hash]));
  const total = bounds.last - bounds.first + 1;
  let count = 0;
  let prevHash = start.prevHash;
  let lastSeq = bounds.first - 1;
  for (;;) {
    const rows = await selectRows<WalkedRow>(
      db,
      sql`select c.seq, c.event_id, c.prev_hash, c.hash, ${eventColumns}
            from ${auditChain} c left join ${auditEvents} e on e.id = c.event_id
           where c.seq > ${lastSeq}::bigint
           order by c.seq limit ${batchSize}`,
    );
    for (const row of rows) {
      const link: WalkedLink = {
        seq: Number(row.seq),
        eventId: Number(row.event_id),
        prevHash: row.prev_hash,
        hash: row.hash,
        event: row.id === null ? undefined : decodeEvent(row),
      };
      const broken = checkLink(link, lastSeq + 1, prevHash ?? link.prevHash);
      if (broken) return broken;
      const checkpointHash = signed.get(link.seq);
      if (checkpointHash !== undefined && checkpointHash !== link.hash) {
        return {
          ok: false,
          seq: link.seq,
          reason: "checkpoint",
          problem: `event ${link.seq} is not the event its signed checkpoint names (the hashes differ): edited, or the chain before it rewritten?`,
        };
      }
      count += 1;
      lastSeq = link.seq;
      prevHash = link.hash;
    }
    options.onProgress?.(count, total);
    if (rows.length < batchSize) break;
  }
  if (latest && latest.seq > lastSeq) {
    return {
      ok: false,
      seq: latest.seq,
      reason: "gap",
      problem: `a checkpoint covers events up to ${latest.seq}, beyond the last stored event ${lastSeq}: deleted from the end?`,
    };
  }
  return {
    ok: true,
    count,
    lastHash: prevHash ?? genesisHash,
    ...(latest
      ? {
          checkpoint: {
            seq: latest.seq,
            hash: latest.hash,
            createdAt: latest.createdAt.toISOString(),
          },
        }
      : {}),
  };
}

export type AuditPageQuery = { after: number; limit: number; kind?: string; subject?: string };

/** The kind and subject filters of an audit page, as `and …` clauses on `e` (the events). */
function auditFilters(q: AuditPageQuery): SQL {
  return sql.join(
    [
      ...(q.kind ? [sql` and e.kind = ${q.kind}`] : []),
      ...(q.subject ? [sql` and e.subject = ${q.subject}`] : []),
    ],
    sql``,
  );
}

/**
 * The chained part of an audit page (`readAuditPage`); exported so bench/growth.ts explains the
 * statement the admin's page runs, not a copy of it.
 *
 * Unfiltered, the chain is walked by seq. Filtered by kind or subject, the walk starts in the
 * events' index of that kind or subject instead, by xact_id, so a rare kind's page reads its own
 * rows, not every link between them (a walk by seq read about limit / share links: 33 000 for a
 * kind of 0.3 %, more as the trail grew). Seq order is (xact_id, seq) order: the chainer links
 * each transaction's events after every older transaction's (xact_id ascending), and the chain
 * from before the outbox carries one xact_id, the migration's, older than any since. So the walk
 * starts at the xact_id of the first link after the cursor and sorts each transaction's few
 * events by seq (within one transaction, id order is not always seq order: that first chain's ids
 * follow its storage order).
 */
export function chainedPageStatement(q: AuditPageQuery): SQL {
  return q.kind || q.subject
    ? sql`select c.seq, c.prev_hash, c.hash, e.xact_id, ${eventColumns}
          from ${auditEvents} e join ${auditChain} c on c.event_id = e.id
         where c.seq > ${q.after}::bigint${auditFilters(q)}
           and e.xact_id >= (
             select s.xact_id from ${auditChain} sc join ${auditEvents} s on s.id = sc.event_id
              where sc.seq > ${q.after}::bigint order by sc.seq limit 1)
         order by e.xact_id, c.seq limit ${q.limit}`
    : sql`select c.seq, c.prev_hash, c.hash, e.xact_id, ${eventColumns}
          from ${auditChain} c join ${auditEvents} e on e.id = c.event_id
         where c.seq > ${q.after}::bigint
         order by c.seq limit ${q.limit}`;
}

/**
 * A page of the trail for the admin: chained events after seq `after` in seq order, then, if
 * the page is not full, the events still unchained in the order they will be chained (seq and
 * hashes null). Optionally of one kind or subject.
 */
export async function readAuditPage(db: DbOrTx, q: AuditPageQuery): Promise<AuditTrailRow[]> {
  const filters = auditFilters(q);
  const chained = await selectRows<WalkedRow & { xact_id: unknown }>(db, chainedPageStatement(q));
  const page: AuditTrailRow[] = chained.map((row) => ({
    ...decodeEvent(row),
    xactId: Number(row.xact_id),
    seq: Number(row.seq),
    prevHash: row.prev_hash,
    hash: row.hash,
  }));
  if (page.length === q.limit) return page;
  const head = await readHead(db);
  const unchained = await selectRows<StoredEventRow & { xact_id: unknown }>(
    db,
    sql`select e.xact_id, ${eventColumns} from ${auditEvents} e
         where ${unchainedAfter(head)}${filters}
         order by e.xact_id, e.id limit ${q.limit - page.length}`,
  );
  for (const row of unchained) {
    page.push({
      ...decodeEvent(row),
      xactId: Number(row.xact_id),
      seq: null,
      prevHash: null,
      hash: null,
    });
  }
  return page;
}
