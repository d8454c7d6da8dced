// Readiness must fail closed while the database is gone or hung, and come back by itself once it
// returns. These tests crash and freeze a PostgreSQL of their own, never the shared one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../../src/db/client.ts";
import { migrateDatabase, migrationStatus } from "../../src/db/migrate.ts";
import { UnavailableError } from "../../src/errors.ts";
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
});
