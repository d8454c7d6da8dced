// Pruning a prefix of the audit chain without making `audit verify` meaningless.
//
// Before links 1..S and their events are deleted, a checkpoint is written: S, the hash of link S
// (the head of the pruned prefix: every pruned event is folded into it), how many events the
// prefix held, when, and an Ed25519 signature over those four by a key derived from the server's
// secret key (src/auth/audit-checkpoint-key.ts). The retained suffix then starts at link S+1,
// whose prev_hash must be the checkpoint's hash, and `verifyAuditChain` (src/db/audit.ts) walks it
// from there. What a checkpoint adds: the pruned events can no longer be shown, but nobody
// without the secret key can cut more of the chain (the delete triggers of migration 0013 let
// through only rows at or below a checkpoint, and a forged checkpoint fails its signature), nor
// rewrite the retained events (they still chain to the signed hash).
//
// The chain's head is never pruned: the chainer links the next event to it. Deletes go in
// batches of short transactions, lowest seq first; one that stops half-way leaves links up to
// the checkpoint, which verify walks and finds agreeing with the checkpoint's hash.
import { sql } from "drizzle-orm";
import { type Db, type DbOrTx, selectRows } from "./client.ts";
import { auditChain, auditCheckpoints, auditEvents } from "./schema.ts";

/** The signing key, as db/ sees it (src/auth/audit-checkpoint-key.ts makes one). */
export type CheckpointKey = {
  readonly keyId: string;
  sign(text: string): string;
  verify(text: string, signature: string): boolean;
};

export type AuditCheckpoint = {
  seq: number;
  hash: string;
  count: number;
  createdAt: Date;
  keyId: string;
  signature: string;
};

/** The exact text a checkpoint's signature covers. */
export function checkpointText(c: Pick<AuditCheckpoint, "seq" | "hash" | "count" | "createdAt">) {
  return [
    "peergate audit checkpoint v1",
    `seq=${c.seq}`,
    `hash=${c.hash}`,
    `count=${c.count}`,
    `createdAt=${c.createdAt.toISOString()}`,
  ].join("\n");
}

/** Every checkpoint, lowest seq first (one per prune that cut the chain: few rows). */
export async function readAuditCheckpoints(db: DbOrTx): Promise<AuditCheckpoint[]> {
  const rows = await selectRows<{
    seq: unknown;
    hash: string;
    count: unknown;
    created_at: unknown;
    key_id: string;
    signature: string;
  }>(
    db,
    sql`select seq, hash, count, created_at, key_id, signature
          from ${auditCheckpoints} order by seq`,
  );
  return rows.map((r) => ({
    seq: Number(r.seq),
    hash: r.hash,
    count: Number(r.count),
    createdAt: r.created_at instanceof Date ? r.created_at : new Date(String(r.created_at)),
    keyId: r.key_id,
    signature: r.signature,
  }));
}

/** The first and last link stored, or undefined while the chain is empty. */
export async function readChainBounds(
  db: DbOrTx,
): Promise<{ first: number; last: number } | undefined> {
  const [row] = await selectRows<{ first: unknown; last: unknown }>(
    db,
    sql`select (select seq from ${auditChain} order by seq limit 1) as first,
               (select seq from ${auditChain} order by seq desc limit 1) as last`,
  );
  if (!row || row.first === null || row.last === null) return undefined;
  return { first: Number(row.first), last: Number(row.last) };
}

export type AuditPrunePlan = {
  /** The first link still stored. */
  firstSeq: number;
  /** The last link to prune: every event up to it was written before the cutoff. */
  throughSeq: number;
  /** Links the prune deletes. */
  rows: number;
};

/**
 * What pruning events written before `cutoff` would delete: the longest prefix of the chain whose
 * every event is older than the cutoff, never the head. Reads that prefix (plus one batch) by
 * seq, so its cost grows with what is pruned, not with the chain.
 */
export async function planAuditPrune(
  db: DbOrTx,
  cutoff: Date,
  scanBatch = 10_000,
): Promise<AuditPrunePlan | undefined> {
  const bounds = await readChainBounds(db);
  if (!bounds) return undefined;
  const limit = bounds.last - 1;
  let through = bounds.first - 1;
  while (through < limit) {
    const rows = await selectRows<{ seq: unknown; old: boolean }>(
      db,
      sql`select c.seq, coalesce(e.created_at < ${cutoff.toISOString()}::timestamptz, false) as old
            from ${auditChain} c left join ${auditEvents} e on e.id = c.event_id
           where c.seq > ${through}::bigint and c.seq <= ${limit}::bigint
           order by c.seq limit ${scanBatch}`,
    );
    let stopped = false;
    for (const row of rows) {
      if (!row.old) {
        stopped = true;
        break;
      }
      through = Number(row.seq);
    }
    if (stopped || rows.length < scanBatch) break;
  }
  const rows = through - bounds.first + 1;
  return rows > 0 ? { firstSeq: bounds.first, throughSeq: through, rows } : undefined;
}

/**
 * Writes the checkpoint for links 1..`throughSeq` (nothing when one at or above it exists
 * already: a prune that stopped half-way is finished under its own checkpoint).
 */
export async function writeAuditCheckpoint(
  db: DbOrTx,
  key: CheckpointKey,
  throughSeq: number,
  now: Date,
): Promise<AuditCheckpoint | undefined> {
  const [covered] = await selectRows<{ seq: unknown }>(
    db,
    sql`select seq from ${auditCheckpoints} where seq >= ${throughSeq}::bigint limit 1`,
  );
  if (covered) return undefined;
  const [link] = await selectRows<{ hash: string }>(
    db,
    sql`select hash from ${auditChain} where seq = ${throughSeq}::bigint`,
  );
  if (!link) throw new Error(`audit link ${throughSeq} is not stored: cannot checkpoint it`);
  const unsigned = { seq: throughSeq, hash: link.hash, count: throughSeq, createdAt: now };
  const checkpoint: AuditCheckpoint = {
    ...unsigned,
    keyId: key.keyId,
    signature: key.sign(checkpointText(unsigned)),
  };
  await db.execute(
    sql`insert into ${auditCheckpoints} (seq, hash, count, created_at, key_id, signature)
        values (${checkpoint.seq}, ${checkpoint.hash}, ${checkpoint.count},
                ${now.toISOString()}::timestamptz, ${checkpoint.keyId}, ${checkpoint.signature})
        on conflict (seq) do nothing`,
  );
  return checkpoint;
}

/**
 * Deletes up to `batchSize` of the lowest links at or below `throughSeq` and their events, in one
 * short transaction. Returns how many links went (0: done). The delete triggers let through only
 * what a checkpoint covers.
 */
export async function deleteAuditPrefixBatch(
  db: Db,
  throughSeq: number,
  batchSize: number,
): Promise<number> {
  return db.transaction(async (tx) => {
    const lowest = sql`select seq, event_id from ${auditChain}
       where seq <= ${throughSeq}::bigint order by seq limit ${batchSize}`;
    // Events first, while their links still show the trigger that a checkpoint covers them.
    await tx.execute(
      sql`delete from ${auditEvents} where id in (select event_id from (${lowest}) l)`,
    );
    const gone = await selectRows<{ seq: unknown }>(
      tx,
      sql`delete from ${auditChain} where seq in (select seq from (${lowest}) l) returning seq`,
    );
    return gone.length;
  });
}
