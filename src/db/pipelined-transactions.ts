// Transactions whose BEGIN travels with their first statements. postgres.js's `begin()` sends
// BEGIN and waits for its answer before it sends anything else, so every transaction pays one
// round trip for BEGIN alone. Here a transaction reserves a pooled connection, sends BEGIN without
// waiting, and lets the transaction's first statements follow it on the same connection in the
// same round trip (the server answers them in order). The rest is postgres.js's own protocol:
//
// - the COMMIT (or ROLLBACK) is sent when the caller's function has settled, so nothing commits
//   before the caller saw every answer it waited for; `commitAfterStatements` lets a caller whose
//   last statements are independent writes send the COMMIT right behind them (one round trip
//   fewer), once it has seen the answers it decides on;
// - a failed statement aborts the transaction: the server then answers COMMIT with ROLLBACK, and
//   the transaction rejects with the first statement's error (postgres.js does the same with an
//   error the caller did not await);
// - savepoints are sent the same way (SAVEPOINT travels with the statements after it), and rolled
//   back to when their function throws;
// - the connection goes back to the pool afterwards, unless it was lost meanwhile (it closed, or
//   a statement failed with a connection error or a FATAL one): postgres.js then reconnects it
//   for the pool itself, so nothing more is sent through the reservation and it is not handed
//   back (that would put it in the pool twice).
//
// A deadline is the caller's (statement-deadline.ts wraps this): a statement that does not answer
// in time rejects, the caller's function throws, and the ROLLBACK follows whatever was sent, so a
// server that was frozen runs BEGIN, the statements and ROLLBACK when it wakes — never a COMMIT
// the caller was not there to see (test/faults/database-outage.test.ts).
import postgres from "postgres";

type AnySql = postgres.Sql<Record<string, never>>;
type Reserved = postgres.ReservedSql<Record<string, never>>;
type Pending = postgres.PendingQuery<postgres.Row[]>;

/** What a transaction's handle carries beyond postgres.js's own. */
type ScopeHandle = {
  /** Sends COMMIT right behind the next `count` statements (see `commitAfterStatements`). */
  commitAfter?: (count: number) => void;
};

/**
 * Wraps `sql` so that `begin()` pipelines BEGIN with the transaction's first statements. With
 * `transactionsAtOnce`, at most that many transactions hold a connection at once; the others wait
 * their turn here, in order, before they reserve one. Set below the pool's size, the rest of the
 * pool is never reserved by transactions, so a statement outside a transaction always has a
 * connection to go on (postgres.js pipelines it behind a busy one) and never waits for a burst's
 * transactions to give one back (issue 28).
 */
export function pipelineTransactions(
  sql: AnySql,
  options: { readonly transactionsAtOnce?: number } = {},
): AnySql {
  const turns = createTurns(options.transactionsAtOnce ?? Number.POSITIVE_INFINITY);
  return new Proxy(sql, {
    get(target, key) {
      if (key === "begin") {
        return async (...args: unknown[]) => {
          const fn = args.at(-1) as (inner: AnySql) => unknown;
          const options = args.length > 1 ? String(args[0]) : "";
          const leave = await turns.enter();
          try {
            return await transaction(target, options, fn);
          } finally {
            leave();
          }
        };
      }
      return Reflect.get(target, key, target);
    },
  });
}

/**
 * Sends the COMMIT of the transaction `handle` belongs to right behind the next `count`
 * statements it sends, without waiting for their answers: one round trip fewer for a transaction
 * whose last statements are independent writes. Declare exactly the statements that follow; a
 * statement sent after the COMMIT is refused, and a transaction in which any statement failed is
 * rolled back by the server and rejects with that statement's error. On PGlite the COMMIT is
 * posted to the database's thread the same way, and the session handed on to whatever waits for it
 * (pglite-thread.ts). Where transactions are not pipelined (a dedicated connection) it does
 * nothing: the transaction commits when its function returns.
 */
export function commitAfterStatements(handle: unknown, count: number): void {
  // A drizzle transaction keeps the postgres.js handle it runs on at `session.client` (through
  // the deadline and prepared-statement wrappers, which pass `commitAfter` on).
  const session = (handle as { session?: { client?: ScopeHandle } } | undefined)?.session;
  (session?.client ?? (handle as ScopeHandle | undefined))?.commitAfter?.(count);
}

/** At most `atOnce` holders at a time; the others wait in order of arrival. */
function createTurns(atOnce: number): { enter(): Promise<() => void> } {
  let holders = 0;
  const waiting: (() => void)[] = [];
  const leave = () => {
    const next = waiting.shift();
    if (next) next();
    else holders--;
  };
  const once = () => {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      leave();
    };
  };
  return {
    enter() {
      if (holders < atOnce) {
        holders++;
        return Promise.resolve(once());
      }
      return new Promise((resolve) => waiting.push(() => resolve(once())));
    },
  };
}

