// The key that signs audit checkpoints (src/db/audit-prune.ts): Ed25519, derived with HKDF from
// peergate's secret key (the one that seals webhook secrets) under an `info` of its own, so every
// instance sharing that key signs alike, nothing new is stored, and the card-signing key
// (src/a2a/card-signing.ts) and this one never coincide. The public half is exported with the
// checkpoints (`peergate audit checkpoints --json`), so anyone holding an export can check a
// checkpoint without the secret key.
import {
  createPrivateKey,
  createPublicKey,
  hkdfSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { calculateJwkThumbprint, type JWK } from "jose";

export type CheckpointSigner = {
  /** RFC 7638 thumbprint of the public key. */
  readonly keyId: string;
  readonly publicJwk: JWK;
  sign(text: string): string;
  /** False for a signature made by another key, over other text, or altered. */
  verify(text: string, signature: string): boolean;
};

const hkdfInfo = "peergate audit checkpoint signing key v1";
// PKCS #8 for an Ed25519 private key, up to the 32-byte seed (RFC 8410 §7).
const ed25519Pkcs8Prefix = Buffer.from("302e020100300506032b657004220420", "hex");

export async function deriveCheckpointSigner(secret: Uint8Array): Promise<CheckpointSigner> {
  if (secret.length < 32) throw new Error("the checkpoint key needs at least 32 secret bytes");
  const seed = Buffer.from(hkdfSync("sha256", secret, Buffer.alloc(0), hkdfInfo, 32));
  const privateKey: KeyObject = createPrivateKey({
    key: Buffer.concat([ed25519Pkcs8Prefix, seed]),
    format: "der",
    type: "pkcs8",
  });
  const publicKey = createPublicKey(privateKey);
  const { kty, crv, x } = publicKey.export({ format: "jwk" });
  const keyId = await calculateJwkThumbprint({ kty, crv, x }, "sha256");
  return {
    keyId,
    publicJwk: { kty, crv, x, kid: keyId, alg: "EdDSA", use: "sig" },
    sign: (text) => sign(null, Buffer.from(text, "utf8"), privateKey).toString("base64url"),
    verify(text, signature) {
      try {
        return verify(
          null,
          Buffer.from(text, "utf8"),
          publicKey,
          Buffer.from(signature, "base64url"),
        );
      } catch {
        return false;
      }
    },
  };
}
