// drizzle sends every statement through postgres.js's `unsafe()` with `prepare: false`. postgres.js
// must then learn a parametrised statement's parameter types before it can bind the values, so it
// sends Parse + Describe, waits for the server's answer, and only then Bind + Execute: two round
// trips and a fresh parse on the server for every statement. With `prepare: true` postgres.js
// keeps a named prepared statement per connection and SQL text, so after a statement's first use
// on a connection it costs one round trip and no parse. A run is about twenty statements, two of
// them inside the audit chain's lock, so this is most of the time a run spends waiting on the
// database (bench/a2a.ts).
//
// Prepared statements live in the server session: a pooler in transaction mode must support them
// (PgBouncer 1.21+ with `max_prepared_statements`). postgres.js re-prepares a statement the server
// reports as stale (after a migration changed a table under it).
import type postgres from "postgres";

type AnySql = postgres.Sql<Record<string, never>>;
type ScopeOpener = (...args: unknown[]) => Promise<unknown>;

/** Wraps `sql` (and the transactions and savepoints it opens) to prepare every statement. */
export function usePreparedStatements(sql: AnySql): AnySql {
  return new Proxy(sql, {
    get(target, key) {
      if (key === "unsafe") {
        return (query: string, args?: unknown, options?: Record<string, unknown>) => {
          // `unsafe(query, options)` is the two-argument form.
          if (args !== undefined && !Array.isArray(args)) {
            return target.unsafe(query, { ...(args as object), prepare: true } as never);
          }
          return target.unsafe(query, (args ?? []) as never[], { ...options, prepare: true });
        };
      }
      if (key === "begin" || key === "savepoint") {
        const open = Reflect.get(target, key, target) as ScopeOpener | undefined;
        if (typeof open !== "function") return open;
        return (...args: unknown[]) => {
          const fn = args.at(-1) as (inner: AnySql) => unknown;
          return open.apply(target, [
            ...args.slice(0, -1),
            (inner: AnySql) => fn(usePreparedStatements(inner)),
          ]);
        };
      }
      return Reflect.get(target, key, target);
    },
  });
}
