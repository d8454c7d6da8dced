// The audit trail: append-only and hash-chained. Each event stores the hash of the one before it
// and its own hash = SHA-256(prev_hash + canonical JSON of its content), so editing, deleting or
// reordering an event breaks the chain at that event, and `verifyAuditChain` names it.
//
// Callers append inside the same transaction as the change the event records: the change and its
// event commit together or not at all. Appending takes a transaction-scoped advisory lock, so
// appends from every instance are serialised and sequence numbers stay contiguous; append last in
// the transaction, since the lock is held until commit. Use READ COMMITTED (the default): the
// lock is only useful if the statement after it sees the latest committed event.
//
// NEVER put a secret in an event: no tokens, webhook secrets, passwords, Authorization headers or
// raw signatures. Record a credential's id, display prefix or SHA-256 instead.
//
// What the chain cannot show by itself: someone with write access who recomputes every later
// hash, or who drops events from the very end. Keep `lastHash` from a verify somewhere else
// (a log, a ticket) to anchor it.
import { createHash } from "node:crypto";
import { asc, gt, is, sql } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import type { AuditActor, AuditKind } from "../domain/audit.ts";
import { type DbOrTx, type DbTransaction, selectRows } from "./client.ts";
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

export type AppendedAuditEvent = { seq: number; hash: string };

export type AuditChainProblem = "genesis" | "gap" | "prev-hash" | "content";

export type AuditChainVerification =
  | { ok: true; count: number; lastHash: string }
  | { ok: false; seq: number; reason: AuditChainProblem; problem: string };

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

async function appendInTransaction(
  tx: DbTransaction,
  event: AuditEventInput,
): Promise<AppendedAuditEvent> {
  await tx.execute(sql`select pg_advisory_xact_lock(${advisoryLockSpace}, ${lockKeys.audit})`);
  // The database's clock, not this instance's: with several instances, time follows seq.
  const [head] = await selectRows<{ nowMs: number; seq: unknown; hash: string | null }>(
    tx,
    sql`select floor(extract(epoch from clock_timestamp()) * 1000)::float8 as "nowMs",
               last.seq, last.hash
          from (select 1) as one
          left join (select seq, hash from ${auditEvents} order by seq desc limit 1) as last on true`,
  );
  if (!head) throw new Error("audit head query returned no row");
  // What is hashed must be exactly what jsonb gives back: drop undefined, functions, Dates → text.
  const data = storableJson(JSON.parse(JSON.stringify(event.data)));
  const content: HashedContent = {
    seq: head.seq === null ? 1 : Number(head.seq) + 1,
    // timestamptz(3) keeps milliseconds, and so does a Date: it round-trips exactly.
    createdAt: new Date(Number(head.nowMs)),
    actor: storableText(event.actor),
    kind: storableText(event.kind),
    subject: event.subject == null ? null : storableText(event.subject),
    data,
  };
  const prevHash = head.hash ?? genesisHash;
  const hash = computeAuditHash(prevHash, content);
  await tx.insert(auditEvents).values({ ...content, prevHash, hash });
  return { seq: content.seq, hash };
}

/**
 * Appends one event to the chain. Pass the transaction that makes the change being recorded;
 * given the database itself, it opens a transaction of its own.
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
  if (is(tx, PgTransaction)) return appendInTransaction(tx as DbTransaction, event);
  return tx.transaction((inner) => appendInTransaction(inner, event));
}

function checkEvent(
  row: AuditEvent,
  expectedSeq: number,
  prevHash: string,
): AuditChainVerification | undefined {
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
 * the hash of the last event when it is intact.
 */
export async function verifyAuditChain(
  db: DbOrTx,
  options: { batchSize?: number } = {},
): Promise<AuditChainVerification> {
  const batchSize = options.batchSize ?? 1_000;
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
      const broken = checkEvent(row, lastSeq + 1, prevHash);
      if (broken) return broken;
      count += 1;
      lastSeq = row.seq;
      prevHash = row.hash;
    }
    if (rows.length < batchSize) return { ok: true, count, lastHash: prevHash };
  }
}
