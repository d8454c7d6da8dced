// The migration that moved the audit chain into its own table (drizzle/*_audit_chain_table.sql),
// run on databases holding a trail written the way earlier code wrote it: every link kept as it
// was (same seq, prev_hash and hash, nothing re-hashed), the unchained tail chained next, in its
// order, and new events chained after it.
//
// The earlier code is gone, so its writes are replayed here in SQL, with the chain hash that
// never changed (computeAuditHash): the outbox's (0004 to the split) appended unchained rows and
// set seq, prev_hash and hash on them in (xact_id, id) order; the first version's (before 0004)
// inserted every event chained, under a lock, with no id or xact_id.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import {
  appendAuditEvent,
  computeAuditHash,
  flushAuditChain,
  genesisHash,
  readAuditPage,
  verifyAuditChain,
} from "../../src/db/audit.ts";
import { type Database, selectRows } from "../../src/db/client.ts";
import { migrateDatabase } from "../../src/db/migrate.ts";
import { auditTrail } from "../../src/db/schema.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { migrateUpTo } from "../support/migrations.ts";

type Link = { seq: number; id: number; prevHash: string; hash: string };

const data = (i: number) => ({ i, nested: { b: [1, "two", null], a: true } });

/** The outbox's append: an unchained row. */
async function appendAsOutbox(database: Database, i: number): Promise<number> {
  const [row] = await selectRows<{ id: unknown }>(
    database.db,
    sql`insert into audit_events (actor, kind, subject, data)
        values ('old', 'test.event', ${`item:${i}`}, ${JSON.stringify(data(i))}::text::jsonb)
        returning id`,
  );
  return Number(row?.id);
}

/** The outbox's chaining pass: seq and hashes set in place, in (xact_id, id) order. */
async function chainAsOutbox(database: Database): Promise<Link[]> {
  const rows = await selectRows<{ id: unknown; created_at: string; subject: string }>(
    database.db,
    sql`select id, created_at, subject from audit_events where seq is null order by xact_id, id`,
  );
  const [head] = await selectRows<{ seq: unknown; hash: string }>(
    database.db,
    sql`select seq, hash from audit_events where seq is not null order by seq desc limit 1`,
  );
  let seq = Number(head?.seq ?? 0);
  let prevHash = head?.hash ?? genesisHash;
  const links: Link[] = [];
  for (const row of rows) {
    seq += 1;
    const i = Number(row.subject.slice("item:".length));
    const hash = computeAuditHash(prevHash, {
      seq,
      createdAt: new Date(row.created_at),
      actor: "old",
      kind: "test.event",
      subject: row.subject,
      data: data(i),
    });
    await database.db.execute(
      sql`update audit_events set seq = ${seq}, prev_hash = ${prevHash}, hash = ${hash}
           where id = ${Number(row.id)}`,
    );
    links.push({ seq, id: Number(row.id), prevHash, hash });
    prevHash = hash;
  }
  return links;
}

function newEvent(i: number) {
  return {
    actor: "new" as AuditActor,
    kind: "test.event" as AuditKind,
    subject: `item:${i}`,
    data: data(i),
  };
}

async function linksNow(database: Database): Promise<Link[]> {
  const rows = await database.db.select().from(auditTrail).orderBy(auditTrail.seq);
  return rows
    .filter((r) => r.seq !== null)
    .map((r) => ({ seq: r.seq ?? 0, id: r.id, prevHash: r.prevHash ?? "", hash: r.hash ?? "" }));
}

