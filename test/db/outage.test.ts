// Readiness must fail closed while the database is gone or hung, and come back by itself once it
// returns. These tests crash and freeze a PostgreSQL of their own, never the shared one.

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase, selectRows } from "../../src/db/client.ts";
import { migrateDatabase, migrationStatus } from "../../src/db/migrate.ts";
import { UnavailableError } from "../../src/errors.ts";
import { asUnavailableError } from "../../src/services/db-errors.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { type PostgresCluster, startPostgresCluster } from "../support/postgres-cluster.ts";

/** The database answers a ping again (after the server came back or woke). */
function eventuallyAnswers(database: Database): Promise<boolean> {
  return eventually("the database to answer a ping", () => database.ping(500).then(() => true));
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
    await expect(database.ping(1_000)).rejects.toBeInstanceOf(UnavailableError);
    await expect(migrationStatus(database)).rejects.toBeInstanceOf(UnavailableError);
    cluster.start();
    await eventuallyAnswers(database);
    expect((await migrationStatus(database)).pending).toEqual([]);
  });

  it("fails ping within its timeout while the server is frozen, and recovers after", async () => {
    await database.ping();
    cluster.pause();
    try {
      await expect(database.ping(500)).rejects.toThrow(/did not answer within 500 ms/);
      await expect(migrationStatus(database, { timeoutMs: 500 })).rejects.toBeInstanceOf(
        UnavailableError,
      );
    } finally {
      cluster.resume();
    }
    await eventuallyAnswers(database);
  });

  // How long it takes (one deadline, not two) is measured by bench/deadlines.ts.
  it("a transaction whose statement waits out its deadline on a frozen server rejects with the deadline's error, and its work never commits", async () => {
    // A second client with a deadline of its own. Its ping leaves a connection idle in the pool,
    // so the transaction gets a connection and BEGIN and the statement go out to the frozen
    // server.
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
      } finally {
        cluster.resume();
      }
      await eventuallyAnswers(client);
      // The insert ran when the server woke, and the ROLLBACK behind it undid it.
      const rows = await selectRows(client.db, sql`select count(*)::int as n from outage_probe`);
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await client.close();
    }
  });
});
