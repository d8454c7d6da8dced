// Statements drizzle builds once. drizzle turns a query into SQL text anew on every call: it walks
// the query's chunks, checks each one's kind (`is()`) and escapes every name, and for a statement
// of several CTEs that costs more CPU than sending it (the profile of bench/a2a.ts's measured
// tasks). A prebuilt statement is written with the query builder as usual, with
// `sql.placeholder(name)` where each call's values go; its text is built on first use and each
// call only fills in the values (through the columns' own encoders, as drizzle's prepared queries
// do) and sends it on the handle it is given — the database or a transaction, either driver, through
// the same wrappers as every statement (deadline, prepared statements, pipelining).
import {
  getTableColumns,
  is,
  Param,
  Placeholder,
  type Query,
  type SQLWrapper,
  sql,
  type Table,
} from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { type DbOrTx, rowsOf } from "./client.ts";
import { StoredJson } from "./storable.ts";

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
  let built: { query: Query; slots: Slot[] } | undefined;
  return async (db, values) => {
    built ??= prepare(dialect.sqlToQuery(build(db).getSQL()));
    const params = [...built.query.params];
    for (const { index, name, encoder } of built.slots) {
      if (!(name in values)) throw new Error(`no value for the placeholder "${name}"`);
      const value = values[name];
      // A null stays SQL NULL, as when drizzle binds a value it builds with (its own
      // fillPlaceholders would encode it, storing a JSON column's null as the JSON `null`).
      // A value serialised already (storedJson) goes as its text: the encoder would serialise
      // it again.
      params[index] =
        value instanceof StoredJson
          ? value.text
          : value === null || !encoder
            ? value
            : encoder.mapToDriverValue(value);
    }
    const session = (db as unknown as { _: { session: Session } })._.session;
    const result = await session
      .prepareQuery({ ...built.query, params }, undefined, undefined, false)
      .execute({});
    return rowsOf<Row>(result);
  };
}

/** Where a value goes: its parameter's index, its placeholder's name, its column's encoder. */
type Slot = {
  index: number;
  name: string;
  encoder?: { mapToDriverValue(value: unknown): unknown };
};

/** The built statement and its placeholders (a bare one in `sql`, or a column's, in a Param). */
function prepare(query: Query): { query: Query; slots: Slot[] } {
  const slots: Slot[] = [];
  query.params.forEach((param, index) => {
    if (is(param, Placeholder)) slots.push({ index, name: param.name });
    else if (is(param, Param) && is(param.value, Placeholder)) {
      slots.push({ index, name: param.value.name, encoder: param.encoder });
    }
  });
  return { query, slots };
}

/**
 * A placeholder where an update's `set()` takes a column's value. drizzle's update builder wraps
 * it with the column's encoder as its insert builder does (a JSON column gets JSON, a timestamp
 * its text), but its types admit only the column's own value type, hence the cast.
 */
export function setPlaceholder<T>(name: string): T {
  return sql.placeholder(name) as unknown as T;
}

/**
 * Maps a prebuilt statement's raw row of `table` (keyed by column name, as `returning()` or a
 * `select()` of the whole table answers) into the row drizzle would have answered: each column by
 * its own decoder, a null left null. The columns are listed once, so a row costs one pass over
 * them (drizzle's own mapping checks each field's kind per row).
 */
export function tableRowMapper<T extends Table>(
  table: T,
): (raw: Record<string, unknown>) => T["$inferSelect"] {
  const columns = Object.entries(getTableColumns(table)).map(([key, column]) => ({
    key,
    name: column.name,
    decoder: column as { mapFromDriverValue(value: unknown): unknown },
  }));
  return (raw) => {
    const row: Record<string, unknown> = {};
    for (const { key, name, decoder } of columns) {
      const value = raw[name];
      if (value === undefined) throw new Error(`the row has no column "${name}"`);
      row[key] = value === null ? null : decoder.mapFromDriverValue(value);
    }
    return row as T["$inferSelect"];
  };
}

/**
 * An INSERT of one row into `table` returning the whole row, prebuilt once per set of columns
 * given (a column left out takes its default, as with drizzle's own insert), and answered with
 * the row mapped as drizzle maps it.
 */
export function prebuiltInsertReturning<T extends Table>(
  table: T,
): (db: DbOrTx, values: Record<string, unknown>) => Promise<T["$inferSelect"]> {
  const statements = new Map<string, ReturnType<typeof prebuilt>>();
  const mapRow = tableRowMapper(table);
  return async (db, values) => {
    const keys = Object.keys(values).filter((key) => values[key] !== undefined);
    const signature = keys.join(",");
    let statement = statements.get(signature);
    if (!statement) {
      statement = prebuilt((handle) =>
        (
          handle as unknown as {
            insert(t: Table): { values(v: unknown): { returning(): SQLWrapper } };
          }
        )
          .insert(table)
          .values(Object.fromEntries(keys.map((key) => [key, sql.placeholder(key)])))
          .returning(),
      );
      statements.set(signature, statement);
    }
    const [raw] = await statement(db, values);
    if (!raw) throw new Error("the insert returned no row");
    return mapRow(raw);
  };
}
