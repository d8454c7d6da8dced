// The agent card's signature (A2A 1.0 `signatures`, spec §8.4): a detached JWS (RFC 7515,
// flattened: `protected` and `signature`) over the card's canonical form — the card through the
// 1.0 ProtoJSON schema, without `signatures` and without default-valued fields, serialised with
// JCS (RFC 8785). The SDK's generateAgentCardSignature does exactly that with `jose`; peergate
// only picks the key and feeds it the card's ProtoJSON form. Fed the SDK's in-memory card
// instead, its canonicaliser would drop the security schemes (their oneof wrappers do not survive
// `AgentCard.fromJSON`), leaving them outside what is signed. For the same reason the a2a-js
// client's `getAgentCard(options, verifier)`, which verifies its in-memory card, fails on any card
// with security schemes (SDK 1.3.0); a peer verifies the card JSON as received.
//
// The key is Ed25519 (alg EdDSA), derived with HKDF from peergate's secret key (the one that
// seals webhook secrets; a separate `info` keeps the two uses apart), so every instance sharing
// that key signs with the same key and serves the same card and ETag, and nothing new must be
// stored. The public half is published as a JWKS (`jwksUrl`), named in the protected header as
// `jku` and `kid` (the RFC 7638 thumbprint). Only the 1.0 card is signed; the v0.3 shape, which
// generic v0.3 clients never verify, carries none.
import { createPrivateKey, createPublicKey, hkdfSync, type KeyObject } from "node:crypto";
import { type AgentCard, type AgentCardSignature, generateAgentCardSignature } from "@a2a-js/sdk";
import { calculateJwkThumbprint, type JWK } from "jose";

export type CardSigningKey = {
  privateKey: KeyObject;
  /** The public key as published: kty, crv, x, kid, alg, use. */
  publicJwk: JWK;
  kid: string;
};

/** A JSON Web Key Set: what `/.well-known/jwks.json` serves. */
export type Jwks = { keys: JWK[] };

const hkdfInfo = "peergate agent-card signing key v1";
// PKCS #8 for an Ed25519 private key, up to the 32-byte seed (RFC 8410 §7).
const ed25519Pkcs8Prefix = Buffer.from("302e020100300506032b657004220420", "hex");

/** The card-signing key for a secret key's bytes (the same bytes give the same key). */
export async function deriveCardSigningKey(secret: Uint8Array): Promise<CardSigningKey> {
  if (secret.length < 32) throw new Error("the card-signing key needs at least 32 secret bytes");
  const seed = Buffer.from(hkdfSync("sha256", secret, Buffer.alloc(0), hkdfInfo, 32));
  const privateKey = createPrivateKey({
    key: Buffer.concat([ed25519Pkcs8Prefix, seed]),
    format: "der",
    type: "pkcs8",
  });
  const { kty, crv, x } = createPublicKey(privateKey).export({ format: "jwk" });
  const kid = await calculateJwkThumbprint({ kty, crv, x }, "sha256");
  return { privateKey, kid, publicJwk: { kty, crv, x, kid, alg: "EdDSA", use: "sig" } };
}

export function publishJwks(key: CardSigningKey | undefined): Jwks {
  return { keys: key ? [key.publicJwk] : [] };
}

/** The signature of a card given in its 1.0 ProtoJSON form (see the module comment). */
export async function signCardJson(
  cardJson: Record<string, unknown>,
  key: CardSigningKey,
  jwksUrl: string,
): Promise<AgentCardSignature> {
  const { signatures: _ignored, ...unsigned } = cardJson;
  const sign = generateAgentCardSignature(key.privateKey, {
    alg: "EdDSA",
    typ: "JOSE",
    kid: key.kid,
    jku: jwksUrl,
  });
  const signed = await sign(unsigned as unknown as AgentCard);
  const signature = signed.signatures.at(-1);
  if (!signature) throw new Error("the SDK returned the card unsigned");
  return signature;
}
