// Counts the round trips peergate makes to PostgreSQL, for the test that pins how many a request
// costs and for the bench. It wraps the postgres.js client under everything else (drizzle, the
// prepared-statement and deadline wrappers), so it sees each statement as it is sent:
//
// - a statement outside a transaction is one round trip;
// - inside a transaction (postgres.js's `begin()`, or a reserved connection, which is how
//   src/db/pipelined-transactions.ts runs one), a statement sent while none of the transaction's
//   is waiting for its answer starts a round trip; one sent while another is still in flight is
//   pipelined behind it on the same connection and adds a statement, not a round trip. BEGIN and
//   COMMIT count as statements: postgres.js's `begin()` sends each alone (one round trip each); a
//   pipelined transaction's BEGIN carries its first statements.
//
// Two counters per client, on only when the database is opened with `countRoundTrips` (the bench
// and the round-trip tests): a server does not pay for a Proxy and a callback per statement.
import type postgres from "postgres";
import type { PgliteThread, PgliteThreadTransaction } from "./pglite-thread.ts";

type AnySql = postgres.Sql<Record<string, never>>;
type ScopeOpener = (...args: unknown[]) => Promise<unknown>;

export type RoundTripCounts = { roundTrips: number; statements: number };

export type RoundTripCounter = {
  /** The counts so far. */
  read(): RoundTripCounts;
  /**
   * Records the text of every statement sent from now on, each marked with whether it started a
   * round trip; the returned function stops recording and gives the list (tests, diagnosis), and
   * its `peek()` gives the list so far without stopping.
   */
  record(): Recording;
};

export type Recording = (() => RecordedStatement[]) & { peek(): readonly RecordedStatement[] };

function startRecording(counts: Counts): Recording {
  const list: RecordedStatement[] = [];
  counts.recording = list;
  const stop = () => {
    if (counts.recording === list) counts.recording = undefined;
    return list;
  };
  return Object.assign(stop, { peek: () => list });
}

export type RecordedStatement = { sql: string; roundTrip: boolean };

/** Wraps `sql` so that `counter.read()` tells its round trips and statements. */
export function countRoundTrips(sql: AnySql): { sql: AnySql; counter: RoundTripCounter } {
  const counts: Counts = { roundTrips: 0, statements: 0, recording: undefined };
  return {
    sql: wrap(sql, counts, undefined),
    counter: {
      read: () => ({ roundTrips: counts.roundTrips, statements: counts.statements }),
      record: () => startRecording(counts),
    },
  };
}

type Counts = RoundTripCounts & { recording: RecordedStatement[] | undefined };

function note(counts: Counts, sql: string, roundTrip: boolean): void {
  counts.statements += 1;
  if (roundTrip) counts.roundTrips += 1;
  counts.recording?.push({ sql, roundTrip });
}

type Scope = { inFlight: number };

function wrap(sql: AnySql, counts: Counts, scope: Scope | undefined): AnySql {
  return new Proxy(sql, {
    // A tagged-template query (sql`select 1`: the ping) outside a transaction.
    apply(target, thisArg, args: unknown[]) {
      const strings = args[0] as readonly string[] | undefined;
      note(counts, Array.isArray(strings) ? strings.join("$n") : String(strings), !scope);
      return Reflect.apply(target, thisArg, args);
    },
    get(target, key) {
      if (key === "notify") {
        // postgres.js sends it through its own unwrapped handle: count it here.
        return (channel: string, payload: string) => {
          note(counts, "select pg_notify($1, $2)", true);
          return target.notify(channel, payload);
        };
      }
      if (key === "unsafe") {
        return (...args: Parameters<AnySql["unsafe"]>) => {
          const query = target.unsafe(...args);
          const text = String(args[0]);
          if (!scope) {
            note(counts, text, true);
            return query;
          }
          note(counts, text, scope.inFlight === 0);
          scope.inFlight += 1;
          // Starts the query (postgres.js runs it on the next tick, after the caller's
          // synchronous `.values()` and the like); the caller awaits it right away regardless.
          query.then(
            () => {
              scope.inFlight -= 1;
            },
            () => {
              scope.inFlight -= 1;
            },
          );
          return query;
        };
      }
      if (key === "reserve") {
        // A reserved connection is a transaction's (src/db/pipelined-transactions.ts): its BEGIN
        // and COMMIT are statements like the others, pipelined or not.
        return async () => wrap(await target.reserve(), counts, { inFlight: 0 }) as never;
      }
      if (key === "begin" || key === "savepoint") {
        const open = Reflect.get(target, key, target) as ScopeOpener | undefined;
        if (typeof open !== "function") return open;
        return (...args: unknown[]) => {
          const fn = args.at(-1) as (inner: AnySql) => unknown;
          // BEGIN (or SAVEPOINT), then at the end COMMIT (or RELEASE / ROLLBACK).
          note(counts, key === "begin" ? "BEGIN" : "SAVEPOINT", true);
          const inner: Scope = { inFlight: 0 };
          return open.apply(target, [
            ...args.slice(0, -1),
            async (tx: AnySql) => {
              try {
                return await fn(wrap(tx, counts, inner));
              } finally {
                note(counts, key === "begin" ? "COMMIT" : "RELEASE", true);
              }
            },
          ]);
        };
      }
      return Reflect.get(target, key, target);
    },
  });
}

/**
 * The same counts for embedded PGlite, which has no network: each statement is one "round trip"
 * to the engine's worker thread (BEGIN and COMMIT of a transaction included). Patches `client`'s
 * own `query`, `exec` and `transaction` (not a Proxy: the thread's methods use private fields).
 */
export function countPgliteStatements(client: PgliteThread): RoundTripCounter {
  const counts: Counts = { roundTrips: 0, statements: 0, recording: undefined };
  const countCalls = (target: Record<string, unknown>, names: readonly string[]) => {
    for (const name of names) {
      const original = target[name] as (...args: unknown[]) => Promise<unknown>;
      target[name] = (...args: unknown[]) => {
        note(counts, String(args[0]), true);
        return original.apply(target, args);
      };
    }
  };
  countCalls(client as unknown as Record<string, unknown>, ["query", "exec"]);
  const transaction = client.transaction.bind(client);
  client.transaction = <T>(fn: (tx: PgliteThreadTransaction) => Promise<T>): Promise<T> => {
    note(counts, "BEGIN", true);
    return transaction(async (tx) => {
      countCalls(tx as unknown as Record<string, unknown>, ["query", "exec"]);
      try {
        return await fn(tx);
      } finally {
        note(counts, "COMMIT", true);
      }
    });
  };
  return {
    read: () => ({ roundTrips: counts.roundTrips, statements: counts.statements }),
    record: () => startRecording(counts),
  };
}
