// A JWT peer as docs/operating.md sets it up (issue 15, item 8): `callers add --kind peer
// --jwt-issuer … --jwt-jwk-file …` with no --jwt-audience gives the audience `peergate`, a token
// minted for it is accepted once by the real server and refused when replayed, a token minted
// for another audience is refused, and the next token (a new jti) is accepted. Such a peer gets no
// static bearer token (issue 27): the key is its one credential, so no opaque token can stand in
// for it, at creation, rotation or restore.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

const issuer = "https://partner.example";

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`a JWT peer (${variant.kind})`, () => {
    let s: CliServer;
    let key: Awaited<ReturnType<typeof generateKeyPair>>;
    let jti = 0;
    let added: { credential: unknown; caller: { name: string } };

    const mint = (aud: string) => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, aud, iat: now - 5, exp: now + 120, jti: `t-${jti++}` })
        .setProtectedHeader({ alg: "ES256", typ: "JWT" })
        .sign(key.privateKey);
    };
    const listTasks = async (token: string) => {
      const res = await fetch(`${s.server.url}/a2a`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
      });
      return { status: res.status, text: await res.text() };
    };

    beforeAll(async () => {
      s = await startCliServer(variant.kind);
      key = await generateKeyPair("ES256", { extractable: true });
      const jwkFile = path.join(s.dir, "partner.jwk.json");
      await writeFile(jwkFile, JSON.stringify(await exportJWK(key.publicKey)));
      added = await s.json(
        "callers",
        "add",
        "partner",
        "--kind",
        "peer",
        "--jwt-issuer",
        issuer,
        "--jwt-jwk-file",
        jwkFile,
      );
    });
    afterAll(async () => {
      await s?.stop();
    });

    it("the default audience is peergate", async () => {
      const shown = await s.json("callers", "show", "partner");
      expect(JSON.stringify(shown)).toContain('"audience":"peergate"');
    });

    it("accepts a token once and refuses its replay", async () => {
      const token = await mint("peergate");
      const first = await listTasks(token);
      expect(first.status, first.text).toBe(200);
      expect(JSON.parse(first.text)).toMatchObject({ result: { tasks: [] } });
      const replay = await listTasks(token);
      expect(replay.status).toBe(401);
      expect(replay.text).not.toContain("jsonrpc");
      // A new token (a new jti) is accepted: a peer mints one per request.
      expect((await listTasks(await mint("peergate"))).status).toBe(200);
    });

    it("gets no static bearer token, and no token of the caller's kind authenticates it", async () => {
      expect(added.credential).toBeNull();
      const shown = await s.json("callers", "show", "partner");
      expect(shown.caller.credentials).toEqual([]);
      // A bearer shaped like peergate's opaque tokens is refused like any unknown one.
      const forged = await listTasks(`pg_${"A".repeat(43)}`);
      expect(forged.status).toBe(401);
      // Without --json the CLI says why there is nothing to copy.
      const text = await s.cli(
        "callers",
        "add",
        "partner-2",
        "--kind",
        "peer",
        "--jwt-issuer",
        issuer,
        "--jwt-jwk-file",
        path.join(s.dir, "partner.jwk.json"),
      );
      expect(text.code, text.err).toBe(0);
      expect(text.out).toContain("No static token");
      expect(text.out).not.toMatch(/pg_[A-Za-z0-9_-]{20,}/);
    });

    it("refuses to rotate in a static token, naming how to change the key", async () => {
      const r = await s.cli("callers", "rotate", "partner");
      expect(r.code).not.toBe(0);
      expect(r.err).toContain("has no static token");
      expect(r.err).toContain("jwt");
    });

    it("comes back from a restore with its key only", async () => {
      await s.json("callers", "revoke", "partner-2");
      const restored = await s.cli(
        "callers",
        "restore",
        "partner-2",
        "--tier",
        "public",
        "--operator-token-file",
        s.operatorFile,
        "--json",
      );
      expect(restored.code, restored.err).toBe(0);
      expect(JSON.parse(restored.out).credential).toBeNull();
    });

    it("refuses a token minted for another audience", async () => {
      const other = await listTasks(await mint("https://another-service.example"));
      expect(other.status).toBe(401);
    });
  });
}
