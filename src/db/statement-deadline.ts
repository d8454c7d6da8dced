// A postgres.js client whose every statement has a deadline. postgres.js bounds connecting
// (connect_timeout) but not a statement sent on a connection that is already open: against a
// server that accepts and then never answers (SIGSTOPped, a hung host, a stuck lock), a query —
// and the request waiting on it — waits forever. drizzle reaches the server only through
// `unsafe()`, `begin()` and a transaction's `savepoint()`, so those are wrapped:
//
// - a statement that has not settled within `timeoutMs` rejects with UnavailableError, and is
//   cancelled: dropped if still queued in the pool, a CancelRequest if the server is running it.
//   One sent behind another on the same connection is left to run (a transaction's ROLLBACK
//   follows it): a CancelRequest is a signal to the server's process, not to a statement, and
//   one sent when its turn came would most likely cancel the statement after it;
// - a transaction gets the same deadline for each part the server must answer: its start (the
//   wait for a pooled connection; BEGIN itself is answered with the first statements, see
//   pipelined-transactions.ts), every statement inside, and the COMMIT or ROLLBACK. Time spent in
//   the caller's own code between statements is not counted. A transaction that started too late
//   is rolled back before any of its statements run, and one whose statement did not answer in
//   time is rolled back behind it, so work the caller was told had failed cannot happen later
//   behind its back;
// - a transaction whose statement waited out its deadline rejects at once: its ROLLBACK would
//   wait on the same silent server, and a caller must hear within one deadline, not two;
// - a deadline on COMMIT means the outcome is unknown (the server may still commit when it
//   wakes), as with any lost connection; everything written that way is consistent on its own.
import type postgres from "postgres";
import { UnavailableError } from "../errors.ts";

type AnySql = postgres.Sql<Record<string, never>>;
// postgres.js hands a scope a TransactionSql; it is wrapped like the pool's own client.
type Scope<T> = (sql: never) => T | Promise<T>;
type ScopeOpener = (...args: unknown[]) => Promise<unknown>;

/** Wraps `sql` so that each statement and each phase of a transaction has a deadline. */
export function withStatementDeadline(sql: AnySql, timeoutMs: number, onLate?: () => void): AnySql {
  return new Proxy(sql, {
    get(target, key) {
      if (key === "unsafe") {
        return (...args: Parameters<AnySql["unsafe"]>) =>
          guardQuery(target.unsafe(...args), timeoutMs, onLate);
      }
      if (key === "begin") {
        return (...args: unknown[]) => {
          const fn = args.at(-1) as Scope<unknown>;
          const options = args.length > 1 ? (args[0] as string) : undefined;
          const begin = target.begin.bind(target) as unknown as ScopeOpener;
          return guardScope(
            (inner) => (options === undefined ? begin(inner) : begin(options, inner)),
            fn,
            timeoutMs,
            onLate,
          );
        };
      }
      if (key === "savepoint") {
        const savepoint = (target as unknown as { savepoint?: ScopeOpener }).savepoint;
        if (typeof savepoint !== "function") return savepoint;
        return (...args: unknown[]) => {
          const fn = args.at(-1) as Scope<unknown>;
          const name = args.length > 1 ? args[0] : undefined;
          return guardScope(
            (inner) => (name === undefined ? savepoint(inner) : savepoint(name, inner)),
            fn,
            timeoutMs,
            onLate,
          );
        };
      }
      return Reflect.get(target, key, target);
    },
  });
}

/**
 * A pending query that rejects with UnavailableError (and is cancelled) past its deadline;
 * `onLate` hears that it did.
 */
export function guardQuery<Q extends PromiseLike<unknown>>(
  query: Q,
  timeoutMs: number,
  onLate?: () => void,
): Q {
  let settled: Promise<unknown> | undefined;
  const run = () => {
    settled ??= new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // postgres.js: `state` once sent, `active` while the server is on it (first in line).
        const pending = query as { cancel?: () => unknown; state?: unknown; active?: boolean };
        // Not sent yet: dropped. The server on it: a CancelRequest (which may itself fail). Sent
        // behind another: left alone, for its CancelRequest could only go out when its turn came,
        // and a quick statement is over by the time that lands: the server cancels whatever its
        // process runs then, the statement after it.
        if (typeof pending.cancel === "function" && (!pending.state || pending.active)) {
          Promise.resolve(pending.cancel.call(query)).catch(() => {});
        }
        onLate?.();
        reject(new UnavailableError(`the database did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      query.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
    return settled;
  };
  const proxy: Q = new Proxy(query, {
    get(target, key) {
      if (key === "then") {
        return (onFulfilled?: (v: unknown) => unknown, onRejected?: (e: unknown) => unknown) =>
          run().then(onFulfilled, onRejected);
      }
      if (key === "catch") return (onRejected?: (e: unknown) => unknown) => run().catch(onRejected);
      if (key === "finally") return (onFinally?: () => void) => run().finally(onFinally);
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== "function") return value;
      // Builder methods (`values()`, `raw()` …) return the query itself: keep the guard on it.
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        return result === target ? proxy : result;
      };
    },
  });
  return proxy;
}

/** BEGIN … COMMIT (or a savepoint) with a deadline on each part the server must answer. */
function guardScope<T>(
  open: (inner: (sql: AnySql) => Promise<T>) => Promise<unknown>,
  fn: Scope<T>,
  timeoutMs: number,
  onLate?: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let phase: "opening" | "inside" | "closing" | "done" = "opening";
    /** A statement of this scope (or of a savepoint in it) waited out its deadline. */
    let statementLate = false;
    const late = () => {
      statementLate = true;
      onLate?.();
    };
    let failure: { error: unknown } | undefined;
    let timer: NodeJS.Timeout | undefined;
    const arm = (what: string) => {
      timer = setTimeout(() => {
        if (phase === "done") return;
        const closing = phase === "closing";
        phase = "done";
        // The caller's own error stands if only its ROLLBACK is late: nothing was committed.
        if (closing && failure) reject(failure.error);
        else reject(new UnavailableError(`the database did not ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
    };
    arm("start a transaction");
    open(async (sql) => {
      if (phase === "done") {
        throw new UnavailableError("a transaction that started after its deadline is rolled back");
      }
      clearTimeout(timer);
      phase = "inside";
      try {
        return await fn(withStatementDeadline(sql, timeoutMs, late) as never);
      } catch (error) {
        failure = { error };
        if (statementLate && phase === "inside") {
          // A statement already waited out its deadline: the ROLLBACK behind it waits on the same
          // silent server, so the caller hears now, not one deadline later. The ROLLBACK still
          // goes out, and the connection returns to the pool once the server answers it.
          phase = "done";
          reject(error);
        }
        throw error;
      } finally {
        if (phase === "inside") {
          phase = "closing";
          arm(failure ? "roll back a transaction" : "confirm a commit (its outcome is unknown)");
        }
      }
    }).then(
      (value) => {
        clearTimeout(timer);
        if (phase === "done") return;
        phase = "done";
        resolve(value as T);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (phase === "done") return;
        phase = "done";
        reject(error);
      },
    );
  });
}
