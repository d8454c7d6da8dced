// Rotation: a new credential now; the old ones keep working for `graceSeconds` (default 0: they
// die at once), so a counterparty can switch over without downtime when the admin wants that.
// Rotation changes nothing the caller may do, but the new credential hands the caller's authority
// to whoever asked: for a caller above the floor it needs the operator token too (widening.ts),
// push grants included (read in the rotation's transaction, beside the caller row). A JWT peer has
// no static token to rotate: its key is changed with an update of `jwt`.
import { and, asc, eq, gt, isNull, or, sql } from "drizzle-orm";
import { z } from "zod";
import { appendAuditEvent } from "../db/audit.ts";
import { callerPushHosts, callers, credentials } from "../db/schema.ts";
import { ConflictError } from "../errors.ts";
import { type OperatorProof, withWideningCheck } from "./admin-credentials.ts";
import { changeCaller } from "./caller-events.ts";
import { parseInput } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { findCallerRow, listCredentialRows } from "./find-caller.ts";
import { type IssuedCredential, issueCredential } from "./issue-credential.ts";
import { describeWidening, floorCaller } from "./widening.ts";

export const rotateCredentialSchema = z.strictObject({
  graceSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(0),
});

export async function rotateCredential({
  services,
  name,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  name: string;
  input: unknown;
  actor: Actor;
  /** The operator token the request carried; needed for a caller above the floor. */
  operator?: OperatorProof | undefined;
}): Promise<{ caller: CallerView; credential: IssuedCredential; oldCredentialsExpireAt: string }> {
  const { graceSeconds } = parseInput(rotateCredentialSchema, input ?? {});
  return withWideningCheck(
    services,
    { proof: operator, actor, what: `a new credential for caller ${name}` },
    (authorize) =>
      changeCaller(services, async (tx, announce) => {
        const current = await findCallerRow(tx, name);
        if (current.revokedAt !== null) {
          throw new ConflictError(
            `caller ${name} is revoked; restore it to issue a new credential`,
          );
        }
        if (current.jwt) {
          throw new ConflictError(
            `caller ${name} authenticates with JWTs signed by its key and has no static token; change its key by updating its jwt settings (PATCH /admin/v1/callers/${name}, or peergate callers apply)`,
          );
        }
        const pushHosts = await tx
          .select({ entry: callerPushHosts.entry })
          .from(callerPushHosts)
          .where(eq(callerPushHosts.callerId, current.id))
          .orderBy(asc(callerPushHosts.entry));
        const widened = describeWidening(floorCaller, {
          ...current,
          pushHosts: pushHosts.map((h) => h.entry),
        });
        await authorize(tx, `caller:${current.id}`, widened);
        const now = services.now();
        const expiresAt = new Date(now.getTime() + graceSeconds * 1000);
        const old = await tx
          .update(credentials)
          .set(graceSeconds === 0 ? { revokedAt: now } : { expiresAt })
          .where(
            and(
              eq(credentials.callerId, current.id),
              isNull(credentials.revokedAt),
              or(isNull(credentials.expiresAt), gt(credentials.expiresAt, expiresAt)),
            ),
          )
          .returning({ id: credentials.id, prefix: credentials.prefix });
        const credential = await issueCredential(tx, services, current);
        const [updated] = await tx
          .update(callers)
          .set({ version: sql`${callers.version} + 1`, updatedAt: now })
          .where(eq(callers.id, current.id))
          .returning();
        if (!updated) throw new Error("caller vanished during rotation");
        await appendAuditEvent(tx, {
          actor,
          kind: "caller.rotated",
          subject: `caller:${current.id}`,
          data: {
            name,
            version: updated.version,
            graceSeconds,
            newCredential: { id: credential.id, prefix: credential.prefix },
            oldCredentials: old.map((c) => ({ id: c.id, prefix: c.prefix })),
            ...(widened.length ? { withOperator: widened.map((w) => w.field) } : {}),
          },
        });
        await announce({
          callerId: current.id,
          name,
          version: updated.version,
          change: "rotated",
        });
        return {
          caller: describeCaller(updated, await listCredentialRows(tx, current.id), now),
          credential,
          oldCredentialsExpireAt: expiresAt.toISOString(),
        };
      }),
  );
}
