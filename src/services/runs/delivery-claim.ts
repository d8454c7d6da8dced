// A webhook delivery claimed by the run it starts (StartRunRequest.delivery), in the transaction
// that creates that run: "claimed" and "a run exists for it" are one fact. A delivery as it
// arrived is claimed once by its id and its body's digest (src/db/webhook-claims.ts); one
// retried with `runs retry` moves from its failed run to the new one by a compare-and-set on the
// old run id. Either is audited `webhook.accepted`. A delivery already taken refuses the start
// with DeliveryTakenError, which rolls the run back.
import { and, eq } from "drizzle-orm";
import { appendAuditEvent } from "../../db/audit.ts";
import type { DbTransaction } from "../../db/client.ts";
import { webhookDeliveries } from "../../db/schema.ts";
import { claimWebhookDelivery } from "../../db/webhook-claims.ts";
import type { DeliveryClaim } from "../../runs/types.ts";

/** The delivery belongs to another run: a duplicate, or a failed run already retried. */
export class DeliveryTakenError extends Error {
  /** The run that holds the delivery, when one does. */
  readonly runId: string | null;
  /** Why: the same delivery id, the same body, or a retry another retry or redelivery beat. */
  readonly reason: "delivery-id" | "body-hash" | "retried";
  constructor(runId: string | null, reason: DeliveryTakenError["reason"]) {
    super(
      reason === "retried" ? "the delivery was already retried" : "the delivery was seen before",
    );
    this.runId = runId;
    this.reason = reason;
  }
}

/** Claims `claim` for `runId` in `tx`; resolves to the run it was a retry of, if any. */
export async function claimDelivery(
  tx: DbTransaction,
  claim: DeliveryClaim,
  run: { runId: string; callerId: string },
): Promise<{ retryOf?: string }> {
  if (claim.kind === "retry") {
    const moved = await tx
      .update(webhookDeliveries)
      .set({ runId: run.runId })
      .where(
        and(
          eq(webhookDeliveries.callerId, run.callerId),
          eq(webhookDeliveries.runId, claim.retryOf),
        ),
      )
      .returning({ id: webhookDeliveries.id, deliveryId: webhookDeliveries.deliveryId });
    if (moved.length === 0) throw new DeliveryTakenError(null, "retried");
    await appendAuditEvent(tx, {
      actor: "admin",
      kind: "webhook.accepted",
      subject: `run:${run.runId}`,
      data: {
        caller: claim.callerName,
        retryOf: claim.retryOf,
        via: "runs retry",
        ...(moved[0]?.deliveryId ? { deliveryId: moved[0].deliveryId.slice(0, 100) } : {}),
      },
    });
    return { retryOf: claim.retryOf };
  }
  const claimed = await claimWebhookDelivery(tx, {
    callerId: run.callerId,
    deliveryId: claim.deliveryId,
    bodySha256: claim.bodySha256,
    bodyWindowMs: claim.bodyWindowMs,
  });
  if (!claimed.claimed) throw new DeliveryTakenError(claimed.duplicateOf.runId, claimed.reason);
  await tx
    .update(webhookDeliveries)
    .set({ runId: run.runId })
    .where(eq(webhookDeliveries.id, claimed.id));
  await appendAuditEvent(tx, {
    actor: `caller:${claim.callerName}`,
    kind: "webhook.accepted",
    subject: `run:${run.runId}`,
    data: {
      caller: claim.callerName,
      ...(claim.deliveryId ? { deliveryId: claim.deliveryId.slice(0, 100) } : {}),
      ...(claim.event ? { event: claim.event } : {}),
      bodySha256: claim.bodySha256,
      bytes: claim.bytes,
      ...(claimed.retryOf ? { retryOf: claimed.retryOf } : {}),
    },
  });
  return claimed.retryOf ? { retryOf: claimed.retryOf } : {};
}
