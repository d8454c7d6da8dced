// `peergate prune` and the server's scheduled prune: deletes the rows of each table family older
// than its retention (src/db/retention.ts says what each row guards and so what is never
// deleted), and, when the audit family has a retention, the chain's expired prefix under a signed
// checkpoint (src/db/audit-prune.ts). A dry run (the default) counts and changes nothing.
//
// One prune at a time, cluster-wide: a session advisory lock on a connection of its own, held
// for the whole prune; a second one is refused (409) rather than queued. Deletes go in batches
// of `batchSize` rows, each its own short statement, so no live table waits behind a prune.
// Pruning cannot share one transaction with its audit event (that transaction would hold every
// deleted row's lock to the end): `retention.pruned` is written once the deletes are done, with
// what each family lost and the checkpoint, whenever anything was deleted.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { type CheckpointSigner, deriveCheckpointSigner } from "../auth/audit-checkpoint-key.ts";
import { parseSecretKey, type SecretKey } from "../auth/sealed-secrets.ts";
import { defaultRetentionDays } from "../config.ts";
import { appendAuditEvent } from "../db/audit.ts";
import { deleteAuditPrefixBatch, planAuditPrune, writeAuditCheckpoint } from "../db/audit-prune.ts";
import { selectRows, withDedicatedConnection } from "../db/client.ts";
import { advisoryLockSpace, lockKeys } from "../db/locks.ts";
import {
  countPrunable,
  deletePrunableBatch,
  type PrunableFamily,
  type PruneWindow,
} from "../db/retention.ts";
import type {
  FamilyPrune,
  PruneReport,
  RetentionFamily,
  RetentionSettings,
} from "../domain/retention.ts";
import { ConflictError, ForbiddenError } from "../errors.ts";
import { githubDuplicateWindowMs } from "./accept-webhook.ts";
import { type OperatorProof, verifyOperatorToken } from "./admin-credentials.ts";
import { parseInput } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { operatorTokenHeader } from "./widening.ts";

export const pruneInputSchema = z.strictObject({
  apply: z
    .boolean()
    .default(false)
    .describe("delete (needs the operator token); false: only count what would go"),
});

export const defaultRetentionSettings: RetentionSettings = {
  days: defaultRetentionDays,
  intervalMs: 3_600_000,
  batchSize: 1_000,
};

/** Families in the order they are pruned: the audit trail last, after what it records. */
const pruneOrder: readonly RetentionFamily[] = [
  "jti-claims",
  "webhook-claims",
  "push-deliveries",
  "tasks",
  "runs",
  "audit",
];

const dayMs = 86_400_000;

const signers = new WeakMap<SecretKey, Promise<CheckpointSigner>>();

/**
 * The key that checks audit checkpoints for a secret key given as text (PEERGATE_SECRET_KEY or the
 * data directory's file), for a verify outside the server; undefined when there is none.
 */
export async function checkpointKeyFromSecret(
  text: string | undefined,
): Promise<CheckpointSigner | undefined> {
  const key = text === undefined ? undefined : parseSecretKey(text);
  return key ? deriveCheckpointSigner(key.bytes) : undefined;
}

/** The key that signs (and checks) audit checkpoints, derived once per secret key. */
export function checkpointSigner(services: Pick<ServiceContext, "secretKey">) {
  let signer = signers.get(services.secretKey);
  if (!signer) {
    signer = deriveCheckpointSigner(services.secretKey.bytes);
    signers.set(services.secretKey, signer);
  }
  return signer;
}

/** The admin verb: a dry run with the admin token, `apply` with the operator token as well. */
export async function pruneTables({
  services,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  input: unknown;
  actor: Actor;
  operator: OperatorProof | undefined;
}): Promise<PruneReport> {
  const { apply } = parseInput(pruneInputSchema, input ?? {});
  if (apply) {
    if (!operator?.token) {
      throw new ForbiddenError(
        `deleting rows needs the operator token as well as the admin token (what is pruned cannot be brought back): send it in the ${operatorTokenHeader} header, or run without apply for a dry run`,
        { code: "operator-token-required" },
      );
    }
    await verifyOperatorToken(services, operator.token, operator.failure);
  }
  return prune(services, { apply, actor });
}

