// A caller's push grants (src/policy/push-grants.ts): where its A2A push notifications may go.
// Replacing the list is one verb; an entry that was not there before widens what the caller may
// do, so it also needs the operator token (DESIGN §9), while removing entries needs only the
// admin token. The change and its audit event (from/to) commit together; the push worker reads
// the grants before every delivery, so a removal applies to the next one.
import { asc, eq } from "drizzle-orm";
import { z } from "zod";
import { appendAuditEvent } from "../db/audit.ts";
import type { DbOrTx } from "../db/client.ts";
import { callerPushHosts } from "../db/schema.ts";
import { ConflictError, ValidationError } from "../errors.ts";
import { checkPushGrantEntries } from "../policy/push-grants.ts";
import { verifyOperatorToken } from "./admin-credentials.ts";
import type { AuthFailureContext } from "./authenticate-caller.ts";
import { parseInput } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { findCallerRow } from "./find-caller.ts";

export const pushHostsSchema = z.strictObject({
  hosts: z.array(z.string().min(1).max(2048)).max(100),
});

async function readEntries(db: DbOrTx, callerId: string): Promise<string[]> {
  const rows = await db
    .select({ entry: callerPushHosts.entry })
    .from(callerPushHosts)
    .where(eq(callerPushHosts.callerId, callerId))
    .orderBy(asc(callerPushHosts.entry));
  return rows.map((r) => r.entry);
}

export async function getPushHosts({
  ctx,
  name,
}: {
  ctx: ServiceContext;
  name: string;
}): Promise<{ hosts: string[] }> {
  const caller = await findCallerRow(ctx.db, name);
  return { hosts: await readEntries(ctx.db, caller.id) };
}

export async function setPushHosts({
  ctx,
  name,
  input,
  actor,
  operatorToken,
  failure,
}: {
  ctx: ServiceContext;
  name: string;
  input: unknown;
  actor: Actor;
  operatorToken: string | undefined;
  failure: AuthFailureContext;
}): Promise<{ hosts: string[] }> {
  const hosts = [...new Set(parseInput(pushHostsSchema, input).hosts.map((h) => h.trim()))].sort();
  const problems = checkPushGrantEntries(hosts);
  if (problems.length > 0) throw new ValidationError(problems);
  const caller = await findCallerRow(ctx.db, name);
  const before = await readEntries(ctx.db, caller.id);
  const widens = hosts.some((h) => !before.includes(h));
  if (widens) await verifyOperatorToken(ctx, operatorToken, failure);
  await ctx.db.transaction(async (tx) => {
    const from = await readEntries(tx, caller.id);
    // Changed meanwhile so that this list now widens it: the operator token was not checked.
    if (!widens && hosts.some((h) => !from.includes(h))) {
      throw new ConflictError("the caller's push hosts changed meanwhile; read them and retry");
    }
    await tx.delete(callerPushHosts).where(eq(callerPushHosts.callerId, caller.id));
    if (hosts.length > 0) {
      await tx
        .insert(callerPushHosts)
        .values(hosts.map((entry) => ({ callerId: caller.id, entry })));
    }
    await appendAuditEvent(tx, {
      actor: widens ? "operator" : actor,
      kind: "caller.push-hosts.changed",
      subject: `caller:${caller.id}`,
      data: { name, from, to: hosts },
    });
  });
  return { hosts };
}
