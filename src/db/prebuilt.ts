// Statements drizzle builds once. drizzle turns a query into SQL text anew on every call: it walks
// the query's chunks, checks each one's kind (`is()`) and escapes every name, and for a statement
// of several CTEs that costs more CPU than sending it (the profile of bench/a2a.ts's measured
// tasks). A prebuilt statement is written with the query builder as usual, with
// `sql.placeholder(name)` where each call's values go; its text is built on first use and each
// call only fills in the values (through the columns' own encoders, as drizzle's prepared queries
// do) and sends it on the handle it is given — the database or a transaction, either driver, through
// the same wrappers as every statement (deadline, prepared statements, pipelining).
import type { Query, SQLWrapper } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { DbOrTx } from "./client.ts";

/** The dialect both drivers use (default casing): the text it builds is the same for either. */
const dialect = new PgDialect();

/** The handle's session, where drizzle prepares what it sends (both drivers have one). */
type Session = {
  prepareQuery(
    query: Query,
    fields: undefined,
    name: undefined,
    isResponseInArrayMode: false,
  ): { execute(values: Record<string, unknown>): Promise<unknown> };
};

/**
 * A statement built once by `build` (from any handle; only its text is kept), run with `values`
 * for its placeholders. Resolves to its rows, whichever driver is underneath.
 */
export function prebuilt<
  Values extends Record<string, unknown>,
  Row extends Record<string, unknown> = Record<string, unknown>,
>(build: (db: DbOrTx) => SQLWrapper): (db: DbOrTx, values: Values) => Promise<Row[]> {
  let query: Query | undefined;
  return async (db, values) => {
    query ??= dialect.sqlToQuery(build(db).getSQL());
    const session = (db as unknown as { _: { session: Session } })._.session;
    const result = await session.prepareQuery(query, undefined, undefined, false).execute(values);
    // postgres.js answers with the rows, PGlite with `{ rows }`.
    if (Array.isArray(result)) return result as Row[];
    return ((result as { rows?: Row[] }).rows ?? []) as Row[];
  };
}
