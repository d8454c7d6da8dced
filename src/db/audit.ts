// The audit trail: append-only and hash-chained. Each chained event stores the hash of the one
// before it and its own hash = SHA-256(prev_hash + canonical JSON of its content), so editing,
// deleting or reordering a chained event breaks the chain at that event, and `verifyAuditChain`
// names it.
//
// Writing is an outbox. Callers append inside the same transaction as the change the event
// records: one INSERT, no lock, no read, so the change and its event commit together or not at
// all (an event exists iff its transaction committed). The event is stored unchained (seq,
// prev_hash and hash null). `chainAuditEvents` then gives committed events their seq and hashes
// in batches, one pass at a time cluster-wide (a transaction-scoped advisory lock), in a fixed
// order: by the inserting transaction's id, then insertion id. It only takes events whose
// transaction id is below the oldest transaction still running (`pg_snapshot_xmin`): every such
// transaction has ended, so no event can later appear in front of what is already chained — a
// slow transaction holds the chain back rather than being overtaken, and nothing is skipped,
// chained twice or left as a gap. src/db/audit-chainer.ts runs the passes on every instance.
//
// NEVER put a secret in an event: no tokens, webhook secrets, passwords, Authorization headers or
// raw signatures. Record a credential's id, display prefix or SHA-256 instead.
//
// What the chain cannot show by itself: someone with write access who recomputes every later
// hash, or who drops events from the very end — nor anything done to the unchained tail before it
// is chained (the append-only trigger still refuses it; verify reports how long the tail is).
// Keep `lastHash` from a verify somewhere else (a log, a ticket) to anchor it.
import { createHash } from "node:crypto";
import { and, asc, gt, is, isNull, lt, type SQL, sql } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import type { AuditActor, AuditKind } from "../domain/audit.ts";
import { type Db, type DbOrTx, selectRows } from "./client.ts";
import { advisoryLockSpace, lockKeys } from "./locks.ts";
import { type AuditEvent, auditEvents } from "./schema.ts";
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

export type AuditChainProblem = "genesis" | "gap" | "prev-hash" | "content";

/** Committed events not chained yet: how many, and how long the oldest has waited. */
export type UnchainedAuditTail = { count: number; oldestAgeMs: number | null };

export type AuditChainVerification =
  | { ok: true; count: number; lastHash: string; unchained: UnchainedAuditTail }
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

/** JSON with object keys sorted at every depth, so equal values always give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`cannot encode ${typeof value} as JSON`);
    return text;
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

/** The hash an event must carry, given the hash of the event before it. */
export function computeAuditHash(prevHash: string, content: HashedContent): string {
  const text = canonicalJson({
    v: contentVersion,
    seq: content.seq,
    createdAt: content.createdAt.toISOString(),
    actor: content.actor,
    kind: content.kind,
    subject: content.subject,
    data: content.data,
  });
  return createHash("sha256").update(prevHash).update(text).digest("hex");
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
  // The chainer hashes what jsonb gives back; storing only JSON (no undefined, functions, Dates)
  // keeps that equal to what was meant. created_at and xact_id are the database's defaults.
  const [row] = await tx
    .insert(auditEvents)
    .values({
      actor: storableText(event.actor),
      kind: storableText(event.kind),
      subject: event.subject == null ? null : storableText(event.subject),
      data: storableJson(JSON.parse(JSON.stringify(event.data))),
    })
    .returning({ id: auditEvents.id });
  if (!row) throw new Error("audit insert returned no row");
  return row;
}

/**
 * The same event as `appendAuditEvent`, as an INSERT to embed in a bigger statement (a CTE): one
 * event per row of `source` (a CTE name), so it is written exactly when the change that `source`
 * returns was made — in that statement, so in its transaction.
 *
 * @example
 * sql`with done as (${update}), ${auditInsertFrom(sql`done`, event)} select count(*) from done`
 */
