// `peergate migrate` and `peergate audit verify` end to end, through runCli with a fake io, on
// the embedded database in a temp data dir and (when available) on a real PostgreSQL.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditVerifyCommand } from "../../src/cli/audit-verify.ts";
import type { Env } from "../../src/cli/command.ts";
import { migrateCommand } from "../../src/cli/migrate.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { appendAuditEvent } from "../../src/db/audit.ts";
import { type Database, openDatabase } from "../../src/db/client.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const commands = [migrateCommand, auditVerifyCommand];

async function peergate(env: Env, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(commands, argv, {
    env,
    cwd: os.tmpdir(),
    io: { out: (t) => out.push(t), err: (t) => err.push(t) },
    signal: new AbortController().signal,
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

async function appendThree(database: Database): Promise<void> {
  for (const kind of ["caller.created", "auth.failed", "caller.revoked"] as const) {
    await appendAuditEvent(database.db, { actor: "admin", kind, subject: "caller:x", data: {} });
  }
}

async function editEvent(database: Database, seq: number): Promise<void> {
  await database.db.transaction(async (tx) => {
    await tx.execute(sql`alter table audit_events disable trigger user`);
    await tx.execute(
      sql`update audit_events set actor = 'mallory'
           where id = (select event_id from audit_chain where seq = ${seq})`,
    );
    await tx.execute(sql`alter table audit_events enable trigger user`);
  });
}

describe("peergate migrate / audit verify on the embedded database", () => {
  let root: string;
  let env: Env;
  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "peergate-cli-"));
    env = { PEERGATE_DATA_DIR: path.join(root, "data") };
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it("audit verify refuses an unmigrated database", async () => {
    const result = await peergate(env, "audit", "verify");
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/not migrated.*peergate migrate/);
  });

  it("migrate applies every migration, then reports the database up to date", async () => {
    const first = await peergate(env, "migrate");
    expect(first).toMatchObject({ code: 0, err: "" });
    expect(first.out).toMatch(/embedded PGlite in .*data\/pg: applied \d+ migrations/);
    expect(first.out).toContain("0000_init");
    const again = await peergate(env, "migrate", "--json");
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out)).toMatchObject({ applied: 0, migrations: [] });
  });

  it("audit verify reports an intact chain", async () => {
    const database = await openDatabase({ kind: "pglite", dataDir: path.join(root, "data", "pg") });
    await appendThree(database);
    await database.close();
    const result = await peergate(env, "audit", "verify");
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/^audit chain intact: 3 events \(last hash [0-9a-f]{64}\)$/);
  });

  it("audit verify exits 1 and names the first broken event of a tampered chain", async () => {
    const database = await openDatabase({ kind: "pglite", dataDir: path.join(root, "data", "pg") });
    await editEvent(database, 2);
    await database.close();
    const result = await peergate(env, "audit", "verify");
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/audit chain BROKEN at event 2: content does not match/);
    const json = await peergate(env, "audit", "verify", "--json");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, seq: 2, reason: "content" });
  });

  it("prints help and refuses stray arguments", async () => {
    expect((await peergate(env, "audit", "verify", "--help")).out).toMatch(/--json/);
    expect((await peergate(env, "migrate", "now")).code).toBe(2);
  });
});

describe.skipIf(postgresSkipReason() !== undefined)(
  "peergate migrate / audit verify with DATABASE_URL",
  () => {
    it("migrates, verifies, and reports tampering", async () => {
      const created = await createPostgresTestDatabase();
      const env = { DATABASE_URL: created.url, PEERGATE_DATA_DIR: "/nonexistent/unused" };
      try {
        const migrated = await peergate(env, "migrate");
        expect(migrated.code).toBe(0);
        expect(migrated.out).toMatch(/PostgreSQL at 127\.0\.0\.1:\d+\/peergate_test_\w+: applied/);
        expect(migrated.out).not.toContain("postgres@");

        const database = await openDatabase({ kind: "postgres", url: created.url });
        try {
          await appendThree(database);
          expect((await peergate(env, "audit", "verify")).out).toMatch(/intact: 3 events/);
          await editEvent(database, 3);
        } finally {
          await database.close();
        }
        const broken = await peergate(env, "audit", "verify");
        expect(broken.code).toBe(1);
        expect(broken.err).toMatch(/BROKEN at event 3/);
      } finally {
        await created.drop();
      }
    });
  },
);
