// Transactions on PostgreSQL send BEGIN with their first statements, and may send COMMIT behind
// their last writes (src/db/pipelined-transactions.ts). What must hold whatever the pipelining:
// nothing commits when a statement in the transaction failed, even one the caller did not await;
// a statement the caller did not declare is refused rather than run outside the transaction;
// savepoints roll back alone; and a connection lost mid-transaction is not handed back to the pool.
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase, selectRows } from "../../src/db/client.ts";
import { commitAfterStatements } from "../../src/db/pipelined-transactions.ts";
import { callers } from "../../src/db/schema.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `pipelined transactions on PostgreSQL${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let created: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let database: Database;
    beforeAll(async () => {
      created = await createPostgresTestDatabase({ migrate: true });
      database = await openDatabase({ kind: "postgres", url: created.url, countRoundTrips: true });
    });
    afterAll(async () => {
      await database?.close();
      await created?.drop();
    });

    const names = async (prefix: string) =>
      (
        await selectRows<{ name: string }>(
          database.db,
          sql`select name from callers where name like ${`${prefix}%`} order by name`,
        )
      ).map((r) => r.name);

    const trips = async (work: () => Promise<unknown>) => {
      const counter = database.roundTrips;
      if (!counter) throw new Error("no round-trip counter on a postgres database");
      const before = counter.read().roundTrips;
      await work();
      return counter.read().roundTrips - before;
    };

    it("counts round trips only on a database opened to count them, as the server's is not", async () => {
      const plain = await openDatabase({ kind: "postgres", url: created.url });
      try {
        expect(plain.roundTrips).toBeUndefined();
        await plain.db.transaction(async (tx) => {
          await tx.insert(callers).values({ name: "pipe-uncounted", kind: "peer" });
        });
      } finally {
        await plain.close();
      }
      expect(await names("pipe-uncounted")).toEqual(["pipe-uncounted"]);
      expect(database.roundTrips).toBeDefined();
    });

    it("sends BEGIN with the first statement, and commits what the transaction wrote", async () => {
      const used = await trips(() =>
        database.db.transaction(async (tx) => {
          await tx.insert(callers).values({ name: "pipe-a1", kind: "peer" });
          await tx.insert(callers).values({ name: "pipe-a2", kind: "peer" });
        }),
      );
      // BEGIN + insert, insert, COMMIT (postgres.js's own begin() takes 4).
      expect(used).toBe(3);
      expect(await names("pipe-a")).toEqual(["pipe-a1", "pipe-a2"]);
    });

    it("commits behind the declared writes in the same round trip", async () => {
      const used = await trips(() =>
        database.db.transaction(async (tx) => {
          await selectRows(tx, sql`select 1`);
          commitAfterStatements(tx, 2);
          await Promise.all([
            tx.insert(callers).values({ name: "pipe-b1", kind: "peer" }),
            tx.insert(callers).values({ name: "pipe-b2", kind: "peer" }),
          ]);
        }),
      );
      // BEGIN + select; both inserts and the COMMIT.
      expect(used).toBe(2);
      expect(await names("pipe-b")).toEqual(["pipe-b1", "pipe-b2"]);
    });

    it("rolls back behind a failed write and rejects with its error, COMMIT already sent", async () => {
      await database.db.insert(callers).values({ name: "pipe-c-taken", kind: "peer" });
      const attempt = database.db.transaction(async (tx) => {
        commitAfterStatements(tx, 2);
        await Promise.all([
          tx.insert(callers).values({ name: "pipe-c-new", kind: "peer" }),
          // A duplicate name: the unique index refuses it, the server answers COMMIT with ROLLBACK.
          tx.insert(callers).values({ name: "pipe-c-taken", kind: "peer" }),
        ]);
      });
      await expect(attempt).rejects.toThrow();
      await attempt.catch((error: unknown) => {
        const cause = (error as { cause?: { code?: string } }).cause ?? error;
        expect((cause as { code?: string }).code).toBe("23505");
      });
      expect(await names("pipe-c")).toEqual(["pipe-c-taken"]);
    });

    it("does not commit when a statement the caller did not await failed", async () => {
      await database.db.insert(callers).values({ name: "pipe-d-taken", kind: "peer" });
      const attempt = database.db.transaction(async (tx) => {
        await tx.insert(callers).values({ name: "pipe-d-new", kind: "peer" });
        // Sent, never awaited, and failing: the transaction must not commit the first insert.
        tx.insert(callers)
          .values({ name: "pipe-d-taken", kind: "peer" })
          .then(
            () => {},
            () => {},
          );
        await selectRows(tx, sql`select 1`).catch(() => {});
      });
      await expect(attempt).rejects.toThrow();
      expect(await names("pipe-d")).toEqual(["pipe-d-taken"]);
    });

    it("refuses a statement sent after the COMMIT went out, instead of running it outside", async () => {
      const attempt = database.db.transaction(async (tx) => {
        commitAfterStatements(tx, 1);
        await tx.insert(callers).values({ name: "pipe-e1", kind: "peer" });
        await tx.insert(callers).values({ name: "pipe-e2", kind: "peer" });
      });
      // drizzle wraps the refusal in its own error.
      await expect(attempt).rejects.toMatchObject({
        cause: { message: expect.stringMatching(/after its transaction's COMMIT/) },
      });
      // The declared write committed (as declared); the extra one never reached the server.
      expect(await names("pipe-e")).toEqual(["pipe-e1"]);
    });

    it("rolls a savepoint back alone when its function throws", async () => {
      await database.db.transaction(async (tx) => {
        await tx.insert(callers).values({ name: "pipe-f-outer", kind: "peer" });
        await tx
          .transaction(async (inner) => {
            await inner.insert(callers).values({ name: "pipe-f-inner", kind: "peer" });
            throw new Error("undo the inner part");
          })
          .catch(() => {});
        await tx.insert(callers).values({ name: "pipe-f-after", kind: "peer" });
      });
      expect(await names("pipe-f")).toEqual(["pipe-f-after", "pipe-f-outer"]);
    });

    it("keeps connections for statements outside a transaction, however many transactions wait", async () => {
      // More transactions than the pool has connections, each holding its connection until let go.
      let entered = 0;
      let letGo = () => {};
      const held = new Promise<void>((resolve) => {
        letGo = resolve;
      });
      const transactions = Array.from({ length: 12 }, (_, i) =>
        database.db.transaction(async (tx) => {
          await tx
            .insert(callers)
            .values({ name: `pipe-kept-${String(i).padStart(2, "0")}`, kind: "peer" });
          entered++;
          await held;
        }),
      );
      try {
        await eventually("the transactions allowed at once hold their connections", () =>
          expect(entered).toBe(8),
        );
        // A statement outside a transaction is answered while they hold them (were every
        // connection reserved, it would wait for them and they for this test: its deadline).
        const [row] = await selectRows<{ one: number }>(database.db, sql`select 1 as one`);
        expect(row?.one).toBe(1);
        expect(entered).toBe(8);
      } finally {
        letGo();
      }
      await Promise.all(transactions);
      expect(await names("pipe-kept-")).toHaveLength(12);
    });

    it("survives losing the transaction's connection: it fails, and the pool works after", async () => {
      const attempt = database.db.transaction(async (tx) => {
        await tx.insert(callers).values({ name: "pipe-g1", kind: "peer" });
        const [me] = await selectRows<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`);
        // The server ends this session while a statement runs in it, as a restart would.
        const waiting = selectRows(tx, sql`select pg_sleep(60)`);
        // It may fail before the terminate below answers: handled now, awaited after.
        waiting.catch(() => {});
        await selectRows(database.db, sql`select pg_terminate_backend(${me?.pid ?? 0}::int)`);
        await waiting;
      });
      await expect(attempt).rejects.toThrow();
      expect(await names("pipe-g")).toEqual([]);
      // More work than the pool has connections: a closed connection handed back would fail some.
      const results = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          database.db.transaction(async (tx) => {
            await tx
              .insert(callers)
              .values({ name: `pipe-h${String(i).padStart(2, "0")}`, kind: "peer" });
            const [row] = await tx
              .select({ name: callers.name })
              .from(callers)
              .where(eq(callers.name, `pipe-h${String(i).padStart(2, "0")}`));
            return row?.name;
          }),
        ),
      );
      expect(results).toHaveLength(25);
      expect(await names("pipe-h")).toHaveLength(25);
    });
  },
);
