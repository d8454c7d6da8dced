// Revocation is total and immediate (DESIGN §6): tier → none, every credential dead, parked runs
// rejected, and one NOTIFY at commit that makes every instance drop what it cached for the caller
// and stop the caller's runs in flight. All of it commits with its audit event, or none of it.
import { and, eq, isNull, sql } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { callers, credentials, runs } from "../db/schema.ts";
import { changeCaller } from "./caller-events.ts";
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
    const rejected = await tx
      .update(runs)
      .set({
        status: "rejected",
        error: {
          code: "caller-revoked",
          message: "the caller was revoked while this run was parked",
        },
        pendingApproval: null,
        finishedAt: now,
        updatedAt: now,
      })
      .where(and(eq(runs.callerId, current.id), eq(runs.status, "parked")))
      .returning({ id: runs.id });
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
        parkedRunsRejected: rejected.map((r) => r.id),
        ...(note ? { reason: note } : {}),
      },
    });
    await announce({
      callerId: current.id,
      name,
      version: updated.version,
      change: "revoked",
    });
    return {
      caller: describeCaller(updated, await listCredentialRows(tx, current.id), now),
      credentialsRevoked: killed.length,
      parkedRunsRejected: rejected.length,
    };
  });
}
