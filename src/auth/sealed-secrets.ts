// GitHub signs deliveries with HMAC, so peergate must hold the webhook secret itself, not only a
// hash of it. Those secrets are sealed with AES-256-GCM under a key that never enters the
// database: PEERGATE_SECRET_KEY, or `<data dir>/secret-key` generated on first start (mode 0600).
// A database dump alone then yields no usable webhook secret. Instances sharing one PostgreSQL must
// share the key (set PEERGATE_SECRET_KEY on all of them); a wrong key fails closed: the delivery is
// refused, and the log says the secret could not be opened.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

const version = "v1";

export type SecretKey = { readonly bytes: Buffer; readonly id: string };

/** Parses a 32-byte key given as base64url/base64 (43-44 chars) or hex (64 chars). */
export function parseSecretKey(text: string): SecretKey | undefined {
  const trimmed = text.trim();
  let bytes: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) bytes = Buffer.from(trimmed, "hex");
  else if (/^[A-Za-z0-9_\-+/]{43}=?$/.test(trimmed)) bytes = Buffer.from(trimmed, "base64url");
  if (bytes?.length !== 32) return undefined;
  return { bytes, id: keyId(bytes) };
}

export function generateSecretKeyText(): string {
  return randomBytes(32).toString("base64url");
}

function keyId(bytes: Buffer): string {
  // Not secret: lets an operator see which key sealed a value, without revealing the key.
  return createCipheriv("aes-256-ecb", bytes, null)
    .update(Buffer.alloc(16))
    .toString("hex")
    .slice(0, 8);
}

export function sealSecret(key: SecretKey, secret: string, context: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key.bytes, iv);
  cipher.setAAD(Buffer.from(context, "utf8"));
  const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [
    version,
    key.id,
    iv.toString("base64url"),
    body.toString("base64url"),
    tag.toString("base64url"),
  ].join(".");
}

/** Undefined when the value was sealed under another key, for another context, or was altered. */
export function openSecret(key: SecretKey, sealed: string, context: string): string | undefined {
  const [v, id, iv, body, tag] = sealed.split(".");
  if (v !== version || id !== key.id || !iv || body === undefined || !tag) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key.bytes, Buffer.from(iv, "base64url"));
    decipher.setAAD(Buffer.from(context, "utf8"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([
      decipher.update(Buffer.from(body, "base64url")),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    return undefined;
  }
}
