// The audit outbox and its chainer (src/db/audit.ts, src/db/audit-chainer.ts): events exist iff
// their transaction committed, are chained exactly once in one contiguous chain across instances,
// a late-committing transaction is waited for rather than overtaken, a chainer that dies
// mid-pass is replaced by any other, and the triggers refuse any change to an event or its link.
// No sleeps: the tests hold transactions open with promises and wait with flush().

import { spawn } from "node:child_process";
import { asc, eq, isNull, sql } from "drizzle-orm";
import { expect, it } from "vitest";
import {
  type AuditEventInput,
  appendAuditEvent,
  chainAuditEvents,
  flushAuditChain,
  verifyAuditChain,
} from "../../src/db/audit.ts";
import { startAuditChainer } from "../../src/db/audit-chainer.ts";
import type { Database } from "../../src/db/client.ts";
import { advisoryLockSpace, lockKeys } from "../../src/db/locks.ts";
import { auditTrail, callers } from "../../src/db/schema.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import { silentLogger } from "../../src/log.ts";
import { describeEachDatabase } from "../support/databases.ts";

function event(actor: string, i: number): AuditEventInput {
  // The chain takes any text at run time; the types admit only peergate's own kinds and actors.
  return {
    actor: actor as AuditActor,
    kind: "test.event" as AuditKind,
    subject: `item:${i}`,
    data: { i },
  };
}

/** A transaction that appends an event and stays open until `commit()` or `rollBack()`. */
function openTransaction(database: Database, actor: string) {
  let release: (commit: boolean) => void = () => {};
  const decided = new Promise<boolean>((resolve) => {
    release = resolve;
  });
  let appended: (id: number) => void = () => {};
  const inserted = new Promise<number>((resolve) => {
    appended = resolve;
  });
  const done = database.db
    .transaction(async (tx) => {
      const row = await appendAuditEvent(tx, event(actor, 0));
      appended(row.id);
      if (!(await decided)) throw new Error("roll back");
    })
    .catch((error: unknown) => {
      if (!(error instanceof Error && error.message === "roll back")) throw error;
    });
  return {
    inserted,
    commit: async () => {
      release(true);
      await done;
    },
    rollBack: async () => {
      release(false);
      await done;
    },
  };
}

async function chainRows(database: Database) {
  return database.db.select().from(auditTrail).orderBy(asc(auditTrail.seq));
}

