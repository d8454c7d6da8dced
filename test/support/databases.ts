// Test databases on both drivers. Run a suite once on PGlite (in memory) and once on a fresh
// database of the shared real PostgreSQL started by test/support/global-setup.ts:
//
//   import { describeEachDatabase } from "../support/databases.ts";
//
//   describeEachDatabase("callers", (ctx) => {
//     it("stores a caller", async () => {
//       await ctx.db.insert(callers).values({ name: "a", kind: "peer" });
//     });
//     it.runIf(ctx.kind === "postgres")("sees it from a second instance", async () => {
//       const other = await ctx.openSecondConnection();
//       …
//     });
//   });
//
// - Every test gets a new, migrated database (options: `fresh: "suite"` shares one per suite;
//   `migrate: false` leaves it empty). It and any second connections are closed (and the
//   PostgreSQL database dropped) after the test.
// - `ctx.kind` is known while tests are defined; `ctx.database`, `ctx.db`, `ctx.url` only inside
//   tests and hooks.
// - Without a test cluster the postgres variant is skipped and its title says why
//   (`postgresSkipReason()` tells other tests the same, for `describe.skipIf`).
// - Outside a suite: `createPostgresTestDatabase({ migrate: true })` gives the URL of a fresh
//   database (for DATABASE_URL in CLI or server tests) and a `drop()`.
// - Costs, measured: a PGlite test database ~0.2 s (started from a dump made once per file; the
//   first one in a file pays ~2 s of WASM start-up), a PostgreSQL one ~0.1–0.3 s.
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, beforeEach, describe, inject } from "vitest";
import { type Database, type Db, openDatabase } from "../../src/db/client.ts";
import { migrateDatabase } from "../../src/db/migrate.ts";
import type { PgliteThread } from "../../src/db/pglite-thread.ts";

export type DatabaseKind = Database["kind"];

export type DatabaseTestContext = {
  /** Which driver this copy of the suite runs on. */
  readonly kind: DatabaseKind;
  /** The open database of the current test (or suite, with `fresh: "suite"`). */
  readonly database: Database;
  /** Shorthand for `database.db`. */
  readonly db: Db;
  /** postgres: the database's URL (for DATABASE_URL); pglite: undefined. */
  readonly url: string | undefined;
  /**
   * postgres only: another, independent pool on the same database — a second peergate instance.
   * Closed automatically. PGlite is single-session, so there it throws.
   */
  openSecondConnection(): Promise<Database>;
};

export type DescribeEachDatabaseOptions = {
  /** Apply drizzle/ migrations before each test. Default true. */
  migrate?: boolean;
  /** A new database per test (default) or one for the whole suite. */
  fresh?: "test" | "suite";
  /** postgres: count round trips (`database.roundTrips`), for the tests that measure them. */
  countRoundTrips?: boolean;
};

/** Why real-PostgreSQL tests are skipped in this run, or undefined when they run. */
export function postgresSkipReason(): string | undefined {
  if (inject("postgresAdminUrl")) return undefined;
  return inject("postgresSkipReason") ?? "no test PostgreSQL was started";
}

function adminUrl(): string {
  const url = inject("postgresAdminUrl");
  if (!url) throw new Error(`no test PostgreSQL: ${postgresSkipReason()}`);
  return url;
}

