// Databases migrated part of the way, for tests of a migration on data written before it: a copy
// of drizzle/ whose journal stops before the migration named, applied with drizzle's migrator.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { PgliteDatabase } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import { afterAll } from "vitest";
import type { Database, Schema } from "../../src/db/client.ts";
import { migrationsFolder } from "../../src/db/migrate.ts";

type JournalEntry = { tag: string };
const journal = JSON.parse(
  fs.readFileSync(path.join(migrationsFolder, "meta", "_journal.json"), "utf8"),
) as { entries: JournalEntry[] };

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) fs.rmSync(folder, { recursive: true, force: true });
});

/** A copy of drizzle/ whose journal stops before the migration tagged `…_<suffix>`. */
function migrationsBefore(suffix: string): string {
  const stop = journal.entries.findIndex((e) => e.tag.endsWith(`_${suffix}`));
  if (stop < 0) throw new Error(`no migration named …_${suffix}`);
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "peergate-migrations-"));
  folders.push(folder);
  fs.cpSync(migrationsFolder, folder, { recursive: true });
  const copy = { ...journal, entries: journal.entries.slice(0, stop) };
  fs.writeFileSync(path.join(folder, "meta", "_journal.json"), JSON.stringify(copy));
  return folder;
}

/** Applies every migration before the one tagged `…_<suffix>` (and none after). */
export async function migrateUpTo(database: Database, suffix: string): Promise<void> {
  const folder = migrationsBefore(suffix);
  if (database.kind === "pglite") {
    await migratePglite(database.db as unknown as PgliteDatabase<Schema>, {
      migrationsFolder: folder,
    });
  } else {
    await migratePostgres(database.db as unknown as PostgresJsDatabase<Schema>, {
      migrationsFolder: folder,
    });
  }
}
