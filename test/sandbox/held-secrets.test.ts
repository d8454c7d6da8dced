// What the server's redactor knows: every credential shape peergate generates (whatever the
// value, so secrets issued after start or by another instance), and the plaintext of every sealed
// webhook secret in the database, opened at start. The attack through the real server is in
// secrets.security.test.ts.
import { eq } from "drizzle-orm";
import { expect, it } from "vitest";
import { parseSecretKey } from "../../src/auth/sealed-secrets.ts";
import { generateSecret, secretPrefixes } from "../../src/auth/secrets.ts";
import { callers, credentials } from "../../src/db/schema.ts";
import { createRedactor, redactedMarker } from "../../src/sandbox/redact.ts";
import { heldSecrets, openSealedWebhookSecrets } from "../../src/services/held-secrets.ts";
import { issueCredential } from "../../src/services/issue-credential.ts";
import { describeEachDatabase } from "../support/databases.ts";

it("replaces every kind of generated credential by its shape, and only those", () => {
  const redactor = createRedactor([], { credentialShapes: true });
  for (const kind of Object.keys(secretPrefixes) as (keyof typeof secretPrefixes)[]) {
    const secret = generateSecret(kind);
    const out = redactor.redact(`a ${secret} b x${secret}y\n`);
    expect(out).not.toContain(secret);
    expect(out).toBe(`a ${redactedMarker} b x${redactedMarker}y\n`);
  }
  // Lower-case identifiers of that length are not credentials.
  const identifier = "pg_stat_statements_reset_every_hour_of_the_day_x";
  expect(redactor.redact(identifier)).toBe(identifier);
  // Without the option (a declared tool's own redactor), shapes are left alone.
  const secret = generateSecret("githubSecret");
  expect(createRedactor([]).redact(secret)).toBe(secret);
});

it("replaces the first part of a generated credential where output was cut", () => {
  const redactor = createRedactor([], { credentialShapes: true });
  const secret = generateSecret("operatorToken");
  expect(redactor.redact(`token ${secret.slice(0, 20)}`, { cut: true })).toBe(
    `token ${redactedMarker}`,
  );
  expect(redactor.redact(`token ${secret.slice(0, 20)}`)).toBe(`token ${secret.slice(0, 20)}`);
});

describeEachDatabase("the secrets the server holds", (t) => {
  const db = () => t.db;
  const key = parseSecretKey("c".repeat(64));
  if (key === undefined) throw new Error("key");
  const ctx = { secretKey: key, publicUrl: "http://127.0.0.1:1" };

  it("opens every sealed webhook secret, revoked ones too, and lists the secret key's encodings", async () => {
    const [caller] = await db()
      .insert(callers)
      .values({ name: "gh", kind: "github", tier: "public" })
      .returning();
    if (!caller) throw new Error("caller");
    const first = await db().transaction((tx) => issueCredential(tx, ctx, caller));
    const second = await db().transaction((tx) => issueCredential(tx, ctx, caller));
    // Revoked: still a secret, still redacted.
    await db()
      .update(credentials)
      .set({ revokedAt: new Date() })
      .where(eq(credentials.id, first.id));

    const opened = await openSealedWebhookSecrets(db(), key);
    expect(opened.sort()).toEqual([first.secret, second.secret].sort());

    const held = await heldSecrets({
      db: db(),
      secretKey: key,
      known: ["model-key-123", undefined],
    });
    expect(held).toEqual(
      expect.arrayContaining([
        "model-key-123",
        first.secret,
        second.secret,
        key.bytes.toString("hex"),
        key.bytes.toString("base64url"),
      ]),
    );
    // A key that did not seal them opens nothing (and fails nothing).
    const other = parseSecretKey("d".repeat(64));
    if (other === undefined) throw new Error("key");
    expect(await openSealedWebhookSecrets(db(), other)).toEqual([]);
  });
});