async function withAdmin<T>(work: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(adminUrl(), { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    return await work(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

export type PostgresTestDatabase = { name: string; url: string; drop(): Promise<void> };

async function createDatabaseFrom(template: string | undefined): Promise<PostgresTestDatabase> {
  const name = `peergate_test_${randomBytes(6).toString("hex")}`;
  await withAdmin((sql) =>
    sql.unsafe(`create database "${name}"${template ? ` template "${template}"` : ""}`),
  );
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: async () => {
      await withAdmin((sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
    },
  };
}

/**
 * Creates a database on the test cluster, empty or (`migrate: true`) migrated. `drop()` ends its
 * connections and drops it.
 */
export async function createPostgresTestDatabase(
  options: { migrate?: boolean } = {},
): Promise<PostgresTestDatabase> {
  const created = await createDatabaseFrom(undefined);
  if (!options.migrate) return created;
  try {
    const database = await openDatabase({ kind: "postgres", url: created.url });
    try {
      await migrateDatabase(database);
    } finally {
      await database.close();
    }
    return created;
  } catch (error) {
    await created.drop();
    throw error;
  }
}

type Opened = { database: Database; url: string | undefined; drop?: () => Promise<void> };

/**
 * A new PGlite cluster costs ~1 s; loading a dump of one ~0.2 s. So each test file makes one
 * empty and one migrated cluster, dumps them, and starts every test database from a dump.
 */
const pgliteTemplates = new Map<boolean, Promise<Blob>>();

function loadPgliteTemplate(migrate: boolean): Promise<Blob> {
  let template = pgliteTemplates.get(migrate);
  if (!template) {
    template = (async () => {
      const database = await openDatabase({ kind: "pglite" });
      try {
        if (migrate) await migrateDatabase(database);
        const client = (database.db as unknown as { $client: PgliteThread }).$client;
        return await client.dumpDataDir("none");
      } finally {
        await database.close();
      }
    })();
    pgliteTemplates.set(migrate, template);
  }
  return template;
}

async function openFresh(
  kind: DatabaseKind,
  migrate: boolean,
  template: PostgresTestDatabase | undefined,
  countRoundTrips = false,
): Promise<Opened> {
  if (kind === "pglite") {
    const loadDataDir = await loadPgliteTemplate(migrate);
    return {
      database: await openDatabase({ kind: "pglite", loadDataDir, countRoundTrips }),
      url: undefined,
    };
  }
  // Copying a migrated template is cheaper than migrating every new database.
  const created = await createDatabaseFrom(template?.name);
  try {
    const database = await openDatabase({ kind: "postgres", url: created.url, countRoundTrips });
    if (migrate && !template) await migrateDatabase(database);
    return { database, url: created.url, drop: created.drop };
  } catch (error) {
    await created.drop();
    throw error;
  }
}

/** Defines the suite twice: `<title> [pglite]` and `<title> [postgres]`. */
export function describeEachDatabase(
  title: string,
  define: (ctx: DatabaseTestContext) => void,
  options: DescribeEachDatabaseOptions = {},
): void {
  const migrate = options.migrate ?? true;
  for (const kind of ["pglite", "postgres"] as const) {
    const skipReason = kind === "postgres" ? postgresSkipReason() : undefined;
    const name = skipReason ? `${title} [postgres] — skipped: ${skipReason}` : `${title} [${kind}]`;

    describe.skipIf(skipReason !== undefined)(name, () => {
      let current: Opened | undefined;
      let template: PostgresTestDatabase | undefined;
      const seconds: Database[] = [];

      const open = async () => {
        current = await openFresh(kind, migrate, template, options.countRoundTrips);
      };
      const close = async () => {
        const opened = current;
        current = undefined;
        await Promise.all(seconds.splice(0).map((d) => d.close()));
        await opened?.database.close();
        await opened?.drop?.();
      };
      const need = (): Opened => {
        if (!current) throw new Error("the test database is open only inside tests and hooks");
        return current;
      };

      if (options.fresh === "suite") {
        beforeAll(open);
        afterAll(close);
      } else {
        if (kind === "postgres" && migrate) {
          beforeAll(async () => {
            template = await createPostgresTestDatabase({ migrate: true });
          });
          afterAll(async () => {
            await template?.drop();
          });
        }
        beforeEach(open);
        afterEach(close);
      }

      define({
        kind,
        get database() {
          return need().database;
        },
        get db() {
          return need().database.db;
        },
        get url() {
          return need().url;
        },
        async openSecondConnection() {
          const { url } = need();
          if (!url) throw new Error("PGlite is single-session: no second connection");
          const second = await openDatabase({ kind: "postgres", url });
          seconds.push(second);
          return second;
        },
      });
    });
  }
}

/** `describeEachDatabase` with round trips counted on PostgreSQL, for the tests that measure them. */
export function describeEachCountedDatabase(
  title: string,
  define: (ctx: DatabaseTestContext) => void,
  options: DescribeEachDatabaseOptions = {},
): void {
  describeEachDatabase(title, define, { ...options, countRoundTrips: true });
}