/** Prunes (or counts, unless `apply`) every family with a retention. */
export async function prune(
  services: ServiceContext,
  options: { apply: boolean; actor: Actor; signal?: AbortSignal },
): Promise<PruneReport> {
  const settings = services.retention ?? defaultRetentionSettings;
  if (!options.apply) return pruneFamilies(services, settings, false);
  const report = await withPruneLock(services, () =>
    pruneFamilies(services, settings, true, options.signal),
  );
  const deleted = report.families.filter((f) => f.rows > 0);
  if (deleted.length > 0) {
    await appendAuditEvent(services.db, {
      actor: options.actor,
      kind: "retention.pruned",
      data: {
        families: Object.fromEntries(deleted.map((f) => [f.family, f.rows])),
        cutoffs: Object.fromEntries(deleted.map((f) => [f.family, f.cutoff])),
        checkpoint: report.checkpoint,
        durationMs: report.durationMs,
      },
    });
  }
  return report;
}

/** In this process, and on PGlite's single session (where advisory locks are re-entrant). */
const pruning = new WeakSet<object>();

async function withPruneLock<T>(services: ServiceContext, work: () => Promise<T>): Promise<T> {
  const busy = () =>
    new ConflictError("another prune is running (on this or another instance): try again later");
  if (pruning.has(services.database)) throw busy();
  pruning.add(services.database);
  try {
    return await withDedicatedConnection(services.database, async (db) => {
      const [lock] = await selectRows<{ locked: boolean }>(
        db,
        // The session lock on the dedicated connection; the deletes go through the pool.
        sql`select pg_try_advisory_lock(${advisoryLockSpace}, ${lockKeys.prune}) as locked`,
      );
      if (!lock?.locked) throw busy();
      try {
        return await work();
      } finally {
        await db
          .execute(sql`select pg_advisory_unlock(${advisoryLockSpace}, ${lockKeys.prune})`)
          .catch(() => {});
      }
    });
  } finally {
    pruning.delete(services.database);
  }
}

async function pruneFamilies(
  services: ServiceContext,
  settings: RetentionSettings,
  apply: boolean,
  signal?: AbortSignal,
): Promise<PruneReport> {
  const started = performance.now();
  const now = services.now();
  const families: FamilyPrune[] = [];
  let checkpoint: PruneReport["checkpoint"] = null;
  for (const family of pruneOrder) {
    const days = settings.days[family];
    if (days === null) {
      families.push({ family, days, rows: 0, cutoff: null });
      continue;
    }
    const cutoff = new Date(now.getTime() - days * dayMs);
    if (family === "audit") {
      const result = await pruneAudit(services, cutoff, settings.batchSize, apply, signal);
      checkpoint = result.checkpoint;
      families.push({ family, days, rows: result.rows, cutoff: cutoff.toISOString() });
      continue;
    }
    const window: PruneWindow = { cutoff, githubReplayWindowMs: githubDuplicateWindowMs };
    const rows = apply
      ? await deleteAll(services, family, window, settings.batchSize, signal)
      : await countPrunable(services.db, family, window);
    families.push({ family, days, rows, cutoff: cutoff.toISOString() });
  }
  return {
    applied: apply,
    families,
    checkpoint,
    durationMs: Math.round(performance.now() - started),
  };
}

async function deleteAll(
  services: ServiceContext,
  family: PrunableFamily,
  window: PruneWindow,
  batchSize: number,
  signal: AbortSignal | undefined,
): Promise<number> {
  let total = 0;
  // Between batches, a stopping server stops the prune; the next one carries on.
  while (!signal?.aborted) {
    const n = await deletePrunableBatch(services.db, family, window, batchSize);
    total += n;
    if (n < batchSize) break;
  }
  return total;
}

async function pruneAudit(
  services: ServiceContext,
  cutoff: Date,
  batchSize: number,
  apply: boolean,
  signal: AbortSignal | undefined,
): Promise<{ rows: number; checkpoint: PruneReport["checkpoint"] }> {
  const plan = await planAuditPrune(services.db, cutoff);
  if (!plan) return { rows: 0, checkpoint: null };
  if (!apply) return { rows: plan.rows, checkpoint: null };
  // The checkpoint commits before the first delete: a prune that stops after it leaves links the
  // checkpoint covers, which the next prune deletes and verify walks meanwhile.
  const written = await writeAuditCheckpoint(
    services.db,
    await checkpointSigner(services),
    plan.throughSeq,
    services.now(),
  );
  let rows = 0;
  while (!signal?.aborted) {
    const n = await deleteAuditPrefixBatch(services.db, plan.throughSeq, batchSize);
    rows += n;
    if (n < batchSize) break;
  }
  return { rows, checkpoint: written ? { seq: written.seq, hash: written.hash } : null };
}
