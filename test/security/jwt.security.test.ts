// RFC 8725 attacks end to end: forged and misused JWTs sent to POST /a2a of the real server, as a
// peer would send them. test/auth/jwt.security.test.ts proves each rule on verifyPeerJwt itself;
// this proves the route refuses the main cases with the one 401 — no JSON-RPC answer, nothing
// fetched from a URL the token names — and that a JWT is no credential anywhere else.
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefused, recordCase } from "./cases.ts";
import {
  compareTiming,
  describeTiming,
  type Reply,
  readStateFingerprint,
  type SecurityServer,
  send,
  startSecurityServer,
  withoutRequestId,
} from "./support.ts";

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

let s: SecurityServer;
let peerKey: KeyPair;
let attackerKey: KeyPair;
let jwksPeerKey: KeyPair;
let peerPublicJwk: JWK;
let peerPublicPem: string;
/** A key server on loopback: the JWKS the JWKS-URL peer is configured with, and an attacker's. */
let keyServer: Server;
let keyServerUrl: string;
const keyServerHits: string[] = [];
let webhookToken: string;

const issuer = "https://peer.example";
const jwksIssuer = "https://jwks-peer.example";
const audience = "peergate";
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
const nowSec = () => Math.floor(Date.now() / 1000);
let jtiCounter = 0;

function claims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: issuer,
    aud: audience,
    iat: nowSec() - 5,
    exp: nowSec() + 120,
    jti: `jti-${Date.now()}-${jtiCounter++}`,
    ...overrides,
  };
}

function sign(
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
  key: Parameters<SignJWT["sign"]>[0] = peerKey.privateKey,
  alg = "RS256",
): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg, typ: "JWT", ...header }).sign(key);
}

const listTasks = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} });

function a2a(token: string): Promise<Reply> {
  return send(s.port, {
    method: "POST",
    path: "/a2a",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "a2a-version": "1.0",
    },
    body: listTasks,
  });
}

beforeAll(async () => {
  peerKey = await generateKeyPair("RS256", { extractable: true });
  attackerKey = await generateKeyPair("RS256", { extractable: true });
  jwksPeerKey = await generateKeyPair("ES256", { extractable: true });
  peerPublicJwk = await exportJWK(peerKey.publicKey);
  peerPublicPem = await exportSPKI(peerKey.publicKey);
  const attackerJwks = { keys: [{ ...(await exportJWK(attackerKey.publicKey)), kid: "evil" }] };
  const peerJwks = { keys: [{ ...(await exportJWK(jwksPeerKey.publicKey)), kid: "k1" }] };

  keyServer = createServer((req, res) => {
    keyServerHits.push(req.url ?? "");
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(req.url === "/peer.json" ? peerJwks : attackerJwks));
  });
  keyServer.listen(0, "127.0.0.1");
  await once(keyServer, "listening");
  keyServerUrl = `http://127.0.0.1:${(keyServer.address() as AddressInfo).port}`;

  s = await startSecurityServer();
  const add = async (body: Record<string, unknown>) => {
    const res = await s.admin("POST", "/callers", body);
    if (res.status !== 201) throw new Error(`${body.name}: ${res.text}`);
    // A JWT peer has no static token (null): it authenticates with JWTs only.
    return (res.json.credential?.secret as string | undefined) ?? "";
  };
  await add({
    name: "jwt-peer",
    kind: "peer",
    jwt: { issuer, audience, algorithms: ["RS256"], jwk: peerPublicJwk, maxAgeSeconds: 300 },
  });
  await add({
    name: "jwks-peer",
    kind: "peer",
    jwt: {
      issuer: jwksIssuer,
      audience,
      algorithms: ["ES256"],
      jwksUrl: `${keyServerUrl}/peer.json`,
      maxAgeSeconds: 300,
    },
  });
  await add({
    name: "jwt-revoked",
    kind: "peer",
    jwt: {
      issuer: "https://revoked.example",
      audience,
      algorithms: ["RS256"],
      jwk: peerPublicJwk,
      maxAgeSeconds: 300,
    },
  });
  await s.admin("POST", "/callers/jwt-revoked/revoke", {});
  webhookToken = await add({ name: "ci", kind: "webhook", promptTemplate: "CI {{payload}}" });
}, 60_000);

