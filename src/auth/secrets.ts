// High-entropy credentials: generated from the OS CSPRNG, shown once, stored as SHA-256 and looked
// up by that hash. A slow password hash would add nothing against 256-bit secrets and would make
// every request a denial-of-service lever.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** Credential kinds and the prefix that makes each recognisable (and greppable in leaks). */
export const secretPrefixes = {
  peerToken: "pg_",
  webhookToken: "pgw_",
  iftttSecret: "pgi_",
  githubSecret: "pgh_",
  adminToken: "pga_",
  operatorToken: "pgo_",
} as const;

export type SecretKind = keyof typeof secretPrefixes;

/** 32 random bytes = 256 bits, base64url: comfortably above the 192 bits DESIGN §6 asks for. */
const secretBytes = 32;

export const secretPattern = /^pg[a-z]?_[A-Za-z0-9_-]{43}$/;

export function generateSecret(kind: SecretKind): string {
  return secretPrefixes[kind] + randomBytes(secretBytes).toString("base64url");
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** The kind prefix of a secret peergate generated (`pg_`, `pgw_`, …); none for other text. */
const kindPrefix = /^pg[a-z]?_/;

/**
 * What an operator sees to tell credentials apart: the kind prefix and four characters, never
 * more. A secret peergate did not generate (an admin token the operator chose in
 * PEERGATE_ADMIN_TOKEN) has no kind prefix to trust, so it shows four characters alone: searching
 * it for an underscore would show everything before one that happens to be in its random part.
 */
export function displayPrefix(secret: string): string {
  const kind = kindPrefix.exec(secret)?.[0] ?? "";
  return `${secret.slice(0, kind.length + 4)}…`;
}

/** Constant-time equality for two strings of possibly different length. */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a, "utf8").digest();
  const hb = createHash("sha256").update(b, "utf8").digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
