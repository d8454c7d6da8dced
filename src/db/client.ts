// The one way to open peergate's database. Embedded PGlite by default (no server to set up);
// postgres.js against a real PostgreSQL when a URL is given. Everything else codes against
// `Database` and its drizzle handle `db`, which behave the same on both drivers.
//
// Raw `db.execute()` results differ by driver (PGlite returns `{ rows }`, postgres.js an array):
// prefer the query builder, or read rows through `selectRows`.
import fs from "node:fs";
import path from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import type { ExtractTablesWithRelations, SQL } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { UnavailableError } from "../errors.ts";
import { acquireDataDirLock } from "./data-dir-lock.ts";
import { openPgliteThread, type PgliteThread } from "./pglite-thread.ts";
import { pipelineTransactions } from "./pipelined-transactions.ts";
import { usePreparedStatements } from "./prepared-statements.ts";
import { countPgliteStatements, countRoundTrips, type RoundTripCounter } from "./round-trips.ts";
import type * as schema from "./schema.ts";
import { guardQuery, withStatementDeadline } from "./statement-deadline.ts";

export type Schema = typeof schema;

/**
 * A drizzle handle; the same type for both drivers. Opened without the schema: drizzle's relational
 * API (`db.query.<table>`), which nothing here uses, would otherwise build a query builder per
 * table for every handle, and a transaction is a handle (18 builders per transaction, in the
 * profile of every SendMessage). Queries name their tables from src/db/schema.ts.
 */
export type Db = PgDatabase<PgQueryResultHKT>;

/** A transaction handle, as passed to `db.transaction(async (tx) => …)`. */
export type DbTransaction = PgTransaction<
  PgQueryResultHKT,
  Record<string, never>,
  ExtractTablesWithRelations<Record<string, never>>
>;

/** Anything a query can run on: the database or an open transaction. */
export type DbOrTx = Db | DbTransaction;

export type Database = {
  kind: "pglite" | "postgres";
  db: Db;
  /** `SELECT 1`; rejects with UnavailableError on failure, after close, or after `timeoutMs`. */
  ping(timeoutMs?: number): Promise<void>;
  /**
   * LISTEN on `channel` (lower-case letters, digits and `_`). Returns a function that stops it.
   * `onListen` runs each time the LISTEN is in place — first, and again after postgres.js
   * reconnects; notifications sent while disconnected are lost, so reload state there.
   */
  listen(
    channel: string,
    onPayload: (payload: string) => void,
    onListen?: () => void,
  ): Promise<() => Promise<void>>;
  notify(channel: string, payload: string): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
  /**
   * Opened with `countRoundTrips`: round trips and statements sent so far
   * (src/db/round-trips.ts; on PGlite every statement counts as a round trip). Absent otherwise: only the bench and the tests that pin round trips
   * measure them, so a server does not pay for the counting.
   */
  readonly roundTrips?: RoundTripCounter;
};

export type DatabaseOptions =
  | {
      kind: "pglite";
      /** Undefined: in memory. */
      dataDir?: string;
      /** A `dumpDataDir()` tarball to start from instead of a new cluster (fast test setup). */
      loadDataDir?: Blob;
      /** Count statements (`Database.roundTrips`): for the bench and the idle-statement tests. */
      countRoundTrips?: boolean;
    }
  | {
      kind: "postgres";
      url: string;
      /** Deadline of each statement (and of BEGIN and COMMIT); default 5 s. */
      statementTimeoutMs?: number;
      /** Count round trips (`Database.roundTrips`): for the bench and the round-trip tests. */
      countRoundTrips?: boolean;
    };

export const defaultPingTimeoutMs = 2_000;

/**
 * How long one statement may wait for a PostgreSQL server that is connected but not answering
 * before the request fails closed with 503 (see statement-deadline.ts). Ample for a lock wait
 * under load; short enough that a hung database does not pile up requests.
 */
export const defaultStatementTimeoutMs = 5_000;

