// Revocation is total and immediate (DESIGN §6): tier → none, every credential dead, parked runs
// rejected, and a NOTIFY at commit that makes every instance drop what it cached for the caller,
// stop the caller's runs in flight and tell the surfaces which parked runs ended (the event names
// them). All of it commits with its audit events, or none of it.
import { and, eq, isNull, sql } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { callers, credentials } from "../db/schema.ts";
import { closeParkedRuns, lockParkedRunsOfCaller } from "../runs/run-state.ts";
import { changeCaller, chunkRunIds } from "./caller-events.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { findCallerRow, listCredentialRows } from "./find-caller.ts";

export async function revokeCaller({
  ctx,
  name,
  reason,
  actor,
}: {
  ctx: ServiceContext;
  name: string;
  reason?: string | undefined;
  actor: Actor;
}): Promise<{ caller: CallerView; credentialsRevoked: number; parkedRunsRejected: number }> {
  const note = reason?.slice(0, 500);
  return changeCaller(ctx, async (tx, announce) => {
    const current = await findCallerRow(tx, name);
    const now = ctx.now();
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
    const rejected = await closeParkedRuns(tx, {
      runs: await lockParkedRunsOfCaller(tx, current.id),
      status: "rejected",
      error: {
        code: "caller-revoked",
        message: "the caller was revoked while this run was parked",
      },
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
        parkedRunsRejected: rejected,
        ...(note ? { reason: note } : {}),
      },
    });
    // A notification holds under 8000 bytes: many closed runs are announced in several events.
    for (const closedRunIds of chunkRunIds(rejected)) {
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
      parkedRunsRejected: rejected.length,
    };
  });
}
