// GitHub webhook signatures: `X-Hub-Signature-256: sha256=<64 lowercase hex>`, an HMAC-SHA256 of
// the raw request body. We compute it over the raw bytes with node:crypto rather than
// @octokit/webhooks-methods' verify(), which takes a string: decoding the body first would sign
// different bytes whenever the body is not valid UTF-8. Tests check us against octokit's sign()
// and GitHub's documented vector. Every malformed input is a plain `false`, never an exception.
import { createHmac, timingSafeEqual } from "node:crypto";

const signatureHeader = /^sha256=([0-9a-f]{64})$/;

export type SignatureCheck =
  | { ok: true }
  | { ok: false; reason: "missing" | "malformed" | "mismatch" | "no-secret" };

export function verifyGithubSignature(
  secret: string,
  rawBody: Uint8Array,
  header: string | null | undefined,
): SignatureCheck {
  if (!secret) return { ok: false, reason: "no-secret" };
  if (!header) return { ok: false, reason: "missing" };
  const match = signatureHeader.exec(header);
  if (!match?.[1]) return { ok: false, reason: "malformed" };
  const expected = createHmac("sha256", secret).update(rawBody).digest();
  const given = Buffer.from(match[1], "hex");
  return given.length === expected.length && timingSafeEqual(given, expected)
    ? { ok: true }
    : { ok: false, reason: "mismatch" };
}