describeEachDatabase(
  "the audit chain's move to its own table",
  (ctx) => {
    it("keeps an outbox-era chain link for link and chains its unchained tail next", async () => {
      await migrateUpTo(ctx.database, "audit_chain_table");
      for (let i = 1; i <= 5; i++) await appendAsOutbox(ctx.database, i);
      const oldLinks = await chainAsOutbox(ctx.database);
      // Two more committed but not chained when the new code arrives.
      const tail = [await appendAsOutbox(ctx.database, 6), await appendAsOutbox(ctx.database, 7)];

      // 0011 moves the chain; the migrations after it (0012 …) change other tables.
      const migrated = await migrateDatabase(ctx.database);
      expect(migrated.migrations[0]).toMatch(/audit_chain/);
      expect(await linksNow(ctx.database)).toEqual(oldLinks);
      const before = await verifyAuditChain(ctx.db, { flush: false });
      expect(before).toEqual({
        ok: true,
        count: 5,
        lastHash: oldLinks.at(-1)?.hash,
        unchained: { count: 2, oldestAgeMs: expect.any(Number) },
      });

      await appendAuditEvent(ctx.db, newEvent(8));
      await flushAuditChain(ctx.db);
      const links = await linksNow(ctx.database);
      expect(links.slice(0, 5)).toEqual(oldLinks);
      expect(links.slice(5, 7).map((l) => l.id)).toEqual(tail);
      expect(links.map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(await verifyAuditChain(ctx.db)).toMatchObject({
        ok: true,
        count: 8,
        unchained: { count: 0 },
      });
    });

    it("keeps a chain written before the outbox, whose id order is not its seq order", async () => {
      await migrateUpTo(ctx.database, "audit_outbox");
      // Chained at insert, under a lock, as the first version did. Stored out of seq order, so
      // the ids the outbox migration numbers them with (in storage order) differ from seq order.
      const created = new Date("2026-01-02T03:04:05.678Z");
      let prevHash = genesisHash;
      const chained: { seq: number; prevHash: string; hash: string }[] = [];
      for (let seq = 1; seq <= 4; seq++) {
        const hash = computeAuditHash(prevHash, {
          seq,
          createdAt: created,
          actor: "old",
          kind: "test.event",
          subject: `item:${seq}`,
          data: data(seq),
        });
        chained.push({ seq, prevHash, hash });
        prevHash = hash;
      }
      for (const link of [chained[3], chained[1], chained[0], chained[2]]) {
        if (!link) continue;
        await ctx.db.execute(
          sql`insert into audit_events (seq, created_at, actor, kind, subject, data, prev_hash, hash)
              values (${link.seq}, ${created.toISOString()}, 'old', 'test.event',
                      ${`item:${link.seq}`}, ${JSON.stringify(data(link.seq))}::text::jsonb,
                      ${link.prevHash}, ${link.hash})`,
        );
      }

      await migrateDatabase(ctx.database);
      const migrated = await linksNow(ctx.database);
      expect(migrated.map(({ seq, prevHash, hash }) => ({ seq, prevHash, hash }))).toEqual(chained);
      // The head (seq 4) was stored first, so it is not the last of them by id: the others
      // must not be taken for unchained events.
      expect(migrated.at(-1)?.id).toBe(Math.min(...migrated.map((l) => l.id)));
      expect(await verifyAuditChain(ctx.db, { flush: false })).toEqual({
        ok: true,
        count: 4,
        lastHash: prevHash,
        unchained: { count: 0, oldestAgeMs: null },
      });
      expect(await flushAuditChain(ctx.db)).toEqual({ chained: 0, remaining: 0 });

      for (let i = 5; i <= 6; i++) await appendAuditEvent(ctx.db, newEvent(i));
      expect(await flushAuditChain(ctx.db)).toEqual({ chained: 2, remaining: 0 });
      const links = await linksNow(ctx.database);
      expect(links.map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      // The admin's filtered pages walk the old chain in seq order too, not in its id order.
      for (const after of [0, 1, 2, 3, 4]) {
        const page = await readAuditPage(ctx.db, { after, limit: 2, kind: "test.event" });
        expect({ after, seqs: page.map((r) => r.seq) }).toEqual({
          after,
          seqs: [after + 1, after + 2].filter((s) => s <= 6),
        });
      }
      expect(links[4]?.prevHash).toBe(prevHash);
      expect(await verifyAuditChain(ctx.db)).toMatchObject({
        ok: true,
        count: 6,
        unchained: { count: 0 },
      });
    });
  },
  { migrate: false },
);
