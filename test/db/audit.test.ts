import { eq, sql } from "drizzle-orm";
import { expect, it } from "vitest";
import {
  appendAuditEvent,
  computeAuditHash,
  flushAuditChain,
  genesisHash,
  verifyAuditChain,
} from "../../src/db/audit.ts";
import { type Database, selectRows } from "../../src/db/client.ts";
import { auditTrail, callers } from "../../src/db/schema.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import { canonicalJson } from "../../src/json-text.ts";
import { describeEachDatabase } from "../support/databases.ts";

/** Appends `count` events one after the other, then chains them (as the chainer would). */
async function appendMany(database: Database, count: number, actor = "test"): Promise<void> {
  for (let i = 1; i <= count; i++) {
    // The chain takes any text at run time; the types admit only peergate's own kinds and actors.
    await appendAuditEvent(database.db, {
      actor: actor as AuditActor,
      kind: "test.event" as AuditKind,
      subject: `item:${i}`,
      data: { i, nested: { b: [1, "two", null], a: true }, when: new Date(0) },
    });
  }
  await flushAuditChain(database.db);
}

/**
 * Tampering needs the append-only triggers out of the way, as an attacker with DDL would do.
 * `event(n)` in a statement is the id of the event chained at seq n.
 */
async function tamper(database: Database, statements: string[]): Promise<void> {
  await database.db.transaction(async (tx) => {
    await tx.execute(sql`alter table audit_events disable trigger user`);
    await tx.execute(sql`alter table audit_chain disable trigger user`);
    for (const statement of statements) {
      await tx.execute(
        sql.raw(
          statement.replaceAll(
            /event\((\d+)\)/g,
            "(select event_id from audit_chain where seq = $1)",
          ),
        ),
      );
    }
    await tx.execute(sql`alter table audit_chain enable trigger user`);
    await tx.execute(sql`alter table audit_events enable trigger user`);
  });
}

it("canonical JSON sorts keys at every depth and drops undefined", () => {
  expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: undefined, x: 2 }], c: null } })).toBe(
    '{"a":{"c":null,"d":[3,{"x":2,"z":1}]},"b":1}',
  );
});

