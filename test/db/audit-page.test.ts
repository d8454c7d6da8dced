// The admin's page of the trail (readAuditPage, behind GET /admin/v1/audit): chained events by
// seq after `after`, then, on a page that is not full, the events not chained yet in the order
// they will be chained, with seq and hashes null.
import { expect, it } from "vitest";
import { appendAuditEvent, flushAuditChain, readAuditPage } from "../../src/db/audit.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import { describeEachDatabase } from "../support/databases.ts";

const event = (i: number, kind = "test.event") => ({
  // The chain takes any text at run time; the types admit only peergate's own kinds and actors.
  actor: "test" as AuditActor,
  kind: kind as AuditKind,
  subject: `item:${i % 2}`,
  data: { i },
});

describeEachDatabase("the audit page", (ctx) => {
  it("lists chained events by seq, then the unchained ones in chain order", async () => {
    for (let i = 1; i <= 4; i++) await appendAuditEvent(ctx.db, event(i));
    await flushAuditChain(ctx.db);
    for (let i = 5; i <= 6; i++) await appendAuditEvent(ctx.db, event(i));

    const page = await readAuditPage(ctx.db, { after: 1, limit: 10 });
    expect(page.map((r) => [r.seq, (r.data as { i: number }).i])).toEqual([
      [2, 2],
      [3, 3],
      [4, 4],
      [null, 5],
      [null, 6],
    ]);
    expect(page.slice(0, 3).every((r) => r.hash?.length === 64 && r.prevHash?.length === 64)).toBe(
      true,
    );
    expect(page.slice(3).every((r) => r.hash === null && r.prevHash === null)).toBe(true);

    // A full page of chained events shows no unchained ones.
    expect((await readAuditPage(ctx.db, { after: 0, limit: 3 })).map((r) => r.seq)).toEqual([
      1, 2, 3,
    ]);
    // The filters apply to both parts.
    const odd = await readAuditPage(ctx.db, { after: 0, limit: 10, subject: "item:1" });
    expect(odd.map((r) => (r.data as { i: number }).i)).toEqual([1, 3, 5]);
  });

  it("filters by kind", async () => {
    await appendAuditEvent(ctx.db, event(1, "caller.created"));
    await appendAuditEvent(ctx.db, event(2, "auth.failed"));
    await flushAuditChain(ctx.db);
    await appendAuditEvent(ctx.db, event(3, "auth.failed"));
    const page = await readAuditPage(ctx.db, { after: 0, limit: 10, kind: "auth.failed" });
    expect(page.map((r) => [r.seq, (r.data as { i: number }).i])).toEqual([
      [2, 2],
      [null, 3],
    ]);
  });

  it("pages a kind or a subject exactly as the chain orders them, whatever the page size and cursor", async () => {
    // Some transactions write several events (one xact_id, ids in order), some one; three kinds
    // in an uneven mix, so a filtered page skips runs of other events.
    const kinds = ["auth.failed", "run.started", "run.started", "caller.created", "run.started"];
    let i = 0;
    for (let batch = 0; batch < 12; batch++) {
      const size = 1 + (batch % 3);
      await ctx.db.transaction(async (tx) => {
        for (let k = 0; k < size; k++, i++) {
          await appendAuditEvent(tx, event(i, kinds[(i * 7) % kinds.length]));
        }
      });
      if (batch === 5) await flushAuditChain(ctx.db);
    }
    await flushAuditChain(ctx.db);
    await appendAuditEvent(ctx.db, event(i++, "auth.failed")); // not chained yet
    const all = await readAuditPage(ctx.db, { after: 0, limit: 1000 });
    expect(all).toHaveLength(i);
    const chainedSeqs = all.filter((r) => r.seq !== null).map((r) => r.seq);
    expect(chainedSeqs).toEqual(chainedSeqs.map((_, n) => n + 1));

    for (const filter of [
      { kind: "auth.failed" },
      { kind: "caller.created" },
      { subject: "item:1" },
      { kind: "run.started", subject: "item:0" },
    ]) {
      const expected = all.filter(
        (r) =>
          (filter.kind === undefined || r.kind === filter.kind) &&
          (filter.subject === undefined || r.subject === filter.subject),
      );
      for (const limit of [1, 2, 5]) {
        // Paged as the admin API does (services/read-audit.ts): a next page only after a page
        // full of chained events, from its last seq.
        const seen: (number | null)[] = [];
        let after = 0;
        for (;;) {
          const page = await readAuditPage(ctx.db, { after, limit, ...filter });
          seen.push(...page.map((r) => (r.data as { i: number }).i));
          const chained = page.filter((r) => r.seq !== null);
          const last = chained.at(-1);
          if (chained.length < limit || !last) break;
          after = last.seq as number;
        }
        expect({ filter, limit, seen }).toEqual({
          filter,
          limit,
          seen: expected.map((r) => (r.data as { i: number }).i),
        });
      }
      // A cursor in the middle of another kind's run of events.
      const mid = Math.floor(chainedSeqs.length / 2);
      const fromMid = await readAuditPage(ctx.db, { after: mid, limit: 1000, ...filter });
      expect(fromMid.map((r) => r.seq)).toEqual(
        expected.filter((r) => r.seq === null || (r.seq as number) > mid).map((r) => r.seq),
      );
    }
  });
});
