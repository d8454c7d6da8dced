// Rotating the cluster's admin token: the one way it changes (an instance started with another
// PEERGATE_ADMIN_TOKEN is refused, src/services/admin-credentials.ts). A new token now, returned
// once; the old one keeps working for `graceSeconds` (default 0: it dies at once), so instances
// and scripts holding it can switch over. The admin token alone could otherwise lock every other
// holder out and keep the new one to itself, so the rotation needs the operator token as well.
import { and, eq, gt, isNull, or } from "drizzle-orm";
import { z } from "zod";
import { displayPrefix, generateSecret, hashSecret } from "../auth/secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import { credentials } from "../db/schema.ts";
import { ForbiddenError } from "../errors.ts";
import { type OperatorProof, verifyOperatorToken } from "./admin-credentials.ts";
import { parseInput } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { operatorTokenHeader } from "./widening.ts";

export const rotateAdminTokenSchema = z.strictObject({
  graceSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(0)
    .describe("how long the old admin token keeps working (seconds; 0: it stops at once)"),
});

export type RotatedAdminToken = {
  /** The new admin token: shown once, stored only as a hash. */
  readonly token: string;
  readonly prefix: string;
  readonly oldTokensExpireAt: string;
};

export async function rotateAdminToken({
  services,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  input: unknown;
  actor: Actor;
  operator: OperatorProof | undefined;
}): Promise<RotatedAdminToken> {
  const { graceSeconds } = parseInput(rotateAdminTokenSchema, input ?? {});
  if (!operator?.token) {
    await appendAuditEvent(services.db, {
      actor,
      kind: "auth.failed",
      subject: "admin-token",
      data: { surface: "operator", reason: "operator-token-missing", what: "admin-token rotate" },
    });
    throw new ForbiddenError(
      `rotating the admin token needs the operator token as well as the admin token (a new admin token hands the whole admin API to whoever asked, and can lock out every other holder of the old one): send it in the ${operatorTokenHeader} header (create it with \`peergate operator-token create\`)`,
      { code: "operator-token-required" },
    );
  }
  await verifyOperatorToken(services, operator.token, operator.failure);
  return services.db.transaction(async (tx) => {
    const now = services.now();
    const expiresAt = new Date(now.getTime() + graceSeconds * 1000);
    const live = and(
      eq(credentials.kind, "admin"),
      isNull(credentials.callerId),
      isNull(credentials.revokedAt),
    );
    const old = await tx
      .update(credentials)
      .set(graceSeconds === 0 ? { revokedAt: now } : { expiresAt })
      .where(and(live, or(isNull(credentials.expiresAt), gt(credentials.expiresAt, expiresAt))))
      .returning({ id: credentials.id, prefix: credentials.prefix });
    const token = generateSecret("adminToken");
    const [row] = await tx
      .insert(credentials)
      .values({ kind: "admin", secretHash: hashSecret(token), prefix: displayPrefix(token) })
      .returning({ id: credentials.id });
    await appendAuditEvent(tx, {
      actor,
      kind: "admin-token.rotated",
      subject: `credential:${row?.id}`,
      data: {
        prefix: displayPrefix(token),
        graceSeconds,
        oldTokens: old.map((c) => ({ id: c.id, prefix: c.prefix })),
      },
    });
    return {
      token,
      prefix: displayPrefix(token),
      oldTokensExpireAt: expiresAt.toISOString(),
    };
  });
}
