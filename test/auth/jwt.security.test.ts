// RFC 8725 attacks against peer JWT verification. Every forged or misused token must be refused
// with a reason, and nothing the token names (jku, x5u, jwk) may be fetched or trusted.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createJwksCache,
  type JwtDeps,
  type PeerJwtSettings,
  verifyPeerJwt,
} from "../../src/auth/jwt.ts";

const now = new Date("2026-06-01T12:00:00Z");
const nowSec = Math.floor(now.getTime() / 1000);
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
let attacker: Awaited<ReturnType<typeof generateKeyPair>>;
let rsaPublicJwk: JWK;
let rsaPublicPem: string;
let settings: PeerJwtSettings;

function deps(overrides: Partial<JwtDeps> = {}): JwtDeps & { claimed: string[] } {
  const claimed: string[] = [];
  return {
    now,
    claimed,
    async claimJti(issuer, jti) {
      const key = `${issuer}|${jti}`;
      if (claimed.includes(key)) return false;
      claimed.push(key);
      return true;
    },
    keySets: {
      get() {
        throw new Error("no remote key set may be consulted for an inline key");
      },
    },
    ...overrides,
  };
}

function claims(overrides: Record<string, unknown> = {}) {
  return {
    iss: "https://peer.example",
    aud: "peergate",
    iat: nowSec - 10,
    exp: nowSec + 120,
    jti: `jti-${Math.random()}`,
    sub: "agent-1",
    ...overrides,
  };
}

async function signRs256(
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
  key = rsa.privateKey,
) {
  return new SignJWT(payload).setProtectedHeader({ alg: "RS256", typ: "JWT", ...header }).sign(key);
}

beforeAll(async () => {
  rsa = await generateKeyPair("RS256", { extractable: true });
  attacker = await generateKeyPair("RS256", { extractable: true });
  rsaPublicJwk = await exportJWK(rsa.publicKey);
  rsaPublicPem = await exportSPKI(rsa.publicKey);
  settings = {
    issuer: "https://peer.example",
    audience: "peergate",
    algorithms: ["RS256"],
    publicKey: rsaPublicJwk,
    maxAgeSeconds: 300,
    clockToleranceSeconds: 30,
  };
});

describe("peer JWT: accepted", () => {
  it("accepts a well-formed token signed by the configured JWK", async () => {
    const result = await verifyPeerJwt(await signRs256(claims()), settings, deps());
    expect(result).toMatchObject({ ok: true, payload: { sub: "agent-1" } });
  });

  it("accepts the same key given as PEM", async () => {
    const result = await verifyPeerJwt(
      await signRs256(claims()),
      { ...settings, publicKey: rsaPublicPem },
      deps(),
    );
    expect(result.ok).toBe(true);
  });
});

describe("peer JWT: a changed key", () => {
  it("verifies with the key configured now, not one imported before (keys are cached)", async () => {
    // Both keys used once first, so each is in the import cache.
    expect((await verifyPeerJwt(await signRs256(claims()), settings, deps())).ok).toBe(true);
    const rotated = { ...settings, publicKey: await exportJWK(attacker.publicKey) };
    const byNewKey = await signRs256(claims(), {}, attacker.privateKey);
    expect((await verifyPeerJwt(byNewKey, rotated, deps())).ok).toBe(true);
    // The caller's key was changed: a token of the old key is refused, and the other way round.
    expect(await verifyPeerJwt(await signRs256(claims()), rotated, deps())).toMatchObject({
      ok: false,
      reason: "bad-signature",
    });
    const oldPem = { ...settings, publicKey: rsaPublicPem };
    expect(
      await verifyPeerJwt(await signRs256(claims(), {}, attacker.privateKey), oldPem, deps()),
    ).toMatchObject({ ok: false, reason: "bad-signature" });
  });
});

