// The operator's own credentials. The admin token drives the admin API; the operator token is a
// second, separate proof needed to grant anything (approving a parked run, widening a caller), so
// an agent that read the admin token still cannot approve its own run or raise its own ceiling.
// Both are stored only as SHA-256. The operator token is never minted over HTTP: only through the
// database or the server's control socket in the data directory (src/control/).
import { and, eq, gt, isNull, or } from "drizzle-orm";
import { readBearer } from "../auth/bearer.ts";
import { displayPrefix, generateSecret, hashSecret, safeEqual } from "../auth/secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import type { DbOrTx } from "../db/client.ts";
import { credentials } from "../db/schema.ts";
import { ConfigError, ConflictError, ForbiddenError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { adminTokenFile, createSecretFile, readSecretFile } from "../secret-files.ts";
import { type AuthFailureContext, refuse } from "./authenticate-caller.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { operatorTokenRequired, type Widening } from "./widening.ts";

/**
 * The hashes of the operator's live credentials of one kind: not revoked, and not past the grace
 * period a rotation gave them (`expiresAt`).
 */
export async function activeHashes(
  db: DbOrTx,
  kind: "admin" | "operator",
  now: Date,
): Promise<string[]> {
  const rows = await db
    .select({ hash: credentials.secretHash })
    .from(credentials)
    .where(
      and(
        eq(credentials.kind, kind),
        isNull(credentials.revokedAt),
        isNull(credentials.callerId),
        or(isNull(credentials.expiresAt), gt(credentials.expiresAt, now)),
      ),
    );
  return rows.map((r) => r.hash);
}

/**
 * Makes sure an admin token exists. The admin token is the cluster's, held in the shared
 * database: with `configured` (PEERGATE_ADMIN_TOKEN) that token is adopted only when the database
 * has none yet; when the database has another, start-up is refused (an instance started with a
 * stale or mistyped token must not replace the token every other instance and operator holds).
 * It changes only through `rotateAdminToken`. Without `configured`, a token is generated only if
 * none exists yet; it is returned once, for the caller to write to `<data dir>/admin-token`.
 */
export async function ensureAdminToken({
  services,
  configured,
}: {
  services: Pick<ServiceContext, "db" | "now">;
  configured: string | undefined;
}): Promise<{ generated?: string; source: AdminTokenSource }> {
  return services.db.transaction(async (tx) => {
    const existing = await activeHashes(tx, "admin", services.now());
    if (configured !== undefined) {
      const hash = hashSecret(configured);
      if (existing.some((h) => safeEqual(h, hash))) return { source: "environment" };
      if (existing.length > 0) throw adminTokenMismatch();
      await replaceCredential(tx, services.now(), "admin", configured, "system");
      return { source: "environment" };
    }
    if (existing.length > 0) return { source: "stored" };
    const token = generateSecret("adminToken");
    await replaceCredential(tx, services.now(), "admin", token, "system");
    return { generated: token, source: "generated" };
  });
}

export type AdminTokenSource = "environment" | "stored" | "generated" | "adopted-from-file";

/** Start-up refused: PEERGATE_ADMIN_TOKEN is not the cluster's admin token. */
function adminTokenMismatch(): ConfigError {
  return new ConfigError(
    [
      {
        field: "PEERGATE_ADMIN_TOKEN",
        message:
          "PEERGATE_ADMIN_TOKEN is not the admin token this database holds. The admin token is the " +
          "cluster's: every instance on this database shares it, and starting with another one does " +
          "not replace it. Set PEERGATE_ADMIN_TOKEN to the cluster's token (the one the other " +
          "instances use, or the `admin-token` file in the data directory of the instance that " +
          "made it), or unset it; to change the cluster's token on purpose, run " +
          "`peergate admin-token rotate` against a running instance (it needs the operator token).",
      },
    ],
    "peergate cannot start: the admin token does not match the cluster's",
  );
}

/**
 * The start-up half of the admin token: makes sure the database and `<data dir>/admin-token`
 * agree, and never leaves the operator without a token they hold.
 *
 * - PEERGATE_ADMIN_TOKEN set: it is the admin token (ensureAdminToken).
 * - The database has none and the file holds one (a data directory that served the embedded
 *   database, now pointed at PostgreSQL): the file's token is adopted, so the token the operator
 *   has keeps working.
 * - The database has none and there is no file: one is generated and written to the file.
 * - The database has one the file does not hold: refused with the way out (the cluster's token
 *   in the file or the environment; a rotation to change it), which loses no token.
 * - The database has one and there is no file (a second instance on another machine): a warning
 *   that says where the token is.
 */
export async function settleAdminToken({
  services,
  configured,
  dataDir,
  logger,
}: {
  services: Pick<ServiceContext, "db" | "now">;
  configured: string | undefined;
  dataDir: string;
  logger: Logger;
}): Promise<{ source: AdminTokenSource; generated?: string }> {
  const file = `${dataDir}/${adminTokenFile}`;
  if (configured !== undefined) return ensureAdminToken({ services, configured });
  const fromFile = await readSecretFile(dataDir, adminTokenFile);
  const known = await activeHashes(services.db, "admin", services.now());
  if (fromFile) {
    const hash = hashSecret(fromFile);
    if (known.some((h) => safeEqual(h, hash))) return { source: "stored" };
    if (known.length === 0) {
      await services.db.transaction((tx) =>
        replaceCredential(tx, services.now(), "admin", fromFile, "system"),
      );
      logger.info("admin token adopted from the data directory", { file });
      return { source: "adopted-from-file" };
    }
    throw new ConfigError([
      {
        field: adminTokenFile,
        message:
          `${file} holds an admin token this database does not know: the database has the ` +
          "cluster's own (made by another instance, or rotated since). Put the cluster's token in " +
          `the file (or in PEERGATE_ADMIN_TOKEN); to change the cluster's token on purpose, run ` +
          "`peergate admin-token rotate` against a running instance. Keep the file until then: " +
          "it is the only copy of its token, which the database the file came from still knows.",
      },
    ]);
  }
  if (known.length > 0) {
    logger.warn(
      `the admin token is not on this machine: set PEERGATE_ADMIN_TOKEN, or copy ${adminTokenFile} from the data directory of the instance that made it into ${dataDir}`,
      {},
    );
    return { source: "stored" };
  }
  const generated = await ensureAdminToken({ services, configured: undefined });
  if (!generated.generated) return { source: generated.source };
  const stored = await createSecretFile(dataDir, adminTokenFile, generated.generated);
  if (stored !== generated.generated) {
    // Another process wrote the file between our read and our write: its token wins, as above.
    await services.db.transaction((tx) =>
      replaceCredential(tx, services.now(), "admin", stored, "system"),
    );
    return { source: "adopted-from-file" };
  }
  logger.info("admin token generated", { file });
  return generated;
}

/**
 * Creates a new operator token, returned once. An existing one is replaced (and dies) only with
 * `replace`; without it the call fails with ConflictError, so nobody kills the operator's token by
 * accident. Tests and the `--force` path pass `replace: true`.
 */
export async function createOperatorToken({
  services,
  actor,
  replace = true,
}: {
  services: Pick<ServiceContext, "db" | "now">;
  actor: Actor;
  replace?: boolean;
}): Promise<string> {
  const token = generateSecret("operatorToken");
  await services.db.transaction(async (tx) => {
    if (!replace && (await activeHashes(tx, "operator", services.now())).length > 0) {
      throw new ConflictError(
        "an operator token exists already; creating a new one makes the old one stop working at once (use --force to do that)",
      );
    }
    await replaceCredential(tx, services.now(), "operator", token, actor);
  });
  return token;
}

/** Whether an operator token is set (for status output; never says which). */
export async function hasOperatorToken(db: DbOrTx): Promise<boolean> {
  return (await activeHashes(db, "operator", new Date())).length > 0;
}

export async function replaceCredential(
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
  services: ServiceContext,
  authorization: string | null | undefined,
  failure: AuthFailureContext,
): Promise<void> {
  const bearer = readBearer(authorization);
  if (!bearer.ok) return refuse(services, failure, `admin-authorization-${bearer.reason}`);
  const hash = hashSecret(bearer.token);
  const hashes = await activeHashes(services.db, "admin", services.now());
  if (!hashes.some((h) => safeEqual(h, hash)))
    return refuse(services, failure, "admin-token-wrong");
}

/** Why `token` is not the current operator token, or undefined when it is. Reads only. */
async function operatorTokenProblem(
  db: DbOrTx,
  token: string | null | undefined,
): Promise<string | undefined> {
  if (!token) return "operator-token-missing";
  const hashes = await activeHashes(db, "operator", new Date());
  if (hashes.length === 0) return "operator-token-not-set";
  const hash = hashSecret(token);
  if (!hashes.some((h) => safeEqual(h, hash))) return "operator-token-wrong";
  return undefined;
}

/** Throws UnauthenticatedError unless `token` is the current operator token. */
export async function verifyOperatorToken(
  services: ServiceContext,
  token: string | null | undefined,
  failure: AuthFailureContext,
): Promise<void> {
  const problem = await operatorTokenProblem(services.db, token);
  if (problem) return refuse(services, failure, problem);
}

/**
 * The operator token a write presented (the `X-Peergate-Operator-Token` header), if any. It is
 * checked only when the write widens a caller: elsewhere it has nothing to authorize.
 */
export type OperatorProof = { token: string | undefined; failure: AuthFailureContext };

/** A presented operator token that is wrong; turned into the 401 once the transaction is over. */
class OperatorTokenRejected extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(reason);
    this.reason = reason;
  }
}

