// Which database the configuration names, and opening it: a PostgreSQL URL when DATABASE_URL
// is set, otherwise embedded PGlite in `<data dir>/pg`. Shared by the server and the CLI.
//
// PGlite writes the cluster it unpacks at first start with mode 0666 whatever the umask, and
// files it creates later follow the umask of whoever runs it. The embedded database's files are
// made owner-only after opening and again after closing, so neither depends on how it was started.
//
// PostgreSQL is opened only through a postgres.js that carries the project's mends
// (src/db/postgres-driver.patch): `npm ci --ignore-scripts`, or a driver copied in by hand, would
// otherwise run without them, and the defects they mend take the server down or stall its
// connections under faults. PEERGATE_ALLOW_UNMENDED_DRIVER=1 opens it anyway, with a warning.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.ts";
import { ConfigError } from "../errors.ts";
import { type Database, type DatabaseOptions, openDatabase } from "./client.ts";
import { describeUnmended } from "./patch-postgres-driver.mjs";

/** The database options `config` names. */
export function resolveDatabaseOptions(
  config: Pick<Config, "databaseUrl" | "dataDir"> & Partial<Pick<Config, "countRoundTrips">>,
): DatabaseOptions {
  if (!config.databaseUrl) {
    const dataDir = path.join(config.dataDir, "pg");
    return config.countRoundTrips
      ? { kind: "pglite", dataDir, countRoundTrips: true }
      : { kind: "pglite", dataDir };
  }
  return config.countRoundTrips
    ? { kind: "postgres", url: config.databaseUrl, countRoundTrips: true }
    : { kind: "postgres", url: config.databaseUrl };
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

/** The installed postgres.js, as this module resolves it (the one `openDatabase` loads). */
export function resolveDriverDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.resolve("postgres"))), "..");
}

/**
 * Throws unless the postgres.js in `driverDir` carries every mend; with `allow`, warns instead.
 * Called before PostgreSQL is opened (PGlite does not use the driver).
 */
export function checkDriverMended(
  driverDir: string,
  allow: boolean,
  warn: (message: string, fields: Record<string, unknown>) => void,
): void {
  const problems = describeUnmended(driverDir);
  if (problems.length === 0) return;
  if (allow) {
    warn("opening PostgreSQL through a postgres driver without the project's mends", {
      driver: driverDir,
      problems,
      override: "PEERGATE_ALLOW_UNMENDED_DRIVER=1",
    });
    return;
  }
  throw new ConfigError(
    [
      ...problems.map((message) => ({ field: "postgres driver", message })),
      {
        field: "PEERGATE_ALLOW_UNMENDED_DRIVER",
        message: `DATABASE_URL names PostgreSQL and the postgres driver in ${driverDir} lacks these mends: install with scripts (npm ci runs src/db/patch-postgres-driver.mjs) or run \`node src/db/patch-postgres-driver.mjs\`; PEERGATE_ALLOW_UNMENDED_DRIVER=1 opens it anyway`,
      },
    ],
    "peergate cannot start: the postgres driver is not mended",
  );
}

/** Opens the configured database (not migrated: see `migrateDatabase`). */
export async function openConfiguredDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir"> &
    Partial<Pick<Config, "allowUnmendedDriver" | "countRoundTrips">>,
  warn: (message: string, fields: Record<string, unknown>) => void = (message, fields) =>
    console.error(`warning: ${message}: ${JSON.stringify(fields)}`),
): Promise<Database> {
  const options = resolveDatabaseOptions(config);
  if (options.kind === "postgres") {
    checkDriverMended(resolveDriverDir(), config.allowUnmendedDriver === true, warn);
  }
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
