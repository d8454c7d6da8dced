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
});