describeEachDatabase("audit outbox and chainer", (ctx) => {
  it("stores an event unchained in its transaction, and flush() chains it", async () => {
    const appended = await appendAuditEvent(ctx.db, event("a", 1));
    const [before] = await ctx.db.select().from(auditTrail);
    expect(before).toMatchObject({ id: appended.id, seq: null, prevHash: null, hash: null });
    expect(await verifyAuditChain(ctx.db, { flush: false })).toMatchObject({
      ok: true,
      count: 0,
      unchained: { count: 1 },
    });
    expect(await flushAuditChain(ctx.db)).toEqual({ chained: 1, remaining: 0 });
    const [after] = await ctx.db.select().from(auditTrail);
    expect(after).toMatchObject({ id: appended.id, seq: 1 });
    expect(await verifyAuditChain(ctx.db, { flush: false })).toMatchObject({
      ok: true,
      count: 1,
      unchained: { count: 0, oldestAgeMs: null },
    });
  });

  it("a rolled-back transaction leaves no event, chained or not", async () => {
    await expect(
      ctx.db.transaction(async (tx) => {
        await tx.insert(callers).values({ name: "doomed", kind: "peer" });
        await appendAuditEvent(tx, event("admin", 1));
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await ctx.db.select().from(auditTrail)).toEqual([]);
    expect(await verifyAuditChain(ctx.db)).toEqual({
      ok: true,
      count: 0,
      lastHash: "0".repeat(64),
      unchained: { count: 0, oldestAgeMs: null },
    });
  });

  it("the chainer chains in batches; stop() chains what is left; flush() waits for it", async () => {
    const chainer = startAuditChainer({ database: ctx.database, logger: silentLogger });
    try {
      for (let i = 1; i <= 25; i++) await appendAuditEvent(ctx.db, event("a", i));
      await chainer.flush();
      expect(await ctx.db.select().from(auditTrail).where(isNull(auditTrail.seq))).toEqual([]);
    } finally {
      await chainer.stop();
    }
    // After stop, one last pass has chained whatever was committed before it.
    const late = startAuditChainer({ database: ctx.database, logger: silentLogger, batchSize: 4 });
    for (let i = 26; i <= 35; i++) await appendAuditEvent(ctx.db, event("a", i));
    await late.stop();
    await late.stop();
    const rows = await chainRows(ctx.database);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 35 }, (_, i) => i + 1));
    expect(rows.map((r) => (r.data as { i: number }).i)).toEqual(
      Array.from({ length: 35 }, (_, i) => i + 1),
    );
    expect(await verifyAuditChain(ctx.db, { batchSize: 7 })).toMatchObject({ ok: true, count: 35 });
  });

  it("the triggers refuse every change to an event and to its link, before and after chaining", async () => {
    const { id } = await appendAuditEvent(ctx.db, event("a", 1));
    // An unchained event cannot be edited or deleted either.
    await expect(
      ctx.db.execute(sql`update audit_events set actor = 'mallory' where id = ${id}`),
    ).rejects.toHaveProperty(
      "cause.message",
      expect.stringContaining("audit_events is append-only"),
    );
    await expect(ctx.db.execute(sql`delete from audit_events where id = ${id}`)).rejects.toThrow();
    await flushAuditChain(ctx.db);
    // Chained: the event row is still never updated (chaining wrote its link instead) …
    await expect(
      ctx.db.execute(sql`update audit_events set actor = 'mallory' where id = ${id}`),
    ).rejects.toThrow();
    // … and the link is written once: never changed, never removed to "re-chain" the event.
    await expect(
      ctx.db.execute(sql`update audit_chain set hash = repeat('b', 64) where event_id = ${id}`),
    ).rejects.toHaveProperty(
      "cause.message",
      expect.stringContaining("audit_chain is append-only"),
    );
    await expect(
      ctx.db.execute(sql`delete from audit_chain where event_id = ${id}`),
    ).rejects.toThrow();
    await expect(
      ctx.db.execute(
        sql`insert into audit_chain (seq, event_id, prev_hash, hash) values (2, ${id}, 'p', 'h')`,
      ),
    ).rejects.toThrow();
    await expect(ctx.db.execute(sql`truncate audit_events`)).rejects.toThrow();
    await expect(ctx.db.execute(sql`truncate audit_chain`)).rejects.toThrow();
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 1 });
  });

  it("detects tampering done before the chain: an edit after chaining still breaks it", async () => {
    for (let i = 1; i <= 4; i++) await appendAuditEvent(ctx.db, event("a", i));
    await flushAuditChain(ctx.db);
    await ctx.db.transaction(async (tx) => {
      await tx.execute(sql`alter table audit_events disable trigger user`);
      await tx.execute(
        sql`update audit_events set data = '{"i": 9}'
             where id = (select event_id from audit_chain where seq = 2)`,
      );
      await tx.execute(sql`alter table audit_events enable trigger user`);
    });
    // New events chain on top of the tampered head; verify still names the edited one.
    await appendAuditEvent(ctx.db, event("a", 5));
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 2, reason: "content" });
    expect((await chainRows(ctx.database)).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it.runIf(ctx.kind === "postgres")(
    "a transaction that inserted first and commits last is chained first, not skipped",
    async () => {
      const other = await ctx.openSecondConnection();
      const slow = openTransaction(other, "slow");
      const slowId = await slow.inserted;
      for (let i = 1; i <= 3; i++) await appendAuditEvent(ctx.db, event("fast", i));
      // The slow transaction is older than the fast ones: nothing after it may be chained yet.
      expect(await chainAuditEvents(ctx.db)).toMatchObject({ chained: 0, busy: false });
      expect(await verifyAuditChain(ctx.db, { flushTimeoutMs: 0 })).toMatchObject({
        ok: true,
        count: 0,
        unchained: { count: 3 },
      });
      const flushed = flushAuditChain(ctx.db);
      await slow.commit();
      expect(await flushed).toMatchObject({ remaining: 0 });
      const rows = await chainRows(ctx.database);
      expect(rows.map((r) => [r.seq, r.actor])).toEqual([
        [1, "slow"],
        [2, "fast"],
        [3, "fast"],
        [4, "fast"],
      ]);
      expect(rows[0]?.id).toBe(slowId);
      expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 4 });
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "a transaction still open when others are chained is chained after them, not skipped",
    async () => {
      const other = await ctx.openSecondConnection();
      await appendAuditEvent(ctx.db, event("first", 1));
      // Inserted now, but its transaction id is taken only after the fast ones have committed.
      await other.db.transaction(async (tx) => {
        await tx.execute(sql`select 1`);
        const fast = await appendAuditEvent(ctx.db, event("fast", 2));
        await flushAuditChain(ctx.db);
        const [chained] = await ctx.db.select().from(auditTrail).where(eq(auditTrail.id, fast.id));
        expect(chained?.seq).toBe(2);
        await appendAuditEvent(tx, event("late", 3));
      });
      await appendAuditEvent(ctx.db, event("after", 4));
      await flushAuditChain(ctx.db);
      expect((await chainRows(ctx.database)).map((r) => [r.seq, r.actor])).toEqual([
        [1, "first"],
        [2, "fast"],
        [3, "late"],
        [4, "after"],
      ]);
      expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 4 });
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "a rolled-back transaction held open does not hold the chain back once it ends",
    async () => {
      const other = await ctx.openSecondConnection();
      const doomed = openTransaction(other, "doomed");
      await doomed.inserted;
      await appendAuditEvent(ctx.db, event("kept", 1));
      const flushed = flushAuditChain(ctx.db);
      await doomed.rollBack();
      expect(await flushed).toMatchObject({ remaining: 0 });
      expect((await chainRows(ctx.database)).map((r) => [r.seq, r.actor])).toEqual([[1, "kept"]]);
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "two instances appending and chaining at once make one contiguous chain, each event once",
    async () => {
      const other = await ctx.openSecondConnection();
      const chainers = [ctx.database, other].map((database) =>
        startAuditChainer({ database, logger: silentLogger, intervalMs: 1, batchSize: 16 }),
      );
      const perInstance = 300;
      const appendFrom = (database: Database, actor: string) =>
        Promise.all(
          Array.from({ length: perInstance }, (_, i) =>
            database.db.transaction(async (tx) => {
              await tx.execute(sql`select 1`);
              const row = await appendAuditEvent(tx, event(actor, i));
              // Some transactions record two events: both commit, both are chained.
              if (i % 10 === 0) await appendAuditEvent(tx, event(actor, -i));
              return row.id;
            }),
          ),
        );
      try {
        const [a, b] = await Promise.all([
          appendFrom(ctx.database, "instance-a"),
          appendFrom(other, "instance-b"),
        ]);
        expect(new Set([...a, ...b]).size).toBe(2 * perInstance);
        await Promise.all(chainers.map((c) => c.flush()));
      } finally {
        await Promise.all(chainers.map((c) => c.stop()));
      }
      const total = 2 * perInstance + 2 * (perInstance / 10);
      const rows = await chainRows(ctx.database);
      expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      expect(new Set(rows.map((r) => r.id)).size).toBe(total);
      expect(rows.filter((r) => r.actor === "instance-b")).toHaveLength(total / 2);
      // The chain order is (transaction id, insertion id), whoever chained which batch.
      const order = [...rows].sort((x, y) => x.xactId - y.xactId || x.id - y.id);
      expect(order.map((r) => r.seq)).toEqual(rows.map((r) => r.seq));
      expect(await verifyAuditChain(other.db, { batchSize: 64 })).toMatchObject({
        ok: true,
        count: total,
        unchained: { count: 0 },
      });
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "a chainer killed while holding the lock is replaced by the next pass of any instance",
    async () => {
      for (let i = 1; i <= 5; i++) await appendAuditEvent(ctx.db, event("a", i));
      // Another instance, mid-pass: it holds the chain lock in an open transaction.
      const dying = spawn(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `import postgres from "postgres";
           const sql = postgres(process.env.DYING_URL, { max: 1, onnotice: () => {} });
           await sql.begin(async (tx) => {
             await tx\`select pg_advisory_xact_lock(${advisoryLockSpace}, ${lockKeys.audit})\`;
             console.log("locked");
             await new Promise(() => {});
           });`,
        ],
        { cwd: process.cwd(), env: { ...process.env, DYING_URL: ctx.url }, stdio: "pipe" },
      );
      const exited = new Promise((resolve) => dying.once("exit", resolve));
      try {
        let err = "";
        dying.stderr.on("data", (chunk: Buffer) => {
          err += chunk.toString();
        });
        await new Promise<void>((resolve, reject) => {
          let out = "";
          dying.stdout.on("data", (chunk: Buffer) => {
            out += chunk.toString();
            if (out.includes("locked")) resolve();
          });
          dying.once("exit", (code) =>
            reject(new Error(`the holder exited early (${code}): ${err}`)),
          );
        });
        const chainer = startAuditChainer({ database: ctx.database, logger: silentLogger });
        try {
          expect(await chainAuditEvents(ctx.db)).toMatchObject({ chained: 0, busy: true });
          const flushed = chainer.flush();
          // The instance is killed: PostgreSQL sees its connection close, rolls its transaction
          // back and frees the lock; the next pass here takes over.
          dying.kill("SIGKILL");
          await exited;
          expect(await flushed).toMatchObject({ remaining: 0 });
        } finally {
          await chainer.stop();
        }
        expect((await chainRows(ctx.database)).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
        expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 5 });
      } finally {
        dying.kill("SIGKILL");
        await exited;
      }
    },
  );
});
