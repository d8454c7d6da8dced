// The operator's own credentials. The admin token drives the admin API; the operator token is a
// second, separate proof needed to grant anything (approving a parked run), so an agent that read
// the admin token still cannot approve its own run. Both are stored only as SHA-256.
import { and, eq, isNull } from "drizzle-orm";
import { readBearer } from "../auth/bearer.ts";
import { displayPrefix, generateSecret, hashSecret, safeEqual } from "../auth/secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import type { DbOrTx } from "../db/client.ts";
import { credentials } from "../db/schema.ts";
import { type AuthFailureContext, refuse } from "./authenticate-caller.ts";
import type { Actor, ServiceContext } from "./context.ts";

async function activeHashes(db: DbOrTx, kind: "admin" | "operator"): Promise<string[]> {
  const rows = await db
    .select({ hash: credentials.secretHash })
    .from(credentials)
    .where(
      and(eq(credentials.kind, kind), isNull(credentials.revokedAt), isNull(credentials.callerId)),
    );
  return rows.map((r) => r.hash);
}

/**
 * Makes sure an admin token exists. With `configured` (PEERGATE_ADMIN_TOKEN) that token becomes
 * the only admin credential. Without it, a token is generated only if none exists yet; it is
 * returned once, for the caller to write to `<data dir>/admin-token`.
 */
export async function ensureAdminToken({
  ctx,
  configured,
}: {
  ctx: Pick<ServiceContext, "db" | "now">;
  configured: string | undefined;
}): Promise<{ generated?: string; source: "environment" | "stored" | "generated" }> {
  return ctx.db.transaction(async (tx) => {
    const existing = await activeHashes(tx, "admin");
    if (configured !== undefined) {
      const hash = hashSecret(configured);
      if (existing.length === 1 && existing[0] === hash) return { source: "environment" };
      await replaceCredential(tx, ctx.now(), "admin", configured, "system");
      return { source: "environment" };
    }
    if (existing.length > 0) return { source: "stored" };
    const token = generateSecret("adminToken");
    await replaceCredential(tx, ctx.now(), "admin", token, "system");
    return { generated: token, source: "generated" };
  });
}

/** Creates a new operator token, revoking any previous one. Returned once. */
export async function createOperatorToken({
  ctx,
  actor,
}: {
  ctx: Pick<ServiceContext, "db" | "now">;
  actor: Actor;
}): Promise<string> {
  const token = generateSecret("operatorToken");
  await ctx.db.transaction((tx) => replaceCredential(tx, ctx.now(), "operator", token, actor));
  return token;
}

async function replaceCredential(
  tx: DbOrTx,
  now: Date,
  kind: "admin" | "operator",
  token: string,
  actor: Actor,
): Promise<void> {
  const revoked = await tx
    .update(credentials)
    .set({ revokedAt: now })
    .where(
      and(eq(credentials.kind, kind), isNull(credentials.revokedAt), isNull(credentials.callerId)),
    )
    .returning({ prefix: credentials.prefix });
  const [row] = await tx
    .insert(credentials)
    .values({ kind, secretHash: hashSecret(token), prefix: displayPrefix(token) })
    .returning({ id: credentials.id });
  await appendAuditEvent(tx, {
    actor,
    kind: `${kind}-token.created`,
    subject: `credential:${row?.id}`,
    data: { prefix: displayPrefix(token), replaced: revoked.map((r) => r.prefix) },
  });
}

/** Throws UnauthenticatedError unless `authorization` carries the admin token. */
export async function verifyAdminToken(
  ctx: ServiceContext,
  authorization: string | null | undefined,
  failure: AuthFailureContext,
): Promise<void> {
  const bearer = readBearer(authorization);
  if (!bearer.ok) return refuse(ctx, failure, `admin-authorization-${bearer.reason}`);
  const hash = hashSecret(bearer.token);
  const hashes = await activeHashes(ctx.db, "admin");
  if (!hashes.some((h) => safeEqual(h, hash))) return refuse(ctx, failure, "admin-token-wrong");
}

/** Throws UnauthenticatedError unless `token` is the current operator token. */
export async function verifyOperatorToken(
  ctx: ServiceContext,
  token: string | null | undefined,
  failure: AuthFailureContext,
): Promise<void> {
  if (!token) return refuse(ctx, failure, "operator-token-missing");
  const hashes = await activeHashes(ctx.db, "operator");
  if (hashes.length === 0) return refuse(ctx, failure, "operator-token-not-set");
  const hash = hashSecret(token);
  if (!hashes.some((h) => safeEqual(h, hash))) return refuse(ctx, failure, "operator-token-wrong");
}
