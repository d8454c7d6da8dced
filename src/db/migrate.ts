// Applies the generated migrations in drizzle/ with drizzle's own migrator, on either driver.
// Several instances may start at once against one PostgreSQL: drizzle's migrator is not safe for
// that (both would see nothing applied and run the same DDL), so each run holds a session
// advisory lock on a connection of its own for the whole migration.
import fs from "node:fs";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { PgliteDatabase } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import { UnavailableError } from "../errors.ts";
import {
  type Database,
  type DbOrTx,
  runWithTimeout,
  type Schema,
  selectRows,
  withDedicatedConnection,
} from "./client.ts";
import { advisoryLockSpace, lockKeys } from "./locks.ts";

/** drizzle/ at the repository root, found from this file rather than the working directory. */
export const migrationsFolder = path.resolve(import.meta.dirname, "../../drizzle");

/** Where drizzle's migrator records what it applied (its defaults). */
const migrationsTable = sql`"drizzle"."__drizzle_migrations"`;

export type MigrationStatus = { expected: number; applied: number; pending: string[] };

type JournalEntry = { tag: string; when: number };

function readJournal(): JournalEntry[] {
  const journalPath = path.join(migrationsFolder, "meta", "_journal.json");
  const journal = JSON.parse(fs.readFileSync(journalPath, "utf8")) as { entries: JournalEntry[] };
  return journal.entries;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error);
}

async function readStatus(db: DbOrTx): Promise<MigrationStatus> {
  const entries = readJournal();
  const [table] = await selectRows<{ name: string | null }>(
    db,
    sql`select to_regclass('"drizzle"."__drizzle_migrations"')::text as name`,
  );
  if (!table?.name) {
    return { expected: entries.length, applied: 0, pending: entries.map((e) => e.tag) };
  }
  const [row] = await selectRows<{ applied: number | string; last: number | string | null }>(
    db,
    sql`select count(*)::int as applied, max(created_at) as last from ${migrationsTable}`,
  );
  // The same rule drizzle's migrator applies: a migration runs if it is newer than the last one.
  const last = row?.last === null || row?.last === undefined ? -1 : Number(row.last);
  return {
    expected: entries.length,
    applied: Number(row?.applied ?? 0),
    pending: entries.filter((e) => e.when > last).map((e) => e.tag),
  };
}

/**
 * What is applied and what is pending. GET /readyz is ready only when `pending` is empty.
 * Rejects with UnavailableError when the database cannot be read within `timeoutMs`.
 */
export async function migrationStatus(
  database: Database,
  options: { timeoutMs?: number } = {},
): Promise<MigrationStatus> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  try {
    return await runWithTimeout(
      readStatus(database.db),
      timeoutMs,
      () => new UnavailableError(`migration status not read within ${timeoutMs} ms`),
    );
  } catch (error) {
    if (error instanceof UnavailableError) throw error;
    throw new UnavailableError(`cannot read migration status: ${describeError(error)}`, {
      cause: error,
    });
  }
}

export type MigrateOptions = {
  /**
   * Called once, under the lock, before pending migrations are applied (not when there are
   * none): their names, and how many migrations there are in all. drizzle's migrator applies
   * them in one transaction, so this is the one moment to say so before the wait.
   */
  readonly applying?: (pending: readonly string[], expected: number) => void;
};

/**
 * Applies every pending migration in drizzle/, one instance at a time. Returns how many it
 * applied and their names (none when another instance got there first).
 */
export function migrateDatabase(
  database: Database,
  options: MigrateOptions = {},
): Promise<{ applied: number; migrations: string[] }> {
  // Advisory locks are re-entrant within one session, and PGlite has just one: queue runs on the
  // same Database in this process as well.
  const previous = inProcessQueue.get(database.db) ?? Promise.resolve();
  const run = previous.then(
    () => migrateExclusively(database, options),
    () => migrateExclusively(database, options),
  );
  inProcessQueue.set(database.db, run);
  return run;
}

const inProcessQueue = new WeakMap<object, Promise<unknown>>();

async function migrateExclusively(
  database: Database,
  options: MigrateOptions,
): Promise<{ applied: number; migrations: string[] }> {
  try {
    return await withDedicatedConnection(database, async (db) => {
      await db.execute(sql`select pg_advisory_lock(${advisoryLockSpace}, ${lockKeys.migrations})`);
      try {
        const before = await readStatus(db);
        if (before.pending.length > 0) {
          options.applying?.(before.pending, before.expected);
          if (database.kind === "pglite") {
            await migratePglite(db as unknown as PgliteDatabase<Schema>, { migrationsFolder });
          } else {
            await migratePostgres(db as unknown as PostgresJsDatabase<Schema>, {
              migrationsFolder,
            });
          }
        }
        return { applied: before.pending.length, migrations: before.pending };
      } finally {
        // Closing the dedicated connection releases it too; an error here must not hide the
        // migration's own.
        await db
          .execute(sql`select pg_advisory_unlock(${advisoryLockSpace}, ${lockKeys.migrations})`)
          .catch(() => {});
      }
    });
  } catch (error) {
    throw new UnavailableError(`cannot migrate the database: ${describeError(error)}`, {
      cause: error,
    });
  }
}
