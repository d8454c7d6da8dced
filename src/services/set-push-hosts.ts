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
import type { CallerWrite } from "./add-caller.ts";
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
  services,
  name,
}: {
  services: ServiceContext;
  name: string;
}): Promise<{ hosts: string[] }> {
  const caller = await findCallerRow(services.db, name);
  return { hosts: await readEntries(services.db, caller.id) };
}

export async function setPushHosts({
  services,
  name,
  input,
  actor,
  operatorToken,
  failure,
}: {
  services: ServiceContext;
  name: string;
  input: unknown;
  actor: Actor;
  operatorToken: string | undefined;
  failure: AuthFailureContext;
}): Promise<{ hosts: string[] }> {
  const hosts = readPushHostsInput(input);
  const caller = await findCallerRow(services.db, name);
  const before = await readEntries(services.db, caller.id);
  const widens = hosts.some((h) => !before.includes(h));
  if (widens) await verifyOperatorToken(services, operatorToken, failure);
  await services.db.transaction(async (tx) => {
    const from = await readEntries(tx, caller.id);
    // Changed meanwhile so that this list now widens it: the operator token was not checked.
    if (!widens && hosts.some((h) => !from.includes(h))) {
      throw new ConflictError("the caller's push hosts changed meanwhile; read them and retry");
    }
    await writePushHosts(tx, caller, from, hosts, widens ? "operator" : actor);
  });
  return { hosts };
}

/** A push-hosts list as given: entries checked, trimmed, unique and sorted. */
export function readPushHostsInput(input: unknown): string[] {
  const hosts = [...new Set(parseInput(pushHostsSchema, input).hosts.map((h) => h.trim()))].sort();
  const problems = checkPushGrantEntries(hosts);
  if (problems.length > 0) throw new ValidationError(problems);
  return hosts;
}

/**
 * Replaces a caller's push grants inside `write`'s transaction (`callers apply`): an entry not
 * there before widens, so `authorize` needs the operator token for it. Returns the list before.
 */
export async function replacePushHostsIn(
  { tx, authorize }: Pick<CallerWrite, "tx" | "authorize">,
  caller: { id: string; name: string },
  hosts: readonly string[],
  actor: Actor,
): Promise<{ from: string[]; changed: boolean }> {
  const from = await readEntries(tx, caller.id);
  const added = hosts.filter((h) => !from.includes(h));
  if (added.length === 0 && from.length === hosts.length) return { from, changed: false };
  await authorize(
    tx,
    `caller:${caller.id}`,
    added.map((h) => ({ field: "pushHosts", message: `push host ${h} added` })),
  );
  await writePushHosts(tx, caller, from, hosts, added.length > 0 ? "operator" : actor);
  return { from, changed: true };
}

async function writePushHosts(
  tx: DbOrTx,
  caller: { id: string; name: string },
  from: readonly string[],
  hosts: readonly string[],
  actor: Actor,
): Promise<void> {
  await tx.delete(callerPushHosts).where(eq(callerPushHosts.callerId, caller.id));
  if (hosts.length > 0) {
    await tx.insert(callerPushHosts).values(hosts.map((entry) => ({ callerId: caller.id, entry })));
  }
  await appendAuditEvent(tx, {
    actor,
    kind: "caller.push-hosts.changed",
    subject: `caller:${caller.id}`,
    data: { name: caller.name, from, to: hosts },
  });
}
