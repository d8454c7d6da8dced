// Peer authentication against the database: tokens of every state, JWTs with jti replay held in
// Postgres, and revocation seen by a second instance within milliseconds.

import { sql } from "drizzle-orm";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, beforeEach, expect, it } from "vitest";
import { UnauthenticatedError } from "../../src/errors.ts";
import { addCaller } from "../../src/services/add-caller.ts";
import { authenticatePeer } from "../../src/services/authenticate-caller.ts";
import { openCallerDirectory } from "../../src/services/caller-directory.ts";
import { revokeCaller } from "../../src/services/revoke-caller.ts";
import { rotateCredential } from "../../src/services/rotate-credential.ts";
import { createTestApp, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually, GiveUpError } from "../support/eventually.ts";

const failure = { surface: "a2a" as const, source: "test" };

async function reason(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof UnauthenticatedError) return error.reason;
    throw error;
  }
  throw new Error("expected a refusal");
}

describeEachDatabase("peer authentication", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database);
  });
  afterEach(() => app.close());

  /** A caller with its static token (every caller here has one: none is a JWT peer). */
  const add = async (input: unknown) => {
    const added = await addCaller({ services: app.services, input, actor: "admin" });
    if (!added.credential) throw new Error("expected a static token");
    return { ...added, credential: added.credential };
  };

  it("accepts a peer's token and refuses it once rotated out or revoked", async () => {
    const { credential } = await add({ name: "alice", kind: "peer" });
    const ok = await authenticatePeer(app.auth, `Bearer ${credential.secret}`, failure);
    expect(ok).toMatchObject({ caller: { name: "alice" }, method: "token" });
    const rotated = await rotateCredential({
      services: app.services,
      name: "alice",
      input: {},
      actor: "admin",
    });
    expect(await reason(authenticatePeer(app.auth, `Bearer ${credential.secret}`, failure))).toBe(
      "credential-revoked",
    );
    expect(
      (await authenticatePeer(app.auth, `Bearer ${rotated.credential.secret}`, failure)).caller
        .name,
    ).toBe("alice");
    await revokeCaller({ services: app.services, name: "alice", actor: "admin" });
    expect(
      await reason(authenticatePeer(app.auth, `Bearer ${rotated.credential.secret}`, failure)),
    ).toBe("credential-revoked");
  });

  it("keeps an old credential only for the grace period", async () => {
    let now = new Date("2026-06-01T00:00:00Z");
    await app.close();
    app = await createTestApp(db.database, { now: () => now });
    const { credential } = await add({ name: "alice", kind: "peer" });
    await rotateCredential({
      services: app.services,
      name: "alice",
      input: { graceSeconds: 60 },
      actor: "admin",
    });
    expect(
      (await authenticatePeer(app.auth, `Bearer ${credential.secret}`, failure)).caller.name,
    ).toBe("alice");
    now = new Date("2026-06-01T00:01:01Z");
    expect(await reason(authenticatePeer(app.auth, `Bearer ${credential.secret}`, failure))).toBe(
      "credential-expired",
    );
  });

  it("refuses tokens of another kind and unknown tokens, without saying which", async () => {
    const hook = await add({ name: "ci", kind: "webhook", promptTemplate: "x {{payload}}" });
    expect(
      await reason(authenticatePeer(app.auth, `Bearer ${hook.credential.secret}`, failure)),
    ).toBe("wrong-kind:webhook");
    expect(await reason(authenticatePeer(app.auth, `Bearer pg_${"A".repeat(43)}`, failure))).toBe(
      "unknown-secret",
    );
    expect(await reason(authenticatePeer(app.auth, `Bearer ${app.adminToken}`, failure))).toBe(
      "unknown-secret",
    );
  });

  it("accepts a peer's JWT once: the jti is claimed in Postgres", async () => {
    const keys = await generateKeyPair("ES256", { extractable: true });
    // A JWT peer: no static token to take (the `add` helper insists on one).
    await addCaller({
      services: app.services,
      actor: "admin",
      input: {
        name: "agent-b",
        kind: "peer",
        jwt: {
          issuer: "https://b.example",
          audience: "peergate",
          algorithms: ["ES256"],
          jwk: await exportJWK(keys.publicKey),
        },
      },
    });
    const token = await new SignJWT({ jti: "j-1" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://b.example")
      .setAudience("peergate")
      .setIssuedAt()
      .setExpirationTime("2m")
      .sign(keys.privateKey);
    const ok = await authenticatePeer(app.auth, `Bearer ${token}`, failure);
    expect(ok).toMatchObject({ caller: { name: "agent-b" }, method: "jwt", credentialId: null });
    expect(await reason(authenticatePeer(app.auth, `Bearer ${token}`, failure))).toBe(
      "jwt-replayed",
    );
    const stranger = await new SignJWT({ jti: "j-2" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://unknown.example")
      .setAudience("peergate")
      .setIssuedAt()
      .setExpirationTime("2m")
      .sign(keys.privateKey);
    expect(await reason(authenticatePeer(app.auth, `Bearer ${stranger}`, failure))).toBe(
      "jwt-unknown-issuer",
    );
    await revokeCaller({ services: app.services, name: "agent-b", actor: "admin" });
    const fresh = await new SignJWT({ jti: "j-3" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://b.example")
      .setAudience("peergate")
      .setIssuedAt()
      .setExpirationTime("2m")
      .sign(keys.privateKey);
    expect(await reason(authenticatePeer(app.auth, `Bearer ${fresh}`, failure))).toBe(
      "caller-revoked",
    );
  });

  it("stops trusting its cache when its notifications stop, and reads the database instead", async () => {
    const { credential, caller } = await add({ name: "alice", kind: "peer" });
    // The directory's clock is the test's: its notifications go quiet when the clock says so.
    let now = 0;
    const quiet = await openCallerDirectory({
      database: db.database,
      logger: app.services.logger,
      heartbeatMs: 60_000,
      staleAfterMs: 30,
      clock: () => now,
    });
    try {
      const hash = (await import("../../src/auth/secrets.ts")).hashSecret(credential.secret);
      expect((await quiet.findByCredentialHash(hash))?.caller.revokedAt).toBeNull();
      now += 60;
      expect(quiet.trusted).toBe(false);
      // A revocation this directory never hears about (written without NOTIFY)...
      await db.db.execute(
        sql`update credentials set revoked_at = now() where caller_id = ${caller.id}`,
      );
      // ...is still seen, because an untrusted cache is not used.
      expect((await quiet.findByCredentialHash(hash))?.credential.revokedAt).not.toBeNull();
    } finally {
      await quiet.close();
    }
  });

  it.runIf(db.kind === "postgres")(
    "a revocation on instance A is refused on instance B, which heard of it",
    async () => {
      const other = await db.openSecondConnection();
      const b = await createTestApp(other);
      try {
        const { credential } = await add({ name: "alice", kind: "peer" });
        const header = `Bearer ${credential.secret}`;
        // Warm B's cache (it is used once B has heard its own heartbeat).
        await eventually("B's directory to hear its own heartbeat", () => b.directory.trusted);
        // A read that overlaps any caller event (here: alice's own "created") is not cached.
        for (let i = 0; i < 50 && b.directory.size === 0; i++) {
          expect((await authenticatePeer(b.auth, header, failure)).caller.name).toBe("alice");
        }
        expect(b.directory.size).toBe(1);
        await revokeCaller({ services: app.services, name: "alice", actor: "admin" });
        // B hears of it without being asked again through the database (how fast: bench/auth.ts,
        // "revoke committed on A → first 401 from B").
        await eventually("B to refuse the revoked credential", async () => {
          try {
            await authenticatePeer(b.auth, header, failure);
            return false;
          } catch (error) {
            if (!(error instanceof UnauthenticatedError)) throw new GiveUpError(String(error));
            return true;
          }
        });
        // Whatever B cached since holds the revoked state: it keeps refusing.
        expect(await reason(authenticatePeer(b.auth, header, failure))).toBe("credential-revoked");
      } finally {
        await b.close();
      }
    },
  );
});