afterAll(async () => {
  await s?.stop();
  keyServer?.close();
});

const bodies = new Set<string>();
function refused(name: string, reply: Reply) {
  const admitted = reply.status !== 401;
  expectRefused("jwt", `${name} (→ ${reply.status})`, admitted);
  expect(reply.headers["www-authenticate"]).toBe('Bearer realm="peergate"');
  expect(reply.text).not.toContain("jsonrpc");
  bodies.add(withoutRequestId(reply.text));
}

describe("JWTs on POST /a2a", () => {
  it("accepts a well-formed token once, by inline key and by JWKS URL", async () => {
    const token = await sign(claims());
    const ok = await a2a(token);
    expect(ok.status, ok.text).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ result: { tasks: [] } });
    refused("the same token replayed (jti)", await a2a(token));

    const viaJwks = await sign(
      claims({ iss: jwksIssuer }),
      { kid: "k1" },
      jwksPeerKey.privateKey,
      "ES256",
    );
    expect((await a2a(viaJwks)).status).toBe(200);
    refused("a JWKS-verified token replayed", await a2a(viaJwks));
  });

  it("refuses every forged or misused token with the one 401, and fetches nothing the token names", async () => {
    const before = await readStateFingerprint(s.server);
    const hitsBefore = keyServerHits.length;
    const attackerJwk = await exportJWK(attackerKey.publicKey);
    const attacks: [string, () => Promise<string>][] = [
      ...["none", "None", "NONE", "nOnE"].map((alg): [string, () => Promise<string>] => [
        `alg ${alg}, no signature`,
        async () => `${b64({ alg, typ: "JWT" })}.${b64(claims())}.`,
      ]),
      [
        "alg none with the real signature kept",
        async () => {
          const [, p, sig] = (await sign(claims())).split(".");
          return `${b64({ alg: "none" })}.${p}.${sig}`;
        },
      ],
      [
        "HS256 keyed with the peer's public key PEM (key confusion)",
        () => sign(claims(), {}, new TextEncoder().encode(peerPublicPem), "HS256"),
      ],
      [
        "HS256 keyed with the public JWK's modulus",
        () => sign(claims(), {}, new TextEncoder().encode(String(peerPublicJwk.n)), "HS256"),
      ],
      [
        "signature stripped",
        async () => {
          const [h, p] = (await sign(claims())).split(".");
          return `${h}.${p}.`;
        },
      ],
      [
        "signature of another token",
        async () => {
          const [h, p] = (await sign(claims())).split(".");
          const [, , otherSig] = (await sign(claims({ sub: "x" }))).split(".");
          return `${h}.${p}.${otherSig}`;
        },
      ],
      [
        "payload swapped under a valid signature",
        async () => {
          const [h, , sig] = (await sign(claims())).split(".");
          return `${h}.${b64(claims({ sub: "admin" }))}.${sig}`;
        },
      ],
      ["signed by the attacker's key", () => sign(claims(), {}, attackerKey.privateKey)],
      [
        "attacker's key embedded as a jwk header",
        () => sign(claims(), { jwk: attackerJwk }, attackerKey.privateKey),
      ],
      [
        "attacker's JWKS named by a jku header",
        () =>
          sign(
            claims(),
            { jku: `${keyServerUrl}/attacker.json`, kid: "evil" },
            attackerKey.privateKey,
          ),
      ],
      [
        "attacker's certificate named by an x5u header",
        () => sign(claims(), { x5u: `${keyServerUrl}/attacker.pem` }, attackerKey.privateKey),
      ],
      [
        "jku on the JWKS peer's token, attacker-signed",
        () =>
          sign(
            claims({ iss: jwksIssuer }),
            { jku: `${keyServerUrl}/attacker.json`, kid: "evil" },
            attackerKey.privateKey,
            "RS256",
          ),
      ],
      [
        "hostile kid (path traversal), attacker-signed",
        () => sign(claims(), { kid: "../../../../etc/passwd" }, attackerKey.privateKey),
      ],
      [
        "hostile kid (SQL), attacker-signed",
        () => sign(claims(), { kid: "' OR '1'='1" }, attackerKey.privateKey),
      ],
      [
        "algorithm outside the peer's allowlist (PS256)",
        async () => {
          const ps = await generateKeyPair("PS256");
          return sign(claims(), {}, ps.privateKey, "PS256");
        },
      ],
      ["wrong audience", () => sign(claims({ aud: "someone-else" }))],
      ["audience list without us", () => sign(claims({ aud: ["a", "b"] }))],
      ["unknown issuer", () => sign(claims({ iss: "https://evil.example" }))],
      ["issuer of another peer", () => sign(claims({ iss: jwksIssuer }))],
      ["revoked peer's issuer", () => sign(claims({ iss: "https://revoked.example" }))],
      ["no issuer", () => sign(claims({ iss: undefined }))],
      ["missing exp", () => sign(claims({ exp: undefined }))],
      ["missing iat", () => sign(claims({ iat: undefined }))],
      ["missing jti", () => sign(claims({ jti: undefined }))],
      ["expired", () => sign(claims({ iat: nowSec() - 250, exp: nowSec() - 120 }))],
      ["issued in the future", () => sign(claims({ iat: nowSec() + 3600, exp: nowSec() + 3700 }))],
      ["not valid yet (nbf)", () => sign(claims({ nbf: nowSec() + 600 }))],
      [
        "older than the maximum age",
        () => sign(claims({ iat: nowSec() - 1000, exp: nowSec() + 60 })),
      ],
      ["lifetime longer than the maximum age", () => sign(claims({ exp: nowSec() + 86_400 }))],
      ["exp as a string", () => sign(claims({ exp: String(nowSec() + 60) }))],
      [
        "header that is not JSON",
        async () => `${Buffer.from("{alg").toString("base64url")}.${b64(claims())}.AAAA`,
      ],
      [
        "payload that is not JSON",
        async () => `${b64({ alg: "RS256" })}.${Buffer.from("nope").toString("base64url")}.AAAA`,
      ],
      ["four segments", async () => `${await sign(claims())}.AAAA`],
    ];
    for (const [name, make] of attacks) refused(name, await a2a(await make()));
    // The key server saw only what peergate was configured to fetch.
    const fetched = keyServerHits.slice(hitsBefore);
    recordCase(
      "jwt",
      `keys fetched from token headers (${fetched.join(", ") || "none"})`,
      fetched.some((u) => u !== "/peer.json"),
    );
    expect(fetched.filter((u) => u !== "/peer.json")).toEqual([]);
    expect(bodies.size).toBe(1);
    expect(await readStateFingerprint(s.server)).toBe(before);
  });

  it("is no credential on any other route", async () => {
    const token = await sign(claims());
    const elsewhere = [
      send(s.port, {
        method: "GET",
        path: "/admin/v1/callers",
        headers: { authorization: `Bearer ${token}` },
      }),
      send(s.port, {
        method: "POST",
        path: "/webhooks/ci",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: '{"n":1}',
      }),
      send(s.port, {
        method: "POST",
        path: `/webhooks/ifttt/jwt-peer/${token}`,
        headers: { "content-type": "text/plain" },
        body: "x",
      }),
    ];
    const names = ["admin API", "generic webhook", "IFTTT path"];
    for (const [i, reply] of (await Promise.all(elsewhere)).entries()) {
      expectRefused(
        "jwt",
        `a peer's valid JWT on the ${names[i]} (→ ${reply.status})`,
        reply.status !== 401,
      );
    }
    // A webhook token is not a peer credential either, in JWT clothing or not.
    refused("a webhook token on /a2a", await a2a(webhookToken));
  });
});

describe("timing", () => {
  it("an unknown issuer takes as long as a known issuer with a bad signature", async () => {
    // Signed by the attacker: the known issuer's key check fails; the unknown issuer has none.
    const knownToken = await sign(claims({ jti: "t-known" }), {}, attackerKey.privateKey);
    const unknownToken = await sign(
      claims({ iss: "https://nobody.example", jti: "t-unknown" }),
      {},
      attackerKey.privateKey,
    );
    const t = await compareTiming(
      () => a2a(knownToken),
      () => a2a(unknownToken),
    );
    const admitted = Math.abs(t.shift) >= t.bound;
    recordCase("auth", `timing: JWT issuer (${describeTiming(t)})`, admitted);
    expect(Math.abs(t.shift), describeTiming(t)).toBeLessThan(t.bound);
  });
});
