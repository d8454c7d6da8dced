// The embedded database's worker thread (src/db/pglite-thread.ts): what drizzle and peergate rely
// on from PGlite must hold across the thread boundary — errors with their SQLSTATE, one
// transaction at a time with other statements waiting, notifications, and failing closed when the
// worker dies.
import { messages, type PGlite, types } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/pglite";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { openPgliteThread, type PgliteThread } from "../../src/db/pglite-thread.ts";
import { commitAfterStatements } from "../../src/db/pipelined-transactions.ts";
import { UnavailableError } from "../../src/errors.ts";

const opened: PgliteThread[] = [];
/** A cluster with the table, dumped once: a new cluster costs seconds, loading a dump little. */
let template: Blob;

beforeAll(async () => {
  const thread = await openPgliteThread({ dataDir: undefined, loadDataDir: undefined });
  try {
    await thread.exec("create table item (id int primary key, note text)");
    template = await thread.dumpDataDir("none");
  } finally {
    await thread.close();
  }
});

async function open(): Promise<PgliteThread> {
  const thread = await openPgliteThread({ dataDir: undefined, loadDataDir: template });
  opened.push(thread);
  return thread;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((thread) => thread.close()));
});

describe("PGlite in a worker thread", () => {
  it("carries a database error across with its SQLSTATE and fields", async () => {
    const thread = await open();
    await thread.query("insert into item values (1, 'a')");
    const error = await thread.query("insert into item values (1, 'b')").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(messages.DatabaseError);
    expect(error).toMatchObject({
      code: "23505",
      constraint: "item_pkey",
      table: "item",
      detail: "Key (id)=(1) already exists.",
      message: expect.stringContaining("duplicate key"),
    });
    // The session goes on after an error.
    expect((await thread.query("select count(*)::int as n from item")).rows).toEqual([{ n: 1 }]);
  });

  it("keeps a statement from outside waiting until the open transaction ends", async () => {
    const thread = await open();
    const order: string[] = [];
    let outside: Promise<unknown> | undefined;
    const rolledBack = thread.transaction(async (tx) => {
      await tx.query("insert into item values (1, 'inside')");
      // Were this run inside the transaction, it would see the row the transaction inserted.
      outside = thread.query("select count(*)::int as n from item").then((result) => {
        order.push("outside");
        return result.rows;
      });
      await tx.query("select pg_sleep(0.05)");
      order.push("transaction");
      throw new Error("roll it back");
    });
    await expect(rolledBack).rejects.toThrow("roll it back");
    expect(await outside).toEqual([{ n: 0 }]);
    expect(order).toEqual(["transaction", "outside"]);
  });

  it("posts a statement from outside right behind the open transaction, before the transactions waiting", async () => {
    const thread = await open();
    const order: string[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = () => {};
    const holds = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const first = thread.transaction(async (tx) => {
      await tx.query("insert into item values (1, 'first')");
      holding();
      await held;
      order.push("first");
    });
    await holds;
    // Two transactions ask for the session, then two statements from outside (writes, in order).
    const queued = [2, 3].map((id) =>
      thread.transaction(async (tx) => {
        await tx.query("insert into item values ($1, 'queued')", [id]);
        order.push(`transaction ${id}`);
      }),
    );
    const outside = [
      thread.query("insert into item values (10, 'outside')").then(() => order.push("write")),
      thread
        .query<{ ids: number[] }>("select array_agg(id order by id) as ids from item")
        .then((result) => {
          order.push("read");
          return result.rows[0]?.ids;
        }),
    ];
    release();
    await Promise.all([first, ...queued]);
    // The read saw the first transaction and the write before it, and neither queued transaction.
    expect(await outside[1]).toEqual([1, 10]);
    expect(order).toEqual(["first", "write", "read", "transaction 2", "transaction 3"]);
  });

  it("posts COMMIT behind the declared statements and hands the session on before the function returns", async () => {
    const thread = await open();
    let outside: Promise<unknown> | undefined;
    const committed = thread.transaction(async (tx) => {
      tx.commitAfter(2);
      const writes = [
        tx.query("insert into item values (1, 'a')"),
        tx.query("insert into item values (2, 'b')"),
      ];
      // The session is free already: a statement from outside runs now, and sees both rows.
      outside = thread.query("select count(*)::int as n from item").then((r) => r.rows);
      await Promise.all([...writes, outside]);
      await expect(tx.query("select 1")).rejects.toThrow("after its transaction's COMMIT");
    });
    await committed;
    expect(await outside).toEqual([{ n: 2 }]);
  });

  it("rejects with the declared statement's error when it failed after COMMIT went out, and commits nothing", async () => {
    const thread = await open();
    await thread.query("insert into item values (1, 'a')");
    const committed = thread.transaction(async (tx) => {
      tx.commitAfter(2);
      const writes = [
        tx.query("insert into item values (2, 'b')"),
        tx.query("insert into item values (1, 'again')"),
      ];
      await Promise.allSettled(writes);
    });
    await expect(committed).rejects.toMatchObject({ code: "23505" });
    expect((await thread.query("select count(*)::int as n from item")).rows).toEqual([{ n: 1 }]);
  });

  it("is what commitAfterStatements reaches through a drizzle transaction", async () => {
    const thread = await open();
    const db = drizzle({ client: thread as unknown as PGlite });
    let seen: unknown;
    await db.transaction(async (tx) => {
      commitAfterStatements(tx, 1);
      await tx.execute(sql`insert into item values (1, 'a')`);
      // Committed already: the session answers a statement from outside while this runs.
      seen = (await thread.query("select count(*)::int as n from item")).rows;
    });
    expect(seen).toEqual([{ n: 1 }]);
  });

  it("runs transactions one after another, each committed or rolled back whole", async () => {
    const thread = await open();
    await Promise.all(
      [1, 2, 3, 4].map((id) =>
        thread
          .transaction(async (tx) => {
            await tx.query("insert into item values ($1, 'x')", [id]);
            if (id % 2 === 0) throw new Error("even");
            await tx.query("update item set note = 'odd' where id = $1", [id]);
          })
          .catch(() => {}),
      ),
    );
    const rows = await thread.query("select id, note from item order by id");
    expect(rows.rows).toEqual([
      { id: 1, note: "odd" },
      { id: 3, note: "odd" },
    ]);
  });

  it("rejects COMMIT of a transaction whose statement failed, and commits nothing", async () => {
    const thread = await open();
    const committed = thread.transaction(async (tx) => {
      await tx.query("insert into item values (1, 'a')");
      await tx.query("select 1/0").catch(() => {});
    });
    await expect(committed).rejects.toThrow("rolled back");
    expect((await thread.query("select count(*)::int as n from item")).rows).toEqual([{ n: 0 }]);
  });

  it("applies the caller's parsers, which cannot cross threads, on this side", async () => {
    const thread = await open();
    const result = await thread.query<unknown[]>(
      "select '2026-01-02 03:04:05+00'::timestamptz as at, 7::int as n",
      [],
      { rowMode: "array", parsers: { [types.TIMESTAMPTZ]: (value: string) => `raw:${value}` } },
    );
    expect(result.rows).toEqual([["raw:2026-01-02 03:04:05+00", 7]]);
    const plain = await thread.query<{ at: Date }>("select now() as at");
    expect(plain.rows[0]?.at).toBeInstanceOf(Date);
  });

  it("forwards notifications until the listener stops", async () => {
    const thread = await open();
    const payloads: string[] = [];
    const unlisten = await thread.listen("item_events", (payload) => payloads.push(payload));
    await thread.query("select pg_notify('item_events', 'one')");
    // The notification is posted before the answer to the statement that sent it.
    expect(payloads).toEqual(["one"]);
    await unlisten();
    await thread.query("select pg_notify('item_events', 'two')");
    await thread.query("select 1");
    expect(payloads).toEqual(["one"]);
  });

  it("fails every pending and later call closed when the worker dies", async () => {
    const thread = await open();
    const pending = [thread.query("select pg_sleep(60)"), thread.query("select 1")];
    await thread.terminate();
    for (const call of pending) await expect(call).rejects.toBeInstanceOf(UnavailableError);
    await expect(thread.query("select 1")).rejects.toBeInstanceOf(UnavailableError);
    expect(thread.closed).toBe(true);
    await thread.close();
  });

  it("closes once, however often asked, and refuses calls afterwards", async () => {
    const thread = await open();
    await Promise.all([thread.close(), thread.close()]);
    await thread.close();
    expect(thread.closed).toBe(true);
    await expect(thread.query("select 1")).rejects.toBeInstanceOf(UnavailableError);
  });

  it("starts from a dump of another database", async () => {
    const source = await open();
    await source.query("insert into item values (5, 'kept')");
    const dump = await source.dumpDataDir("none");
    const copy = await openPgliteThread({ dataDir: undefined, loadDataDir: dump });
    opened.push(copy);
    expect((await copy.query("select id, note from item")).rows).toEqual([{ id: 5, note: "kept" }]);
    // The source is untouched by the copy's start.
    expect((await source.query("select count(*)::int as n from item")).rows).toEqual([{ n: 1 }]);
  });
});
