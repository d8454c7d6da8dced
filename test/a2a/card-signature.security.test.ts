// The agent card's JWS signature, checked the way a peer would: fetch the card, follow its `jku`
// to the published JWKS, and verify with the a2a-js SDK's verifier (JWS over the RFC 8785
// canonical card). Tampering with any signed field, the security schemes included, must break it.
import { randomBytes } from "node:crypto";
import { type AgentCard, verifyAgentCardSignature } from "@a2a-js/sdk";
import { decodeProtectedHeader, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { deriveCardSigningKey } from "../../src/a2a/card-signing.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, startHarness } from "./support.ts";

type CardJson = Record<string, unknown> & {
  signatures?: { protected: string; signature: string }[];
};

/** Verifies a card as received, with keys from the JWKS its signature's `jku` names. */
async function verifyWithPublishedJwks(card: CardJson): Promise<void> {
  const verify = verifyAgentCardSignature(async (kid, jku) => {
    if (!jku) throw new Error("no jku");
    const jwks = (await (await fetch(jku)).json()) as { keys: JWK[] };
    const jwk = jwks.keys.find((key) => key.kid === kid);
    if (!jwk) throw new Error(`no key ${kid}`);
    return jwk;
  });
  // The card as it came off the wire (ProtoJSON), not the SDK's in-memory form.
  await verify(card as unknown as AgentCard);
}

describeEachDatabase(
  "A2A card signature",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice"]);
      // The SDK's verifier logs every signature that fails with console.debug.
      vi.spyOn(console, "debug").mockImplementation(() => {});
    });
    afterAll(async () => {
      vi.restoreAllMocks();
      await h.close();
    });

    const getCard = async (headers: Record<string, string> = { "A2A-Version": "1.0" }) =>
      (await (
        await fetch(`${h.baseUrl}/.well-known/agent-card.json`, { headers })
      ).json()) as CardJson;

    it("signs the 1.0 card with a detached JWS naming its key and the JWKS", async () => {
      const card = await getCard();
      expect(card.signatures).toHaveLength(1);
      const signature = card.signatures?.[0];
      expect(signature).toEqual({ protected: expect.any(String), signature: expect.any(String) });
      expect(decodeProtectedHeader(signature as never)).toEqual({
        alg: "EdDSA",
        typ: "JOSE",
        kid: h.cardSigningKey.kid,
        jku: `${h.baseUrl}/.well-known/jwks.json`,
      });
      await expect(verifyWithPublishedJwks(card)).resolves.toBeUndefined();
    });

    it("publishes only the public key, as a JWK Set, with cache headers", async () => {
      const res = await fetch(`${h.baseUrl}/.well-known/jwks.json`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("application/jwk-set+json");
      const etag = res.headers.get("etag") ?? "";
      expect(etag).toMatch(/^".+"$/);
      const jwks = (await res.json()) as { keys: JWK[] };
      expect(jwks.keys).toEqual([
        {
          kty: "OKP",
          crv: "Ed25519",
          x: expect.any(String),
          kid: h.cardSigningKey.kid,
          alg: "EdDSA",
          use: "sig",
        },
      ]);
      expect(JSON.stringify(jwks)).not.toContain('"d"');
      const again = await fetch(`${h.baseUrl}/.well-known/jwks.json`, {
        headers: { "If-None-Match": etag },
      });
      expect(again.status).toBe(304);
    });

    it.each([
      ["the description", (c: CardJson) => ({ ...c, description: "A different agent" })],
      ["the endpoint", (c: CardJson) => ({ ...c, supportedInterfaces: [] })],
      [
        "a security scheme",
        (c: CardJson) => ({
          ...c,
          securitySchemes: {
            bearer: { httpAuthSecurityScheme: { scheme: "bearer", bearerFormat: "JWT" } },
          },
        }),
      ],
      [
        "a skill",
        (c: CardJson) => ({ ...c, skills: [{ id: "x", name: "X", description: "x", tags: [] }] }),
      ],
      ["the capabilities", (c: CardJson) => ({ ...c, capabilities: { streaming: false } })],
    ])("fails verification when %s is changed", async (_what, tamper) => {
      const card = await getCard();
      await expect(verifyWithPublishedJwks(tamper(card))).rejects.toThrow(/No valid signatures/);
    });

    it("fails verification against another key", async () => {
      const card = await getCard();
      const other = await deriveCardSigningKey(randomBytes(32));
      const verify = verifyAgentCardSignature(async () => other.publicJwk);
      await expect(verify(card as unknown as AgentCard)).rejects.toThrow(/No valid signatures/);
    });

    it("signs the extended card too, and leaves the v0.3 shape unsigned", async () => {
      const res = await h.rpc("alice", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard" });
      const extended = ((await res.json()) as { result: CardJson }).result;
      expect(extended.signatures).toHaveLength(1);
      await expect(verifyWithPublishedJwks(extended)).resolves.toBeUndefined();
      const v03 = await getCard({});
      expect(v03).toMatchObject({ protocolVersion: "0.3.0" });
      expect(v03).not.toHaveProperty("signatures");
      const v03Extended = await h.rpc(
        "alice",
        { jsonrpc: "2.0", id: 1, method: "agent/getAuthenticatedExtendedCard" },
        { "A2A-Version": "0.3" },
      );
      const v03Card = ((await v03Extended.json()) as { result: CardJson }).result;
      expect(v03Card).toMatchObject({ name: "test-peer" });
      expect(v03Card).not.toHaveProperty("signatures");
    });

    it("serves the same signed card and ETag on every request (Ed25519 signs deterministically)", async () => {
      const get = () =>
        fetch(`${h.baseUrl}/.well-known/agent-card.json`, { headers: { "A2A-Version": "1.0" } });
      const [a, b] = await Promise.all([get(), get()]);
      expect(a.headers.get("etag")).toBe(b.headers.get("etag"));
      expect(await a.text()).toBe(await b.text());
    });

    describe("the key", () => {
      it("is derived from the secret: the same bytes give the same key, others another", async () => {
        const secret = randomBytes(32);
        const one = await deriveCardSigningKey(secret);
        const two = await deriveCardSigningKey(Buffer.from(secret));
        const other = await deriveCardSigningKey(randomBytes(32));
        expect(two.kid).toBe(one.kid);
        expect(two.publicJwk).toEqual(one.publicJwk);
        expect(other.kid).not.toBe(one.kid);
        await expect(deriveCardSigningKey(randomBytes(16))).rejects.toThrow(/32/);
      });
    });
  },
  { fresh: "suite" },
);
