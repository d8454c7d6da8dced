// What src/db/patch-postgres-driver.mjs mends in postgres.js 3.4.9, each against a real
// PostgreSQL (each test fails without its mend). Cancelling a statement that waits behind another
// on the same connection, as the statement deadline does (src/db/statement-deadline.ts), must
// leave the connection answering each query with its own result:
// - a cancelled query pipelined on a pooled connection was skipped when its turn came, so every
//   answer after it went to the next query, for good;
// - a cancelled query queued on a busy reserved connection stalled it, so the statements behind it
//   (a transaction's ROLLBACK) were never sent and the connection never came back.
// And a session the server terminated must not fail the next one: its FATAL error, held for the
// statement it interrupted, outlived the connection and failed the reconnected session's first
// statement.
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { withStatementDeadline } from "../../src/db/statement-deadline.ts";
import { UnavailableError } from "../../src/errors.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const skip = postgresSkipReason();

/** Long enough that a CancelRequest lands while it runs, however loaded the machine. */
const longSleep = "select pg_sleep(30), 'slept' as x";

/** `work`'s outcome, or "no answer" if it has none within `ms` (a stalled connection). */
const within = <T>(work: Promise<T>, ms: number): Promise<T | "no answer"> =>
  Promise.race([
    work,
    new Promise<"no answer">((resolve) => setTimeout(() => resolve("no answer"), ms).unref()),
  ]);

const outcome = (query: PromiseLike<unknown>) =>
  Promise.resolve(query).then(
    (rows) => ({ rows: [...(rows as postgres.Row[])] }),
    (error: { code?: string }) => ({ error: error.code }),
  );