export function auditInsertFrom(source: SQL, event: AuditEventInput): SQL {
  const data = JSON.stringify(storableJson(JSON.parse(JSON.stringify(event.data))));
  return sql`insert into ${auditEvents} (actor, kind, subject, data)
    select ${storableText(event.actor)}::text, ${storableText(event.kind)}::text,
      ${event.subject == null ? null : storableText(event.subject)}::text, ${data}::text::jsonb
    from ${source}`;
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
    const [head] = await tx
      .select({ seq: auditEvents.seq, hash: auditEvents.hash })
      .from(auditEvents)
      .where(sql`${auditEvents.seq} is not null`)
      .orderBy(sql`${auditEvents.seq} desc`)
      .limit(1);
    // One statement, so the snapshot whose xmin bounds the batch is the one that reads it: every
    // transaction below xmin has ended, so every event it committed is visible here.
    const rows = await tx
      .select({
        id: auditEvents.id,
        createdAt: auditEvents.createdAt,
        actor: auditEvents.actor,
        kind: auditEvents.kind,
        subject: auditEvents.subject,
        data: auditEvents.data,
      })
      .from(auditEvents)
      .where(
        and(
          isNull(auditEvents.seq),
          lt(auditEvents.xactId, sql`pg_snapshot_xmin(pg_current_snapshot())::text::bigint`),
        ),
      )
      .orderBy(asc(auditEvents.xactId), asc(auditEvents.id))
      .limit(batchSize);
    if (rows.length === 0) return 0;
    let seq = head?.seq ?? 0;
    let prevHash = head?.hash ?? genesisHash;
    const ids: number[] = [];
    const seqs: number[] = [];
    const prevHashes: string[] = [];
    const hashes: string[] = [];
    for (const row of rows) {
      seq += 1;
      const hash = computeAuditHash(prevHash, { ...row, seq });
      ids.push(row.id);
      seqs.push(seq);
      prevHashes.push(prevHash);
      hashes.push(hash);
      prevHash = hash;
    }
    // Hashes are hex and the numbers digits: a comma-joined text is one parameter on both drivers.
    const updated = await selectRows<{ id: unknown }>(
      tx,
      sql`update ${auditEvents} as a
             set seq = v.seq, prev_hash = v.prev_hash, hash = v.hash
            from unnest(string_to_array(${ids.join(",")}, ',')::bigint[],
                        string_to_array(${seqs.join(",")}, ',')::bigint[],
                        string_to_array(${prevHashes.join(",")}, ','),
                        string_to_array(${hashes.join(",")}, ','))
                 as v(id, seq, prev_hash, hash)
           where a.id = v.id and a.seq is null
       returning a.id`,
    );
    if (updated.length !== rows.length) {
      throw new Error(`chaining updated ${updated.length} of ${rows.length} audit events`);
    }
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

/** How many committed events are not chained yet, and the age of the oldest (database clock). */
export async function readUnchainedTail(db: DbOrTx): Promise<UnchainedAuditTail> {
  const [row] = await selectRows<{ count: unknown; oldestAgeMs: unknown }>(
    db,
    sql`select count(*)::int as count,
               (extract(epoch from clock_timestamp() - min(created_at)) * 1000)::float8
                 as "oldestAgeMs"
          from ${auditEvents} where seq is null`,
  );
  const count = Number(row?.count ?? 0);
  const age = row?.oldestAgeMs;
  return {
    count,
    oldestAgeMs: count === 0 || age === null || age === undefined ? null : Math.round(Number(age)),
  };
}

export type FlushResult = { chained: number; remaining: number };

const flushRetryMs = 5;

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
  const [target] = await db
    .select({ id: sql<unknown>`max(${auditEvents.id})` })
    .from(auditEvents)
    .where(isNull(auditEvents.seq));
  if (target?.id === null || target?.id === undefined) return { chained: 0, remaining: 0 };
  const lastId = Number(target.id);
  let chained = 0;
  for (;;) {
    // Not waiting on the lock: a pass elsewhere may be slow, or its instance dead (until
    // PostgreSQL notices and frees the lock); retrying keeps every statement short.
    chained += (await chainAuditEvents(db, { batchSize: options.batchSize })).chained;
    const [left] = await selectRows<{ n: unknown }>(
      db,
      sql`select count(*)::int as n from ${auditEvents} where seq is null and id <= ${lastId}`,
    );
    const remaining = Number(left?.n ?? 0);
    if (remaining === 0) return { chained, remaining };
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
}

/** A row the walk reached through `seq > …`: chained, so seq, prev_hash and hash are set. */
type ChainedAuditEvent = AuditEvent & { seq: number; prevHash: string; hash: string };

function checkEvent(
  row: ChainedAuditEvent,
  expectedSeq: number,
  prevHash: string,
): WalkResult | undefined {
  if (row.seq !== expectedSeq) {
    return {
      ok: false,
      seq: expectedSeq,
      reason: "gap",
      problem: `event ${expectedSeq} is missing (the next one stored is ${row.seq}): deleted?`,
    };
  }
  if (row.prevHash !== prevHash) {
    return {
      ok: false,
      seq: row.seq,
      reason: expectedSeq === 1 ? "genesis" : "prev-hash",
      problem:
        expectedSeq === 1
          ? "the first event does not start the chain (its prev_hash is not the genesis hash)"
          : `prev_hash does not match the hash of event ${expectedSeq - 1}: reordered, replaced or inserted?`,
    };
  }
  if (computeAuditHash(row.prevHash, row) !== row.hash) {
    return {
      ok: false,
      seq: row.seq,
      reason: "content",
      problem: "content does not match its hash: edited?",
    };
  }
  return undefined;
}

/**
 * Walks the whole chain in batches and reports the first broken link, or the event count and
 * the hash of the last event when it is intact; either way with the unchained tail.
 *
 * Given the database (not a transaction), it first chains what was committed before the call,
 * waiting up to `flushTimeoutMs` (default 2 s) for older open transactions; `flush: false`
 * only reads. Whatever is still unchained then is reported as `unchained`, never as a break.
 */
export async function verifyAuditChain(
  db: DbOrTx,
  options: { batchSize?: number; flush?: boolean; flushTimeoutMs?: number } = {},
): Promise<AuditChainVerification> {
  if ((options.flush ?? true) && !is(db, PgTransaction)) {
    await flushAuditChain(db as Db, {
      timeoutMs: options.flushTimeoutMs ?? 2_000,
      onTimeout: "return",
    });
  }
  const result = await walkChain(db, options.batchSize ?? 1_000);
  return { ...result, unchained: await readUnchainedTail(db) };
}

type WalkResult =
  | { ok: true; count: number; lastHash: string }
  | { ok: false; seq: number; reason: AuditChainProblem; problem: string };

async function walkChain(db: DbOrTx, batchSize: number): Promise<WalkResult> {
  let count = 0;
  let prevHash = genesisHash;
  let lastSeq = 0;
  for (;;) {
    const rows = await db
      .select()
      .from(auditEvents)
      .where(gt(auditEvents.seq, lastSeq))
      .orderBy(asc(auditEvents.seq))
      .limit(batchSize);
    for (const row of rows) {
      const broken = checkEvent(row as ChainedAuditEvent, lastSeq + 1, prevHash);
      if (broken) return broken;
      count += 1;
      lastSeq = row.seq as number;
      prevHash = row.hash as string;
    }
    if (rows.length < batchSize) return { ok: true, count, lastHash: prevHash };
  }
}
