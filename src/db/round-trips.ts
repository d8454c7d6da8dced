// Counts the round trips peergate makes to PostgreSQL, for the test that pins how many a request
// costs and for the bench. It wraps the postgres.js client under everything else (drizzle, the
// prepared-statement and deadline wrappers), so it sees each statement as it is sent:
//
// - a statement outside a transaction is one round trip;
// - a transaction's BEGIN and its COMMIT (or ROLLBACK) are one each, as postgres.js sends them;
// - inside a transaction, a statement sent while none of the transaction's is waiting for its
//   answer starts a round trip; one sent while another is still in flight is pipelined behind it
//   on the same connection and adds a statement, not a round trip.
//
// Two counters per client, always on: the bookkeeping is a few increments per statement.
import type postgres from "postgres";

type AnySql = postgres.Sql<Record<string, never>>;
type ScopeOpener = (...args: unknown[]) => Promise<unknown>;

export type RoundTripCounts = { roundTrips: number; statements: number };

export type RoundTripCounter = {
  /** The counts so far. */
  read(): RoundTripCounts;
};

/** Wraps `sql` so that `counter.read()` tells its round trips and statements. */
export function countRoundTrips(sql: AnySql): { sql: AnySql; counter: RoundTripCounter } {
  const counts: RoundTripCounts = { roundTrips: 0, statements: 0 };
  return {
    sql: wrap(sql, counts, undefined),
    counter: { read: () => ({ ...counts }) },
  };
}

type Scope = { inFlight: number };

function wrap(sql: AnySql, counts: RoundTripCounts, scope: Scope | undefined): AnySql {
  return new Proxy(sql, {
    get(target, key) {
      if (key === "unsafe") {
        return (...args: Parameters<AnySql["unsafe"]>) => {
          const query = target.unsafe(...args);
          counts.statements += 1;
          if (!scope) {
            counts.roundTrips += 1;
            return query;
          }
          if (scope.inFlight === 0) counts.roundTrips += 1;
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
      if (key === "begin" || key === "savepoint") {
        const open = Reflect.get(target, key, target) as ScopeOpener | undefined;
        if (typeof open !== "function") return open;
        return (...args: unknown[]) => {
          const fn = args.at(-1) as (inner: AnySql) => unknown;
          // BEGIN (or SAVEPOINT), then at the end COMMIT (or RELEASE / ROLLBACK).
          counts.roundTrips += 2;
          counts.statements += 2;
          const inner: Scope = { inFlight: 0 };
          return open.apply(target, [
            ...args.slice(0, -1),
            (tx: AnySql) => fn(wrap(tx, counts, inner)),
          ]);
        };
      }
      return Reflect.get(target, key, target);
    },
  });
}