describe("peer JWT: RFC 8725 attacks", () => {
  it.each(["none", "None", "NONE", "nOnE"])("refuses alg %j", async (alg) => {
    const token = `${b64({ alg, typ: "JWT" })}.${b64(claims())}.`;
    const result = await verifyPeerJwt(token, settings, deps());
    expect(result.ok).toBe(false);
  });

  it("refuses HS256 signed with the RSA public key as the HMAC secret (key confusion)", async () => {
    const secret = new TextEncoder().encode(rsaPublicPem);
    const token = await new SignJWT(claims()).setProtectedHeader({ alg: "HS256" }).sign(secret);
    const result = await verifyPeerJwt(token, settings, deps());
    expect(result).toMatchObject({ ok: false, reason: "algorithm-not-allowed" });
    // Even a misconfigured allowlist naming HS256 cannot let it through.
    const loose = { ...settings, algorithms: ["RS256", "HS256"] } as unknown as PeerJwtSettings;
    expect((await verifyPeerJwt(token, loose, deps())).ok).toBe(false);
  });

  it("refuses a token with its signature stripped", async () => {
    const [h, p] = (await signRs256(claims())).split(".");
    expect((await verifyPeerJwt(`${h}.${p}.`, settings, deps())).ok).toBe(false);
    expect((await verifyPeerJwt(`${h}.${p}`, settings, deps())).ok).toBe(false);
  });

  it("refuses a token signed by another key", async () => {
    const token = await signRs256(claims(), {}, attacker.privateKey);
    expect(await verifyPeerJwt(token, settings, deps())).toMatchObject({
      ok: false,
      reason: "bad-signature",
    });
  });

  it("refuses an algorithm outside the caller's allowlist even with the right key", async () => {
    const ps = await generateKeyPair("PS256");
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg: "PS256" })
      .sign(ps.privateKey);
    expect(await verifyPeerJwt(token, settings, deps())).toMatchObject({
      ok: false,
      reason: "algorithm-not-allowed",
    });
  });

  it.each([
    ["wrong aud", { aud: "someone-else" }],
    ["wrong iss", { iss: "https://evil.example" }],
    ["aud list without us", { aud: ["a", "b"] }],
  ])("refuses %s", async (_name, override) => {
    const result = await verifyPeerJwt(await signRs256(claims(override)), settings, deps());
    expect(result).toMatchObject({ ok: false, reason: "claim-invalid" });
  });

  it("refuses a wrong typ when the caller requires one", async () => {
    const token = await signRs256(claims(), { typ: "at+jwt" });
    const result = await verifyPeerJwt(token, { ...settings, typ: "JWT" }, deps());
    expect(result).toMatchObject({ ok: false, reason: "claim-invalid" });
  });

  it.each(["exp", "iat", "jti"])("refuses a token missing %s", async (claim) => {
    const payload: Record<string, unknown> = claims();
    delete payload[claim];
    const result = await verifyPeerJwt(await signRs256(payload), settings, deps());
    expect(result.ok).toBe(false);
  });

  it("refuses an expired token (beyond the clock tolerance)", async () => {
    const token = await signRs256(claims({ iat: nowSec - 200, exp: nowSec - 31 }));
    expect(await verifyPeerJwt(token, settings, deps())).toMatchObject({
      ok: false,
      reason: "expired",
    });
  });

  it("refuses a token issued in the future or not yet valid", async () => {
    const future = await signRs256(claims({ iat: nowSec + 3600, exp: nowSec + 3700 }));
    expect((await verifyPeerJwt(future, settings, deps())).ok).toBe(false);
    const nbf = await signRs256(claims({ nbf: nowSec + 600 }));
    expect((await verifyPeerJwt(nbf, settings, deps())).ok).toBe(false);
  });

  it("refuses a token older than the maximum age", async () => {
    const token = await signRs256(claims({ iat: nowSec - 1000, exp: nowSec + 60 }));
    expect((await verifyPeerJwt(token, settings, deps())).ok).toBe(false);
  });

  it("refuses a token whose lifetime is longer than the maximum age", async () => {
    const token = await signRs256(claims({ iat: nowSec - 5, exp: nowSec + 86_400 }));
    expect(await verifyPeerJwt(token, settings, deps())).toMatchObject({
      ok: false,
      reason: "lifetime-too-long",
    });
  });

  it("caps a configured clock tolerance at 60 s", async () => {
    const token = await signRs256(claims({ iat: nowSec - 200, exp: nowSec - 90 }));
    const lax = { ...settings, clockToleranceSeconds: 3600 };
    expect(await verifyPeerJwt(token, lax, deps())).toMatchObject({ ok: false, reason: "expired" });
  });

  it("refuses a replayed jti", async () => {
    const d = deps();
    const token = await signRs256(claims({ jti: "once" }));
    expect((await verifyPeerJwt(token, settings, d)).ok).toBe(true);
    expect(await verifyPeerJwt(token, settings, d)).toMatchObject({
      ok: false,
      reason: "replayed",
    });
  });

  it("never claims the jti of a token that failed verification", async () => {
    const d = deps();
    await verifyPeerJwt(
      await signRs256(claims({ jti: "x" }), {}, attacker.privateKey),
      settings,
      d,
    );
    expect(d.claimed).toEqual([]);
  });

  it("ignores jku, x5u and an embedded jwk: nothing is fetched and the attacker key is not trusted", async () => {
    const fetchSpy = vi.spyOn(globalThis, "fetch");
    const attackerJwk = await exportJWK(attacker.publicKey);
    const token = await signRs256(
      claims(),
      {
        jku: "http://127.0.0.1:1/jwks.json",
        x5u: "http://127.0.0.1:1/cert.pem",
        jwk: attackerJwk,
        kid: "attacker",
      },
      attacker.privateKey,
    );
    expect(await verifyPeerJwt(token, settings, deps())).toMatchObject({
      ok: false,
      reason: "bad-signature",
    });
    expect(fetchSpy).not.toHaveBeenCalled();
    fetchSpy.mockRestore();
  });

  it.each(["../../../../etc/passwd", "' OR 1=1 --", "x".repeat(5000), "\u0000"])(
    "treats a hostile kid %# as inert text",
    async (kid) => {
      const good = await signRs256(claims(), { kid });
      expect((await verifyPeerJwt(good, settings, deps())).ok).toBe(true);
      const bad = await signRs256(claims(), { kid }, attacker.privateKey);
      expect((await verifyPeerJwt(bad, settings, deps())).ok).toBe(false);
    },
  );

  it.each(["", "not.a.jwt", "a.b.c.d.e", "....", "eyJ.eyJ.sig"])(
    "refuses the malformed token %j without throwing",
    async (token) => {
      expect((await verifyPeerJwt(token, settings, deps())).ok).toBe(false);
    },
  );
});