/** Pool and timeouts for postgres.js: bounded, and failing fast when the server is gone. */
const postgresOptions = {
  max: 10,
  connect_timeout: 5,
  idle_timeout: 60,
  max_lifetime: 30 * 60,
  // Seconds before a closed connection reconnects. postgres.js's default grows with every failed
  // connection of the pool to 10-20 s, so after a database restart requests kept failing for that
  // long; capped at 1 s, the pool is back within a second of the server.
  backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
  onnotice: () => {},
  // Timestamps come back in UTC whatever the server's default zone is.
  connection: { application_name: "peergate", TimeZone: "UTC" },
} satisfies postgres.Options<Record<string, never>>;

/**
 * Connections of the pool no transaction may hold: statements outside a transaction (another
 * caller's GetTask, a readiness check) always find one, however many transactions a burst of runs
 * opens (issue 28). The other `max - 2` serve transactions: as many as the start queue lets run
 * starts hold at once (src/runs/start-queue.ts, 8 by default); a run's end waits its turn.
 */
const connectionsKeptForStatements = 2;

const channelPattern = /^[a-z_][a-z0-9_]{0,62}$/;

function checkChannel(channel: string): void {
  // PGlite splices the name into LISTEN unquoted; keep names that mean the same on both drivers.
  if (!channelPattern.test(channel)) {
    throw new TypeError(`bad channel name ${JSON.stringify(channel)}: use [a-z_][a-z0-9_]*`);
  }
}

/** Settles like `work`, or rejects with `onTimeout()` after `timeoutMs`, whichever is first. */
export async function runWithTimeout<T>(
  work: Promise<T>,
  timeoutMs: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error) {
    return error.message || (error as { code?: string }).code || error.name;
  }
  return String(error);
}