/** Checks, inside the write's transaction, that a widening carries the operator token. */
export type AuthorizeWidening = (
  tx: DbOrTx,
  subject: string | null,
  widened: readonly Widening[],
) => Promise<void>;

/**
 * Runs a caller write that may widen. `work` calls `authorize` with what it would widen; with no
 * operator token that is a 403 naming the token and the fields (audited as
 * `caller.widening-refused`), with a wrong one the same 401 as every bad credential. The write's
 * transaction is rolled back in both cases; the audit events are written after it, since an
 * embedded database has one connection and the transaction holds it.
 */
export async function withWideningCheck<T>(
  services: ServiceContext,
  {
    proof,
    actor,
    what,
  }: {
    proof: OperatorProof | undefined;
    actor: Actor;
    /** The write as the refusal names it, e.g. "changing caller alice". */
    what: string;
  },
  work: (authorize: AuthorizeWidening) => Promise<T>,
): Promise<T> {
  let refused: { subject: string | null; widened: readonly Widening[] } | undefined;
  const authorize: AuthorizeWidening = async (tx, subject, widened) => {
    if (widened.length === 0) return;
    if (!proof?.token) {
      refused = { subject, widened };
      throw operatorTokenRequired(what, widened);
    }
    const problem = await operatorTokenProblem(tx, proof.token);
    if (problem) throw new OperatorTokenRejected(problem);
  };
  try {
    return await work(authorize);
  } catch (error) {
    if (error instanceof OperatorTokenRejected && proof) {
      return refuse(services, { ...proof.failure, surface: "operator" }, error.reason);
    }
    if (error instanceof ForbiddenError && refused) {
      // Recorded as the failed proof it is (as a missing token on an approval is): someone with
      // the admin token tried to widen a caller without the operator.
      await appendAuditEvent(services.db, {
        actor,
        kind: "auth.failed",
        subject: refused.subject,
        data: {
          surface: "operator",
          reason: "operator-token-missing",
          source: proof?.failure.source ?? "unknown",
          what,
          widened: refused.widened.map((w) => w.field),
        },
      }).catch((auditError: unknown) =>
        services.logger.error("could not audit a refused widening", { error: auditError }),
      );
    }
    throw error;
  }
}
