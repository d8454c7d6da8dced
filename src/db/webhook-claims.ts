// A webhook delivery starts at most one run. GitHub names each delivery (X-GitHub-Delivery, the
// same on a redelivery): the unique (caller_id, delivery_id) constraint claims it once. IFTTT
// sends no id, so the same body from the same caller within a window counts as a duplicate; that
// check-then-insert runs under a transaction advisory lock on (caller, body hash) so two
// instances receiving the same body at once cannot both claim it. Times are the database's.
import { and, desc, eq, gt, is, sql } from "drizzle-orm";
import { PgTransaction } from "drizzle-orm/pg-core";
import type { DbOrTx, DbTransaction } from "./client.ts";
import { webhookClaimLockSpace } from "./locks.ts";
import { webhookDeliveries } from "./schema.ts";

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
  | { claimed: true; id: string }
  | {
      claimed: false;
      reason: "delivery-id" | "body-hash";
      duplicateOf: { id: string; runId: string | null; receivedAt: Date };
    };

const duplicateColumns = {
  id: webhookDeliveries.id,
  runId: webhookDeliveries.runId,
  receivedAt: webhookDeliveries.receivedAt,
};

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
    if (recent) return { claimed: false, reason: "body-hash", duplicateOf: recent };
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
  return { claimed: false, reason: "delivery-id", duplicateOf: existing };
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
