// Bringing a revoked caller back is explicit and never revives an old credential or an old grant:
// it sets the tier the admin names, the allow list the admin names (empty unless given: a revoked
// caller keeps no allow entry, DESIGN), clears the command allowlist, and issues a new credential,
// shown once. It always widens (from tier `none`), so it needs the operator token as well as the
// admin token. A JWT peer comes back with its key as its only credential, as it was created.
import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import { appendAuditEvent } from "../db/audit.ts";
import { callers } from "../db/schema.ts";
import { ConflictError } from "../errors.ts";
import { type OperatorProof, withWideningCheck } from "./admin-credentials.ts";
import { changeCaller } from "./caller-events.ts";
import { allowSchema, parseInput, settableTiers } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { findCallerRow, listCredentialRows } from "./find-caller.ts";
import { type IssuedCredential, issueCredential } from "./issue-credential.ts";
import { describeWidening } from "./widening.ts";

export const restoreCallerSchema = z.strictObject({
  tier: z.enum(settableTiers, { error: `one of ${settableTiers.join(", ")}` }),
  /** The allow list the caller comes back with; none unless named. */
  allow: allowSchema.default([]),
});

export async function restoreCaller({
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
  /** The operator token the request carried; a restore always needs it. */
  operator?: OperatorProof | undefined;
}): Promise<{ caller: CallerView; credential: IssuedCredential | null }> {
  const { tier, allow } = parseInput(restoreCallerSchema, input);
  return withWideningCheck(
    services,
    { proof: operator, actor, what: `restoring caller ${name}` },
    (authorize) =>
      changeCaller(services, async (tx, announce) => {
        const current = await findCallerRow(tx, name);
        if (current.revokedAt === null) {
          throw new ConflictError(`caller ${name} is not revoked; use PATCH to change its tier`);
        }
        await authorize(
          tx,
          `caller:${current.id}`,
          describeWidening(
            { ...current, tier: "none", allow: [], commands: [] },
            { ...current, tier, allow, commands: [] },
          ),
        );
        const now = services.now();
        const [updated] = await tx
          .update(callers)
          .set({
            tier,
            allow,
            commands: [],
            revokedAt: null,
            version: sql`${callers.version} + 1`,
            updatedAt: now,
          })
          .where(eq(callers.id, current.id))
          .returning();
        if (!updated) throw new Error("caller vanished during restore");
        const credential = updated.jwt ? null : await issueCredential(tx, services, updated);
        await appendAuditEvent(tx, {
          actor,
          kind: "caller.restored",
          subject: `caller:${current.id}`,
          data: {
            name,
            tier,
            allow,
            droppedAllow: current.allow.filter((a) => !allow.includes(a)),
            droppedCommands: current.commands,
            version: updated.version,
            credential: credential ? { id: credential.id, prefix: credential.prefix } : null,
          },
        });
        await announce({
          callerId: current.id,
          name,
          version: updated.version,
          change: "restored",
        });
        return {
          caller: describeCaller(updated, await listCredentialRows(tx, current.id), now),
          credential,
        };
      }),
  );
}