describe.skipIf(skip !== undefined)(
  `cancelling a queued statement in postgres.js${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let created: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let sql: postgres.Sql;
    beforeAll(async () => {
      created = await createPostgresTestDatabase();
    });
    // One connection, so every query of a test shares it; a new one (a new server process) for
    // each test, because a CancelRequest names a process, not a statement: one that lands late —
    // the server takes it whenever it reads it, later still on a loaded machine — would cancel
    // whatever the next test runs on the same process.
    beforeEach(async () => {
      sql = postgres(created.url, { max: 1, onnotice: () => {} });
      await sql`select 1`;
    });
    afterEach(async () => {
      await sql?.end({ timeout: 5 });
    });
    afterAll(async () => {
      await created?.drop();
    });

    it("a pipelined query cancelled before its turn takes its own answer, and the ones behind it theirs", async () => {
      const first = sql.unsafe("select pg_sleep(1), 'first' as x").execute();
      const cancelled = sql.unsafe(longSleep).execute();
      const behind = sql.unsafe("select 'behind' as x").execute();
      // Wait until all three are on the wire (postgres.js sends on a later tick): cancelled then,
      // `cancelled` gets its CancelRequest when its turn comes.
      while (!(behind as unknown as { state?: unknown }).state) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect((cancelled as unknown as { active?: boolean }).active).toBeFalsy();
      void cancelled.cancel();
      // PostgreSQL drops a CancelRequest that reaches the backend while it reads its next command
      // (between `first`'s end and `cancelled`'s start: rare, but seen on a loaded machine). Then
      // `cancelled` runs its whole sleep and answers with its own rows. Either way each query takes
      // its own answer, which is what the mend is for: unmended, `behind` takes `cancelled`'s.
      const answered = await within(Promise.all([first, cancelled, behind].map(outcome)), 60_000);
      expect(answered).not.toBe("no answer");
      const [firstAnswer, cancelledAnswer, behindAnswer] = answered as unknown[];
      expect(firstAnswer).toEqual({ rows: [{ pg_sleep: "", x: "first" }] });
      expect([{ error: "57014" }, { rows: [{ pg_sleep: "", x: "slept" }] }]).toContainEqual(
        cancelledAnswer,
      );
      expect(behindAnswer).toEqual({ rows: [{ x: "behind" }] });
      // The connection stays in step afterwards.
      expect(await outcome(sql.unsafe("select 'after' as x"))).toEqual({ rows: [{ x: "after" }] });
    }, 120_000);

    it("a query cancelled while queued on a busy reserved connection is skipped, and the rest are sent", async () => {
      const reserved = await sql.reserve();
      try {
        // A statement with a parameter not yet prepared is described first: the connection is
        // busy until it is answered, and what follows waits in the reservation's own queue.
        const busy = reserved.unsafe("select pg_sleep(2), $1::text as x", ["busy"]).execute();
        const cancelled = reserved.unsafe("select 'cancelled' as x").execute();
        const behind = reserved.unsafe("select 'behind' as x").execute();
        while (!(busy as unknown as { state?: unknown }).state) {
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        // Still in the reservation's queue, not on the wire: cancelling drops it there.
        expect((cancelled as unknown as { state?: unknown }).state).toBeFalsy();
        await cancelled.cancel();
        expect(await outcome(cancelled)).toEqual({ error: "57014" });
        expect(await within(outcome(busy), 20_000)).toEqual({
          rows: [{ pg_sleep: "", x: "busy" }],
        });
        expect(await within(outcome(behind), 20_000)).toEqual({ rows: [{ x: "behind" }] });
      } finally {
        reserved.release();
      }
      expect(await outcome(sql.unsafe("select 'after' as x"))).toEqual({ rows: [{ x: "after" }] });
    }, 60_000);

    it("a query cancelled while queued in a busy transaction is skipped, so the transaction rolls back and its connection returns", async () => {
      // sql.begin keeps a queue of its own like a reservation (the same shape, its own copy). A
      // failed statement fails the transaction (the driver's rule), so the cancelled one makes
      // it roll back: the ROLLBACK must be sent, not wait behind a query that is never sent.
      let behind: Promise<unknown> | undefined;
      const ended = await within(
        sql
          .begin(async (tx) => {
            const busy = tx.unsafe("select pg_sleep(2), $1::text as x", ["busy"]).execute();
            const cancelled = tx.unsafe("select 'cancelled' as x").execute();
            behind = outcome(tx.unsafe("select 'behind' as x").execute());
            while (!(busy as unknown as { state?: unknown }).state) {
              await new Promise((resolve) => setTimeout(resolve, 5));
            }
            expect((cancelled as unknown as { state?: unknown }).state).toBeFalsy();
            await cancelled.cancel();
            return Promise.all([busy, cancelled]);
          })
          .then(
            () => "committed",
            (error: { code?: string }) => error.code,
          ),
        20_000,
      );
      expect(ended).toBe("57014");
      expect(await within(behind as Promise<unknown>, 20_000)).toEqual({ rows: [{ x: "behind" }] });
      expect(await outcome(sql.unsafe("select 'after' as x"))).toEqual({ rows: [{ x: "after" }] });
    }, 60_000);

    it("a query cancelled before it reached a connection does not take the connection with it", async () => {
      // Asked for, then cancelled on the same tick: postgres.js hands a query to a connection on
      // the tick after, so the cancelled one must not be handed over (it would send nothing and
      // the connection would wait, marked busy, for an answer that never comes).
      const cancelled = sql.unsafe("select 'cancelled' as x").execute();
      void cancelled.cancel();
      expect(await outcome(cancelled)).toEqual({ error: "57014" });
      expect(await within(outcome(sql.unsafe("select 'after' as x")), 20_000)).toEqual({
        rows: [{ x: "after" }],
      });
    }, 60_000);

    const toldOf = (query: PromiseLike<unknown>) =>
      Promise.resolve(query).then(
        (rows) => ({ rows: [...(rows as postgres.Row[])] }),
        (error: { code?: string }) => ({
          error: error instanceof UnavailableError ? "deadline" : error.code,
        }),
      );

    it("the statement deadline cancels a stuck statement the server runs", async () => {
      const guarded = withStatementDeadline(sql as never, 150);
      const raw = sql as unknown as postgres.Sql<Record<string, never>>;
      // Cancelled at its deadline: the connection is free long before the statement's 30 s.
      expect(await toldOf(guarded.unsafe(longSleep))).toEqual({ error: "deadline" });
      expect(await within(outcome(raw.unsafe("select 'free' as x")), 20_000)).toEqual({
        rows: [{ x: "free" }],
      });
    }, 60_000);

    it("the statement deadline leaves a statement waiting behind another alone, so the statement after that is not hit", async () => {
      const guarded = withStatementDeadline(sql as never, 150);
      const raw = sql as unknown as postgres.Sql<Record<string, never>>;
      // `behind` waits behind `running` (no deadline of its own) past its deadline.
      // In this order on the wire (postgres.js sends each on the tick after it is asked for).
      const running = toldOf(raw.unsafe("select pg_sleep(2), 'running' as x"));
      const behind = toldOf(guarded.unsafe("select 'behind' as x"));
      const after = toldOf(raw.unsafe("select pg_sleep(1), 'after' as x"));
      const [a, b, c] = await Promise.all([running, behind, after]);
      expect(a).toEqual({ rows: [{ pg_sleep: "", x: "running" }] });
      expect(b).toEqual({ error: "deadline" });
      // A CancelRequest sent for `behind` when its turn came would have landed on `after`.
      expect(c).toEqual({ rows: [{ pg_sleep: "", x: "after" }] });
    }, 60_000);
  },
);

describe.skipIf(skip !== undefined)(
  `a terminated session in postgres.js${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let created: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let sql: postgres.Sql;
    let admin: postgres.Sql;
    beforeAll(async () => {
      created = await createPostgresTestDatabase();
      sql = postgres(created.url, { max: 1, onnotice: () => {} });
      admin = postgres(created.url, { max: 1, onnotice: () => {} });
    });
    afterAll(async () => {
      await sql?.end({ timeout: 5 });
      await admin?.end({ timeout: 5 });
      await created?.drop();
    });

    it("leaves its FATAL error with the statement it interrupted: the reconnected session's first statement runs", async () => {
      const [me] = await sql`select pg_backend_pid() as pid`;
      const pid = Number(me?.pid);
      const interrupted = outcome(sql.unsafe(longSleep));
      // Terminate the session only once the server runs the statement in it.
      for (;;) {
        const [row] = await admin`select state from pg_stat_activity where pid = ${pid}`;
        if (row?.state === "active") break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await admin`select pg_terminate_backend(${pid})`;
      const failed = await within(interrupted, 20_000);
      expect(failed).not.toBe("no answer");
      expect((failed as { error?: string }).error).toMatch(/^(57P01|CONNECTION_CLOSED)$/);
      // The pool's one connection reconnects for this: a new session, with no error of its own.
      expect(await within(outcome(sql`select 'next' as x`), 20_000)).toEqual({
        rows: [{ x: "next" }],
      });
    }, 60_000);
  },
);