/** Opens the database described by `options`. Does not migrate: see `migrateDatabase`. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.kind === "pglite"
    ? openPglite(options.dataDir, options.loadDataDir, options.countRoundTrips === true)
    : openPostgres(
        options.url,
        options.statementTimeoutMs ?? defaultStatementTimeoutMs,
        options.countRoundTrips === true,
      );
}

async function openPglite(
  dataDir: string | undefined,
  loadDataDir: Blob | undefined,
  counting: boolean,
): Promise<Database> {
  let lock: ReturnType<typeof acquireDataDirLock> | undefined;
  let dir: string | undefined;
  if (dataDir !== undefined) {
    dir = path.resolve(dataDir);
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    lock = acquireDataDirLock(dir);
  }
  let client: PgliteThread;
  try {
    if (dir) fs.mkdirSync(dir, { recursive: true });
    // In a worker thread: PostgreSQL's work there does not hold up this thread's event loop.
    client = await openPgliteThread({ dataDir: dir, loadDataDir });
  } catch (error) {
    lock?.release();
    throw new UnavailableError(
      `cannot open the embedded database${dir ? ` in ${dir}` : ""}: ${describeError(error)}`,
      { cause: error },
    );
  }
  // Before drizzle sees the client, so every statement it sends is counted.
  const counter = counting ? countPgliteStatements(client) : undefined;
  // drizzle calls `query` and `transaction` (and the migrator `exec`), which the thread offers
  // with PGlite's signatures (docs/dependencies.md).
  const db: Db = drizzlePglite({ client: client as unknown as PGlite });
  let closing: Promise<void> | undefined;

  return {
    kind: "pglite",
    db,
    ...(counter ? { roundTrips: counter } : {}),
    async ping(timeoutMs = defaultPingTimeoutMs) {
      if (closing || client.closed) throw new UnavailableError("the database is closed");
      try {
        await runWithTimeout(
          client.query("select 1"),
          timeoutMs,
          () => new UnavailableError(`the database did not answer within ${timeoutMs} ms`),
        );
      } catch (error) {
        if (error instanceof UnavailableError) throw error;
        throw new UnavailableError(`the database is unavailable: ${describeError(error)}`, {
          cause: error,
        });
      }
    },
    async listen(channel, onPayload, onListen) {
      checkChannel(channel);
      const unlisten = await client.listen(channel, onPayload);
      onListen?.();
      return async () => {
        if (!client.closed) await unlisten();
      };
    },
    async notify(channel, payload) {
      checkChannel(channel);
      await client.query("select pg_notify($1, $2)", [channel, payload]);
    },
    close() {
      closing ??= (async () => {
        try {
          await client.close();
        } finally {
          lock?.release();
        }
      })();
      return closing;
    },
  };
}

async function openPostgres(
  url: string,
  statementTimeoutMs: number,
  counting: boolean,
): Promise<Database> {
  const client = postgres(url, postgresOptions);
  // The counter wraps the driver under everything else, so it sees each statement as it is sent.
  const counted = counting ? countRoundTrips(client) : undefined;
  const db: Db = drizzlePostgres({
    client: withStatementDeadline(
      usePreparedStatements(
        pipelineTransactions(counted?.sql ?? client, {
          transactionsAtOnce: postgresOptions.max - connectionsKeptForStatements,
        }),
      ),
      statementTimeoutMs,
    ),
  });
  let closing: Promise<void> | undefined;
  // Unguarded: migrations run here, may wait for another instance's, and may take long.
  dedicatedConnections.set(db, () => {
    const single = postgres(url, { ...postgresOptions, max: 1 });
    return {
      db: drizzlePostgres({ client: single }),
      close: () => single.end({ timeout: 2 }),
    };
  });

  return {
    kind: "postgres",
    db,
    ...(counted ? { roundTrips: counted.counter } : {}),
    async ping(timeoutMs = defaultPingTimeoutMs) {
      if (closing) throw new UnavailableError("the database is closed");
      const query = (counted?.sql ?? client)`select 1`;
      try {
        await runWithTimeout(query.execute(), timeoutMs, () => {
          // A queued query is dropped; a sent one is cancelled if the server still answers.
          query.cancel();
          return new UnavailableError(`the database did not answer within ${timeoutMs} ms`);
        });
      } catch (error) {
        if (error instanceof UnavailableError) throw error;
        throw new UnavailableError(`the database is unavailable: ${describeError(error)}`, {
          cause: error,
        });
      }
    },
    async listen(channel, onPayload, onListen) {
      checkChannel(channel);
      const meta = await client.listen(channel, onPayload, onListen);
      return () => meta.unlisten();
    },
    async notify(channel, payload) {
      checkChannel(channel);
      await guardQuery((counted?.sql ?? client).notify(channel, payload), statementTimeoutMs);
    },
    close() {
      closing ??= client.end({ timeout: 2 });
      return closing;
    },
  };
}

type DedicatedConnection = { db: Db; close(): Promise<void> };

/** How to open one extra single connection to the same server, per postgres `Db`. */
const dedicatedConnections = new WeakMap<Db, () => DedicatedConnection>();

/**
 * Runs `work` on a connection of its own, for session state such as `pg_advisory_lock` that must
 * stay on one connection (a pool hands out a different one per query). PGlite has one session,
 * so there it runs on `database.db` itself.
 */
export async function withDedicatedConnection<T>(
  database: Database,
  work: (db: Db) => Promise<T>,
): Promise<T> {
  const open = dedicatedConnections.get(database.db);
  if (!open) return work(database.db);
  const connection = open();
  try {
    return await work(connection.db);
  } finally {
    await connection.close();
  }
}

/** Runs a raw query and returns its rows, whichever driver is underneath. */
export async function selectRows<Row extends Record<string, unknown>>(
  db: DbOrTx,
  query: SQL,
): Promise<Row[]> {
  return rowsOf<Row>(await db.execute(query));
}

/** The rows of a raw result: postgres.js answers with the rows, PGlite with `{ rows }`. */
export function rowsOf<Row extends Record<string, unknown>>(result: unknown): Row[] {
  if (Array.isArray(result)) return result as Row[];
  return ((result as { rows?: Row[] }).rows ?? []) as Row[];
}
