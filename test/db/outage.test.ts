// Readiness must fail closed while the database is gone or hung, and come back by itself once it
// returns. These tests crash and freeze a PostgreSQL of their own, never the shared one.

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase, selectRows } from "../../src/db/client.ts";
import { migrateDatabase, migrationStatus } from "../../src/db/migrate.ts";
import { UnavailableError } from "../../src/errors.ts";
import { asUnavailableError } from "../../src/services/db-errors.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { type PostgresCluster, startPostgresCluster } from "../support/postgres-cluster.ts";

async function expectUnavailableWithin(work: Promise<unknown>, maxMs: number): Promise<void> {
  const started = performance.now();
  await expect(work).rejects.toBeInstanceOf(UnavailableError);
  expect(performance.now() - started).toBeLessThan(maxMs);
}

async function eventuallyPing(database: Database, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      await database.ping(500);
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe.skipIf(postgresSkipReason() !== undefined)("a PostgreSQL outage", () => {
  let cluster: PostgresCluster;
  let database: Database;

  beforeAll(async () => {
    cluster = await startPostgresCluster({ crashSafe: true });
    database = await openDatabase({ kind: "postgres", url: cluster.adminUrl });
    await migrateDatabase(database);
  });

  afterAll(async () => {
    cluster?.resume();
    await database?.close();
    cluster?.remove();
  });

  it("fails ping and migration status while the server is down, and recovers after", async () => {
    await database.ping();
    cluster.crash();
    await expectUnavailableWithin(database.ping(1_000), 1_500);
    await expect(migrationStatus(database)).rejects.toBeInstanceOf(UnavailableError);
    cluster.start();
    await eventuallyPing(database, 10_000);
    expect((await migrationStatus(database)).pending).toEqual([]);
  });

  it("fails ping within its timeout while the server is frozen, and recovers after", async () => {
    await database.ping();
    cluster.pause();
    try {
      await expectUnavailableWithin(database.ping(500), 1_000);
      await expectUnavailableWithin(migrationStatus(database, { timeoutMs: 500 }), 1_000);
    } finally {
      cluster.resume();
    }
    await eventuallyPing(database, 10_000);
  });

  it("a transaction whose statement waits out its deadline on a frozen server rejects within one deadline, not two, and its work never commits", async () => {
    // A second client with a deadline long enough to tell one from two under load. Its ping
    // leaves a connection idle in the pool, so the transaction gets a connection and BEGIN and
    // the statement go out to the frozen server.
    const deadlineMs = 2_000;
    const client = await openDatabase({
      kind: "postgres",
      url: cluster.adminUrl,
      statementTimeoutMs: deadlineMs,
    });
    try {
      await client.ping();
      await client.db.execute(sql`create table if not exists outage_probe (n int)`);
      cluster.pause();
      try {
        const started = performance.now();
        const failed = await client.db
          .transaction(async (tx) => {
            await tx.execute(sql`insert into outage_probe values (1)`);
          })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        // drizzle wraps the statement's error; the deadline's UnavailableError is behind it.
        expect(asUnavailableError(failed)?.message).toBe(
          `the database did not answer within ${deadlineMs} ms`,
        );
        expect(performance.now() - started).toBeLessThan(deadlineMs * 1.75);
      } finally {
        cluster.resume();
      }
      await eventuallyPing(client, 10_000);
      // The insert ran when the server woke, and the ROLLBACK behind it undid it.
      const rows = await selectRows(client.db, sql`select count(*)::int as n from outage_probe`);
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await client.close();
    }
  });
});
