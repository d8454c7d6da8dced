// Revocation is total and immediate (DESIGN §6): tier → none, every credential dead, every run of
// the caller ended `revoked`, and a NOTIFY at commit that makes every instance drop what it cached
// for the caller, stop the caller's runs in flight at once and tell the surfaces which waiting runs
// ended (the event names them). All of it commits with its audit events, or none of it.
//
// The stop of a working run is recorded on its row, as a cancel is (src/runs/run-state.ts): the
// instance executing it reads that at its next heartbeat and between steps, so a notification lost
// on the way delays the stop by one heartbeat at most, mid-tool-call included. Working runs are
// marked before the waiting ones are locked: a run parking meanwhile either waits for the mark and
// closes itself on it, or has parked by the time the waiting runs are read and is closed here.
import { and, eq, isNull, sql } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { callers, credentials } from "../db/schema.ts";
import {
  closeParkedRuns,
  lockParkedRunsOfCaller,
  recordRevocationStops,
  revokedStopReason,
} from "../runs/run-state.ts";
import type { CallerWrite } from "./add-caller.ts";
import { changeCaller, chunkRunIds } from "./caller-events.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { findCallerRow, listCredentialRows } from "./find-caller.ts";

export type RevokedCaller = {
  caller: CallerView;
  credentialsRevoked: number;
  /** Runs waiting (parked or input-required) that the revocation ended `revoked`. */
  waitingRunsRevoked: number;
  /** Working runs the revocation recorded a stop on: they end `revoked` within one heartbeat. */
  workingRunsStopped: number;
  /** @deprecated The same number as `waitingRunsRevoked` (its name before runs ended `revoked`). */
  parkedRunsRejected: number;
};

export async function revokeCaller({
  services,
  name,
  reason,
  actor,
}: {
  services: ServiceContext;
  name: string;
  reason?: string | undefined;
  actor: Actor;
}): Promise<RevokedCaller> {
  return changeCaller(services, (tx, announce) =>
    revokeCallerIn(services, { tx, announce }, name, reason, actor),
  );
}

/** Revokes a caller inside `write`'s transaction (also `callers apply --prune`). */
export async function revokeCallerIn(
  services: ServiceContext,
  { tx, announce }: Pick<CallerWrite, "tx" | "announce">,
  name: string,
  reason: string | undefined,
  actor: Actor,
): Promise<RevokedCaller> {
  const note = reason?.slice(0, 500);

  const current = await findCallerRow(tx, name);
  const now = services.now();
  const [updated] = await tx
    .update(callers)
    .set({
      tier: "none",
      revokedAt: current.revokedAt ?? now,
      version: sql`${callers.version} + 1`,
      updatedAt: now,
    })
    .where(eq(callers.id, current.id))
    .returning();
  if (!updated) throw new Error("caller vanished during revocation");
  const killed = await tx
    .update(credentials)
    .set({ revokedAt: now })
    .where(and(eq(credentials.callerId, current.id), isNull(credentials.revokedAt)))
    .returning({ id: credentials.id, prefix: credentials.prefix });
  const stopped = await recordRevocationStops(tx, { callerId: current.id, at: now });
  const closed = await closeParkedRuns(tx, {
    runs: await lockParkedRunsOfCaller(tx, current.id),
    status: "revoked",
    error: { code: "caller-revoked", message: revokedStopReason },
    actor,
    at: now,
  });
  await appendAuditEvent(tx, {
    actor,
    kind: "caller.revoked",
    subject: `caller:${current.id}`,
    data: {
      name,
      version: updated.version,
      previousTier: current.tier,
      alreadyRevoked: current.revokedAt !== null,
      credentialsRevoked: killed.map((c) => ({ id: c.id, prefix: c.prefix })),
      waitingRunsRevoked: closed,
      workingRunsStopped: stopped,
      ...(note ? { reason: note } : {}),
    },
  });
  // A notification holds under 8000 bytes: many closed runs are announced in several events.
  for (const closedRunIds of chunkRunIds(closed)) {
    await announce({
      callerId: current.id,
      name,
      version: updated.version,
      change: "revoked",
      closedRunIds,
    });
  }
  return {
    caller: describeCaller(updated, await listCredentialRows(tx, current.id), now),
    credentialsRevoked: killed.length,
    waitingRunsRevoked: closed.length,
    workingRunsStopped: stopped.length,
    parkedRunsRejected: closed.length,
  };
}