/**
 * Whether `error` means the connection is gone: postgres.js's own CONNECTION_* errors, the
 * socket's, or a server error that ends the session (FATAL, e.g. the backend was terminated). An
 * ordinary server error, or a statement cancelled before it was sent, leaves it usable.
 */
function isConnectionLoss(error: unknown): boolean {
  if (error instanceof postgres.PostgresError) {
    return error.severity === "FATAL" || error.severity === "PANIC";
  }
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && /^(CONNECTION_|CONNECT_TIMEOUT$|E[A-Z]+$)/.test(code);
}

async function transaction(
  sql: AnySql,
  options: string,
  fn: (inner: AnySql) => unknown,
): Promise<unknown> {
  const connection = await sql.reserve();
  let firstError: { error: unknown } | undefined;
  let lost = false;
  let commit: Pending | undefined;
  /** Statements still to be sent before the COMMIT goes behind them (`commitAfterStatements`). */
  let commitAfter: number | undefined;
  let savepoints = 0;
  const watch = (query: Pending): Pending => {
    query.then(undefined, (error: unknown) => {
      firstError ??= { error };
      if (isConnectionLoss(error)) lost = true;
    });
    return query;
  };
  /** postgres.js's connection under the reservation, to hear when it closes. */
  let socket: { onclose?: ((error: unknown) => void) | null } | undefined;
  const gone = () =>
    Object.assign(new Error("the transaction's connection was lost"), {
      code: "CONNECTION_CLOSED",
    });
  // Once the connection is lost, nothing more is sent on it: postgres.js reconnects it for the
  // pool, and a statement sent through the reservation would land in someone else's session.
  const send = (text: string, options?: object): Pending =>
    lost
      ? (Promise.reject(gone()) as unknown as Pending)
      : watch(connection.unsafe(text, [], options as never) as unknown as Pending);
  const inner = new Proxy(connection, {
    get(target, key) {
      if (key === "unsafe") {
        return (...args: Parameters<Reserved["unsafe"]>) => {
          if (commit) {
            throw new Error(
              "a statement was sent after its transaction's COMMIT: commitAfterStatements was " +
                "given fewer statements than followed",
            );
          }
          if (lost) throw gone();
          const query = watch(target.unsafe(...args) as unknown as Pending);
          if (commitAfter !== undefined && --commitAfter === 0) commit = send("commit");
          return query;
        };
      }
      if (key === "savepoint") {
        return async (...args: unknown[]) => {
          const body = args.at(-1) as (inner: AnySql) => unknown;
          const label = args.length > 1 ? `_${String(args[0]).replace(/[^a-z0-9_]/gi, "")}` : "";
          const name = `s${savepoints++}${label}`;
          send(`savepoint ${name}`);
          try {
            return await body(inner);
          } catch (error) {
            await send(`rollback to savepoint ${name}`);
            throw error;
          }
        };
      }
      if (key === "commitAfter") {
        return (count: number) => {
          if (commit || commitAfter !== undefined) return;
          if (count <= 0) commit = send("commit");
          else commitAfter = count;
        };
      }
      return Reflect.get(target, key, target);
    },
  }) as unknown as AnySql;
  try {
    send(`begin ${options.replace(/[^a-z ]/gi, "")}`, {
      // postgres.js hands the connection to a query's `onexecute` (its own begin() listens for
      // the close the same way); true: more may be pipelined behind BEGIN.
      onexecute: (c: typeof socket & object) => {
        socket = c;
        c.onclose = () => {
          lost = true;
        };
        return true;
      },
    });
    let result: unknown;
    try {
      result = await fn(inner);
    } catch (error) {
      // A COMMIT already sent stands or falls with the statements before it; wait for it so the
      // connection is idle when it goes back. A lost connection's transaction is rolled back by
      // the server.
      if (!lost) await (commit ?? send("rollback")).catch(() => {});
      throw error;
    }
    const closed = await (commit ?? send("commit")).catch((error: unknown) => {
      throw firstError?.error ?? error;
    });
    if (closed.command !== "COMMIT") {
      // The server rolled the transaction back: a statement in it failed.
      throw (
        firstError?.error ?? new Error(`the transaction ended with ${closed.command}, not COMMIT`)
      );
    }
    return result;
  } finally {
    if (socket) socket.onclose = null;
    if (!lost) connection.release();
  }
}
