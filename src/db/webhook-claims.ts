// A webhook delivery starts at most one run that did not fail. GitHub names each delivery
// (X-GitHub-Delivery, the same on a redelivery), other senders may send an Idempotency-Key: the
// unique (caller_id, delivery_id) constraint claims it once. A sender may also ask that the same
// body within a window count as a duplicate (GitHub's bodies are unique, so a repeated one is a
// replay); that check-then-insert runs under a transaction advisory lock on (caller, body hash)
// so two instances receiving the same body at once cannot both claim it. Times are the
// database's.
//
// A delivery whose run failed (or was interrupted by a crash) is claimed again by the same
// delivery, named by its id: GitHub's "Redeliver" is how an operator retries it. The claim row moves to the new run
// with a compare-and-set on the old run id, so two redeliveries at once start one run.
import { and, desc, eq, gt, is, sql } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import type { RunStatus } from "../domain/run.ts";
import type { DbOrTx, DbTransaction } from "./client.ts";
import { webhookClaimLockSpace } from "./locks.ts";
import { runs, webhookDeliveries } from "./schema.ts";

/** A delivery whose run ended so starts a new run when delivered again. */
export const retryableRunStatuses: readonly RunStatus[] = ["failed", "interrupted"];

export type WebhookClaimInput = {
  callerId: string;
  /** X-GitHub-Delivery; absent for senders that have none (IFTTT). */
  deliveryId?: string | undefined;
  /** Hex SHA-256 of the raw body. */
  bodySha256: string;
  /** Also refuse the same body from the same caller received within this many ms. */
  bodyWindowMs?: number | undefined;
};

export type WebhookClaim =
  /** `retryOf`: the failed run this delivery started before, when it is claimed again. */
  | { claimed: true; id: string; retryOf?: string }
  | {
      claimed: false;
      reason: "delivery-id" | "body-hash";
      duplicateOf: { id: string; runId: string | null; receivedAt: Date };
    };

const duplicateColumns = {
  id: webhookDeliveries.id,
  runId: webhookDeliveries.runId,
  receivedAt: webhookDeliveries.receivedAt,
  deliveryId: webhookDeliveries.deliveryId,
};

type Earlier = { id: string; runId: string | null; receivedAt: Date; deliveryId: string | null };

/**
 * The earlier claim of the same delivery, taken over when its run failed: the row is cleared of
 * its run only while it still names that run (the caller then sets the new run's id).
 */
async function retryFailed(
  tx: DbTransaction,
  earlier: Earlier,
  deliveryId: string | null,
): Promise<WebhookClaim | undefined> {
  // Only a named delivery is retried: a body without an id repeated is a replay, not a redelivery.
  if (earlier.runId === null || deliveryId === null || earlier.deliveryId !== deliveryId) {
    return undefined;
  }
  const [run] = await tx
    .select({ status: runs.status })
    .from(runs)
    .where(eq(runs.id, earlier.runId))
    .limit(1);
  if (!run || !retryableRunStatuses.includes(run.status)) return undefined;
  const [taken] = await tx
    .update(webhookDeliveries)
    .set({ runId: null })
    .where(and(eq(webhookDeliveries.id, earlier.id), eq(webhookDeliveries.runId, earlier.runId)))
    .returning({ id: webhookDeliveries.id });
  return taken ? { claimed: true, id: taken.id, retryOf: earlier.runId } : undefined;
}

async function claimInTransaction(
  tx: DbTransaction,
  input: WebhookClaimInput,
): Promise<WebhookClaim> {
  const deliveryId = input.deliveryId ?? null;
  if (input.bodyWindowMs !== undefined && input.bodyWindowMs > 0) {
    await tx.execute(
      sql`select pg_advisory_xact_lock(${webhookClaimLockSpace}, hashtext(${`${input.callerId}:${input.bodySha256}`}))`,
    );
    const [recent] = await tx
      .select(duplicateColumns)
      .from(webhookDeliveries)
      .where(
        and(
          eq(webhookDeliveries.callerId, input.callerId),
          eq(webhookDeliveries.bodySha256, input.bodySha256),
          gt(
            webhookDeliveries.receivedAt,
            sql`now() - (${input.bodyWindowMs}::double precision * interval '1 millisecond')`,
          ),
        ),
      )
      .orderBy(desc(webhookDeliveries.receivedAt))
      .limit(1);
    if (recent) {
      return (
        (await retryFailed(tx, recent, deliveryId)) ?? {
          claimed: false,
          reason: "body-hash",
          duplicateOf: recent,
        }
      );
    }
  }
  const [inserted] = await tx
    .insert(webhookDeliveries)
    .values({ callerId: input.callerId, deliveryId, bodySha256: input.bodySha256 })
    .onConflictDoNothing({ target: [webhookDeliveries.callerId, webhookDeliveries.deliveryId] })
    .returning({ id: webhookDeliveries.id });
  if (inserted) return { claimed: true, id: inserted.id };
  const [existing] = await tx
    .select(duplicateColumns)
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.callerId, input.callerId),
        eq(webhookDeliveries.deliveryId, deliveryId ?? ""),
      ),
    )
    .limit(1);
  if (!existing) throw new Error("webhook delivery conflicted but no earlier claim was found");
  return (
    (await retryFailed(tx, existing, deliveryId)) ?? {
      claimed: false,
      reason: "delivery-id",
      duplicateOf: existing,
    }
  );
}

/**
 * Claims a webhook delivery, or reports the earlier claim it duplicates. Run it in the
 * transaction that starts the run, and set `run_id` on the claimed row there: a rollback then
 * releases the claim, so a delivery that started nothing can be retried.
 */
export async function claimWebhookDelivery(
  tx: DbOrTx,
  input: WebhookClaimInput,
): Promise<WebhookClaim> {
  if (is(tx, PgTransaction)) return claimInTransaction(tx as DbTransaction, input);
  return tx.transaction((inner) => claimInTransaction(inner, input));
}
