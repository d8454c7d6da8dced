// Which database the configuration names, and opening it: a PostgreSQL URL when DATABASE_URL
// is set, otherwise embedded PGlite in `<data dir>/pg`. Shared by the server and the CLI.
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
export function openConfiguredDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir">,
): Promise<Database> {
  return openDatabase(resolveDatabaseOptions(config));
}