describeEachDatabase("audit chain", (ctx) => {
  it("is intact and empty at first", async () => {
    expect(await verifyAuditChain(ctx.db)).toEqual({
      ok: true,
      count: 0,
      lastHash: genesisHash,
      unchained: { count: 0, oldestAgeMs: null },
    });
  });

  it("chains events with contiguous seqs and verifies them across batches", async () => {
    await appendMany(ctx.database, 7);
    const rows = await ctx.db.select().from(auditTrail).orderBy(auditTrail.seq);
    expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(rows[0]?.prevHash).toBe(genesisHash);
    for (let i = 1; i < rows.length; i++) expect(rows[i]?.prevHash).toBe(rows[i - 1]?.hash);
    expect(await verifyAuditChain(ctx.db, { batchSize: 3 })).toEqual({
      ok: true,
      count: 7,
      lastHash: rows[6]?.hash,
      unchained: { count: 0, oldestAgeMs: null },
    });
  });

  it("stores hostile text (NUL, lone surrogates) so that the chain still verifies", async () => {
    const hostile = "caller\u0000name\ud800end";
    await appendAuditEvent(ctx.db, {
      actor: hostile as AuditActor,
      kind: "auth.failed",
      subject: hostile,
      data: { [hostile]: [hostile, { nested: hostile }], n: 0.1 + 0.2, big: 1e21 },
    });
    const [row] = await ctx.db.select().from(auditTrail);
    expect(row?.actor).toBe("caller\uFFFDname\uFFFDend");
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 1 });
  });

  it("stamps events with the database clock, in seq order", async () => {
    /** The database's clock, in milliseconds (JavaScript dates hold no finer). */
    const databaseNow = async () =>
      Number(
        (
          await selectRows<{ ms: number }>(
            ctx.db,
            sql`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`,
          )
        )[0]?.ms,
      );
    const before = Math.floor(await databaseNow());
    await appendMany(ctx.database, 3);
    const after = Math.ceil(await databaseNow());
    const rows = await ctx.db.select().from(auditTrail).orderBy(auditTrail.seq);
    const times = rows.map((r) => r.createdAt.getTime());
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Between two readings of the database's clock: its stamp, not this process's.
    for (const at of times) {
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(after);
    }
  });

  it("commits or rolls back with the change it records, leaving no gap", async () => {
    await expect(
      ctx.db.transaction(async (tx) => {
        await tx.insert(callers).values({ name: "doomed", kind: "peer" });
        await appendAuditEvent(tx, { actor: "admin", kind: "caller.created", data: {} });
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    const appended = await ctx.db.transaction(async (tx) => {
      await tx.insert(callers).values({ name: "kept", kind: "peer" });
      return appendAuditEvent(tx, {
        actor: "admin",
        kind: "caller.created",
        data: { name: "kept" },
      });
    });
    // The event is chained after its transaction commits: the rolled-back one left no gap.
    await flushAuditChain(ctx.db);
    const [kept] = await ctx.db.select().from(auditTrail).where(eq(auditTrail.id, appended.id));
    expect(kept?.seq).toBe(1);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 1 });
  });

  it("refuses UPDATE, DELETE and TRUNCATE on the audit table", async () => {
    await appendMany(ctx.database, 2);
    await expect(ctx.db.execute(sql`update audit_events set actor = 'x'`)).rejects.toThrow();
    await expect(ctx.db.execute(sql`delete from audit_events`)).rejects.toThrow();
    await expect(ctx.db.execute(sql`truncate audit_events`)).rejects.toThrow();
    // The links too: a chained event's seq and hashes can no more be changed than its content.
    await expect(
      ctx.db.execute(sql`update audit_chain set hash = repeat('b', 64)`),
    ).rejects.toHaveProperty(
      "cause.message",
      expect.stringContaining("audit_chain is append-only"),
    );
    await expect(ctx.db.execute(sql`update audit_chain set seq = seq + 10`)).rejects.toThrow();
    await expect(ctx.db.execute(sql`delete from audit_chain`)).rejects.toThrow();
    await expect(ctx.db.execute(sql`truncate audit_chain`)).rejects.toThrow();
    // Nor can an event be linked a second time.
    await expect(
      ctx.db.execute(
        sql`insert into audit_chain (seq, event_id, prev_hash, hash)
            select 3, event_id, hash, hash from audit_chain where seq = 2`,
      ),
    ).rejects.toThrow();
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 2 });
  });

  it("detects a deleted link as a gap at its seq", async () => {
    await appendMany(ctx.database, 5);
    await tamper(ctx.database, ["delete from audit_chain where seq = 2"]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({
      ok: false,
      seq: 2,
      reason: "gap",
      // The event itself is still stored: it is reported as unlinked.
      unchained: { count: 1 },
    });
  });

  it("detects two events swapped behind their links", async () => {
    await appendMany(ctx.database, 5);
    const links = await ctx.db.select().from(auditTrail).orderBy(auditTrail.seq);
    const [two, three] = [links[1]?.id, links[2]?.id];
    await tamper(ctx.database, [
      `update audit_chain set event_id = -1 where seq = 2`,
      `update audit_chain set event_id = ${two} where seq = 3`,
      `update audit_chain set event_id = ${three} where seq = 2`,
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 2, reason: "content" });
  });

  it("detects an event linked a second time, even with that link's hash recomputed", async () => {
    await appendMany(ctx.database, 3);
    const [second] = await ctx.db.select().from(auditTrail).where(eq(auditTrail.seq, 2));
    const [third] = await ctx.db.select().from(auditTrail).where(eq(auditTrail.seq, 3));
    if (!second || !third?.hash) throw new Error("no events");
    // A fourth link naming event 2 again, with the right hash for it at seq 4.
    const forged = computeAuditHash(third.hash, { ...second, seq: 4 });
    await tamper(ctx.database, [
      "drop index audit_chain_event_idx",
      `insert into audit_chain values (4, ${second.id}, '${third.hash}', '${forged}')`,
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({
      ok: false,
      seq: 4,
      reason: "duplicate",
      unchained: { count: 0 },
    });
  });

  it("detects an edited event and names its seq", async () => {
    await appendMany(ctx.database, 5);
    await tamper(ctx.database, [
      `update audit_events set data = jsonb_set(data, '{i}', '99') where id = event(3)`,
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 3, reason: "content" });
  });

  it("detects an edited timestamp, actor or subject", async () => {
    await appendMany(ctx.database, 4);
    await tamper(ctx.database, [
      `update audit_events set created_at = created_at + interval '1 millisecond' where id = event(4)`,
      `update audit_events set subject = null where id = event(2)`,
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 2, reason: "content" });
  });

  it("detects a deleted event as a gap at its seq", async () => {
    await appendMany(ctx.database, 5);
    await tamper(ctx.database, ["delete from audit_events where id = event(2)"]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 2, reason: "gap" });
  });

  it("detects a deleted first event", async () => {
    await appendMany(ctx.database, 3);
    await tamper(ctx.database, ["delete from audit_events where id = event(1)"]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, seq: 1, reason: "gap" });
  });

  it("detects a reordered pair", async () => {
    await appendMany(ctx.database, 5);
    await tamper(ctx.database, [
      "update audit_chain set seq = -3 where seq = 3",
      "update audit_chain set seq = 3 where seq = 4",
      "update audit_chain set seq = 4 where seq = -3",
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({
      ok: false,
      seq: 3,
      reason: "prev-hash",
    });
  });

  it("detects a rewritten prev_hash even when the event's own hash is recomputed", async () => {
    await appendMany(ctx.database, 4);
    await tamper(ctx.database, [
      `update audit_chain set prev_hash = repeat('a', 64) where seq = 3`,
    ]);
    expect(await verifyAuditChain(ctx.db)).toMatchObject({
      ok: false,
      seq: 3,
      reason: "prev-hash",
    });
  });

  it("reports the FIRST broken link when several are broken", async () => {
    await appendMany(ctx.database, 8);
    await tamper(ctx.database, [
      "delete from audit_events where id = event(7)",
      `update audit_events set actor = 'mallory' where id = event(5)`,
      `update audit_events set kind = 'other' where id = event(6)`,
    ]);
    expect(await verifyAuditChain(ctx.db, { batchSize: 2 })).toMatchObject({
      ok: false,
      seq: 5,
      reason: "content",
    });
  });
});
