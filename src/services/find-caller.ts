// Reading callers for the admin API. A name that does not exist is NotFoundError here: the admin
// is trusted to know which callers exist (unlike a caller, who only ever sees 401).
import { asc, eq } from "drizzle-orm";
import type { DbOrTx } from "../db/client.ts";
import { type Caller, type Credential, callers, credentials } from "../db/schema.ts";
import { NotFoundError } from "../errors.ts";
import { callerNamePattern } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";

export async function findCallerRow(db: DbOrTx, name: string): Promise<Caller> {
  // A name no caller can have is not looked up (PostgreSQL fails on a NUL byte: a 500).
  const [caller] = callerNamePattern.test(name)
    ? await db.select().from(callers).where(eq(callers.name, name)).limit(1)
    : [];
  if (!caller) throw new NotFoundError(`no caller named ${JSON.stringify(name.slice(0, 80))}`);
  return caller;
}

export async function listCredentialRows(db: DbOrTx, callerId: string): Promise<Credential[]> {
  return db
    .select()
    .from(credentials)
    .where(eq(credentials.callerId, callerId))
    .orderBy(asc(credentials.createdAt));
}

export async function getCaller({
  services,
  name,
}: {
  services: ServiceContext;
  name: string;
}): Promise<CallerView> {
  const caller = await findCallerRow(services.db, name);
  return describeCaller(caller, await listCredentialRows(services.db, caller.id), services.now());
}

export async function listCallers({
  services,
}: {
  services: ServiceContext;
}): Promise<CallerView[]> {
  const rows = await services.db.select().from(callers).orderBy(asc(callers.name));
  const creds = await services.db.select().from(credentials);
  const byCaller = new Map<string, Credential[]>();
  for (const c of creds) {
    if (!c.callerId) continue;
    const list = byCaller.get(c.callerId) ?? [];
    list.push(c);
    byCaller.set(c.callerId, list);
  }
  const now = services.now();
  return rows.map((r) => describeCaller(r, byCaller.get(r.id) ?? [], now));
}
