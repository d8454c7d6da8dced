// A prebuilt statement (src/db/prebuilt.ts) is built once and then only filled in: each call's
// values go through their columns' encoders (a JSON column gets JSON, an array column an array),
// it runs on the database or inside a transaction (rolled back with it), and its rows come back
// the same on both drivers.
import { eq, sql } from "drizzle-orm";
import { jsonb, pgTable, serial } from "drizzle-orm/pg-core";
import { expect, it } from "vitest";
import { selectRows } from "../../src/db/client.ts";
import {
  prebuilt,
  prebuiltInsertReturning,
  setPlaceholder,
  tableRowMapper,
} from "../../src/db/prebuilt.ts";
import { callers } from "../../src/db/schema.ts";
import { storedJson, toStorableJson } from "../../src/db/storable.ts";
import { describeEachDatabase } from "../support/databases.ts";

let builds = 0;
const addCaller = prebuilt<
  { name: string; allow: string[]; budgets: Record<string, unknown> },
  { id: string; name: string; allow: string[]; budgets: unknown }
>((db) => {
  builds++;
  return db
    .insert(callers)
    .values({
      name: sql.placeholder("name"),
      kind: "peer",
      allow: sql.placeholder("allow"),
      budgets: sql.placeholder("budgets"),
    })
    .returning({
      id: callers.id,
      name: callers.name,
      allow: callers.allow,
      budgets: callers.budgets,
    });
});

/** A table of this test's own, with a JSON column that may be NULL. */
const probes = pgTable("prebuilt_probe", { id: serial("id").primaryKey(), doc: jsonb("doc") });
const setDoc = prebuilt<{ id: number; doc: unknown }>((db) =>
  db
    .update(probes)
    .set({ doc: setPlaceholder<unknown>("doc") })
    .where(eq(probes.id, sql.placeholder("id"))),
);

const insertCallerRow = prebuiltInsertReturning(callers);

describeEachDatabase("a prebuilt statement", (ctx) => {
  it("is built once, encodes each call's values by column, and answers with its rows", async () => {
    const budgets = { dailyTokens: 1_000, note: 'it\'s "quoted"' };
    const [first] = await addCaller(ctx.db, { name: "pre-a", allow: ["fs.read"], budgets });
    const [second] = await addCaller(ctx.db, { name: "pre-b", allow: [], budgets: {} });
    // Once in this file, whichever database ran first.
    expect(builds).toBe(1);
    expect(first).toMatchObject({ name: "pre-a", allow: ["fs.read"] });
    expect(second).toMatchObject({ name: "pre-b", allow: [] });
    // Read back through the ordinary query builder: the JSON column holds the object, not a string.
    const [row] = await ctx.db
      .select({ budgets: callers.budgets, allow: callers.allow })
      .from(callers)
      .where(eq(callers.name, "pre-a"));
    expect(row).toEqual({ budgets, allow: ["fs.read"] });
  });

  it("runs inside a transaction and rolls back with it", async () => {
    await expect(
      ctx.db.transaction(async (tx) => {
        await addCaller(tx, { name: "pre-rolled-back", allow: [], budgets: {} });
        throw new Error("undo");
      }),
    ).rejects.toThrow("undo");
    const rows = await ctx.db
      .select({ id: callers.id })
      .from(callers)
      .where(eq(callers.name, "pre-rolled-back"));
    expect(rows).toEqual([]);
  });

  it("sets a JSON column through its encoder, and null as SQL NULL, not the JSON null", async () => {
    await ctx.db.execute(sql`create table prebuilt_probe (id serial primary key, doc jsonb)`);
    await ctx.db.execute(sql`insert into prebuilt_probe (doc) values ('{}'), ('{}')`);
    await setDoc(ctx.db, { id: 1, doc: { a: [1, "two"] } });
    await setDoc(ctx.db, { id: 2, doc: null });
    const rows = await selectRows<{ id: number; doc: unknown; sqlNull: boolean }>(
      ctx.db,
      sql`select id, doc, doc is null as "sqlNull" from prebuilt_probe order by id`,
    );
    expect(rows).toEqual([
      { id: 1, doc: { a: [1, "two"] }, sqlNull: false },
      { id: 2, doc: null, sqlNull: true },
    ]);
  });

  it("refuses a call without a value for one of its placeholders", async () => {
    await expect(setDoc(ctx.db, { id: 1 } as never)).rejects.toThrow(
      'no value for the placeholder "doc"',
    );
  });

  it("sends a value serialised once (storedJson) as it is, stored as toStorableJson stores it", async () => {
    await ctx.db.execute(
      sql`create table if not exists prebuilt_probe (id serial primary key, doc jsonb)`,
    );
    await ctx.db.execute(sql`insert into prebuilt_probe (id, doc) values (10, '{}'), (11, '{}')`);
    // A NUL and a lone surrogate (which jsonb refuses) take the walk; plain text goes as it is.
    const awkward = { "k\u0000": ["a\u0000b", "\ud800", { n: 1.5, t: true }], when: new Date(0) };
    const plain = { text: "pong", parts: [{ type: "text", text: 'a "quoted" \\ line' }] };
    await setDoc(ctx.db, { id: 10, doc: storedJson(awkward) });
    await setDoc(ctx.db, { id: 11, doc: storedJson(plain) });
    const rows = await selectRows<{ id: number; doc: unknown }>(
      ctx.db,
      sql`select id, doc from prebuilt_probe where id in (10, 11) order by id`,
    );
    expect(rows).toEqual([
      { id: 10, doc: toStorableJson(awkward) },
      { id: 11, doc: plain },
    ]);
    expect(storedJson(null)).toBeNull();
  });

  it("inserts by the columns given, defaults for the rest, and maps the row as drizzle does", async () => {
    const at = new Date("2026-01-02T03:04:05.678Z");
    const made = await insertCallerRow(ctx.db, { name: "pre-mapped", kind: "peer", revokedAt: at });
    const plain = await insertCallerRow(ctx.db, { name: "pre-defaults", kind: "peer" });
    const [drizzleRow] = await ctx.db.select().from(callers).where(eq(callers.name, "pre-mapped"));
    expect(made).toEqual(drizzleRow);
    expect(made.revokedAt).toEqual(at);
    expect(plain).toMatchObject({ tier: "none", allow: [], budgets: {}, revokedAt: null });
    // A row read raw maps to what drizzle's own select answers.
    const [raw] = await selectRows(ctx.db, sql`select * from callers where name = 'pre-mapped'`);
    expect(tableRowMapper(callers)(raw ?? {})).toEqual(drizzleRow);
  });
});