describe("peer JWT: JWKS URL", () => {
  let server: ReturnType<typeof createServer>;
  let url: string;
  let hits = 0;

  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits += 1;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [{ ...rsaPublicJwk, kid: "k1", alg: "RS256", use: "sig" }] }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("verifies against the configured key set and caches it across requests", async () => {
    const jwks = { ...settings, publicKey: undefined, jwksUrl: url };
    const d = deps({ keySets: createJwksCache() });
    for (let i = 0; i < 5; i++) {
      const token = await signRs256(claims(), { kid: "k1" });
      expect((await verifyPeerJwt(token, jwks, d)).ok).toBe(true);
    }
    expect(hits).toBe(1);
  });

  it("does not refetch for an unknown kid within the cooldown", async () => {
    const jwks = { ...settings, publicKey: undefined, jwksUrl: url };
    const d = deps({ keySets: createJwksCache({ cooldownMs: 60_000 }) });
    expect((await verifyPeerJwt(await signRs256(claims(), { kid: "k1" }), jwks, d)).ok).toBe(true);
    const before = hits;
    for (let i = 0; i < 5; i++) {
      const token = await signRs256(claims(), { kid: `unknown-${i}` }, attacker.privateKey);
      expect((await verifyPeerJwt(token, jwks, d)).ok).toBe(false);
    }
    expect(hits - before).toBeLessThanOrEqual(1);
  });
});
