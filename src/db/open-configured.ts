// Which database the configuration names, and opening it: a PostgreSQL URL when DATABASE_URL
// is set, otherwise embedded PGlite in `<data dir>/pg`. Shared by the server and the CLI.
//
// PGlite writes the cluster it unpacks at first start with mode 0666 whatever the umask, and
// files it creates later follow the umask of whoever runs it. The embedded database's files are
// made owner-only after opening and again after closing, so neither depends on how it was started.
import fs from "node:fs";
import path from "node:path";
import type { Config } from "../config.ts";
import { type Database, type DatabaseOptions, openDatabase } from "./client.ts";

/** The database options `config` names. */
export function resolveDatabaseOptions(
  config: Pick<Config, "databaseUrl" | "dataDir">,
): DatabaseOptions {
  return config.databaseUrl
    ? { kind: "postgres", url: config.databaseUrl }
    : { kind: "pglite", dataDir: path.join(config.dataDir, "pg") };
}

/** A one-line description for logs and CLI output; never includes a password. */
export function describeDatabase(options: DatabaseOptions): string {
  if (options.kind === "pglite") {
    return options.dataDir ? `embedded PGlite in ${options.dataDir}` : "embedded PGlite in memory";
  }
  try {
    const url = new URL(options.url);
    return `PostgreSQL at ${url.host}${url.pathname}`;
  } catch {
    return "PostgreSQL (unparseable URL)";
  }
}

/** Opens the configured database (not migrated: see `migrateDatabase`). */
export async function openConfiguredDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir">,
): Promise<Database> {
  const options = resolveDatabaseOptions(config);
  const pgDir = options.kind === "pglite" ? options.dataDir : undefined;
  if (pgDir) fs.mkdirSync(pgDir, { recursive: true, mode: 0o700 });
  const database = await openDatabase(options);
  if (!pgDir) return database;
  makeOwnerOnly(pgDir);
  const close = database.close;
  return {
    ...database,
    close: async () => {
      await close();
      makeOwnerOnly(pgDir);
    },
  };
}

/**
 * Removes group and other permissions from `root` and everything under it (symbolic links are
 * left alone: their targets are not ours to change). Returns how many entries it changed.
 */
export function makeOwnerOnly(root: string): number {
  let changed = 0;
  const visit = (entry: string) => {
    const stat = fs.lstatSync(entry, { throwIfNoEntry: false });
    if (!stat || stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) {
      fs.chmodSync(entry, stat.mode & 0o700);
      changed += 1;
    }
    if (stat.isDirectory()) {
      for (const name of fs.readdirSync(entry)) visit(path.join(entry, name));
    }
  };
  visit(root);
  return changed;
}
