// `peergate runs retry <run-id>`: a webhook run that failed or was interrupted starts again, as
// GitHub's Redeliver of its delivery would (accept-webhook.ts): a new run of the same caller with
// the same prompt, the delivery's claim moved from the old run to the new one inside the
// transaction that creates it (a compare-and-set on the old run id, so two retries at once, or a
// retry racing a Redeliver, start one run), audited `webhook.accepted` with `retryOf` and the
// admin as actor. A run that succeeded, one still live, one stopped on purpose (canceled,
// rejected, expired, revoked) or an A2A run (its caller owns the conversation and sends its
// message again) is refused, naming why.
import { eq } from "drizzle-orm";
import { callers, runs } from "../db/schema.ts";
import { retryableRunStatuses } from "../db/webhook-claims.ts";
import { ConflictError, NotFoundError } from "../errors.ts";
import type { RunEngine } from "../runs/types.ts";
import type { ServiceContext } from "./context.ts";
import { DeliveryTakenError } from "./runs/delivery-claim.ts";

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const liveStatuses = new Set(["submitted", "working", "parked", "input-required"]);

/** Why a run in `status` cannot be retried, in the words the operator reads. */
function refusalFor(runId: string, status: string): string {
  if (status === "completed") return `run ${runId} completed: there is nothing to retry`;
  if (liveStatuses.has(status)) {
    return `run ${runId} is still ${status}: only a run that failed or was interrupted can be retried (cancel it first to stop it)`;
  }
  return `run ${runId} ended ${status}, which was decided on purpose: only a run that failed or was interrupted can be retried`;
}

export async function retryRun({
  services,
  engine,
  runId,
}: {
  services: ServiceContext;
  engine: RunEngine;
  runId: string;
}): Promise<{ runId: string; retryOf: string }> {
  if (!uuidPattern.test(runId)) throw new NotFoundError(`no run ${runId}`);
  const [run] = await services.db
    .select({
      id: runs.id,
      callerId: runs.callerId,
      origin: runs.origin,
      status: runs.status,
      messages: runs.messages,
    })
    .from(runs)
    .where(eq(runs.id, runId))
    .limit(1);
  if (!run) throw new NotFoundError(`no run ${runId}`);
  if (!retryableRunStatuses.includes(run.status)) {
    throw new ConflictError(refusalFor(runId, run.status));
  }
  if (run.origin !== "webhook") {
    throw new ConflictError(
      `run ${runId} answered an A2A message: its caller owns that conversation and retries by sending the message again`,
    );
  }
  const [caller] = await services.db
    .select()
    .from(callers)
    .where(eq(callers.id, run.callerId))
    .limit(1);
  if (!caller) throw new NotFoundError(`run ${runId} names no caller`);
  if (caller.revokedAt !== null) {
    throw new ConflictError(
      `caller ${caller.name} is revoked: restore it before retrying its runs`,
    );
  }
  // The fire's input: the prompt the webhook rendered, before any model turn.
  const input = [];
  for (const message of run.messages as { role?: unknown }[]) {
    if (message?.role !== "user") break;
    input.push(message);
  }
  if (input.length === 0) throw new ConflictError(`run ${runId} kept no prompt to start again`);

  try {
    const handle = await engine.start({
      caller,
      origin: "webhook",
      messages: input as never,
      delivery: { kind: "retry", callerName: caller.name, retryOf: runId },
    });
    return { runId: handle.runId, retryOf: runId };
  } catch (error) {
    if (error instanceof DeliveryTakenError) {
      throw new ConflictError(
        `run ${runId} was already retried (or redelivered): its delivery belongs to a newer run; see peergate runs list`,
      );
    }
    throw error;
  }
}
