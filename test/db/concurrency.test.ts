// Several instances share one PostgreSQL (DESIGN.md §7): appends, migrations and delivery claims
// racing from separate connections must still give one chain, one migration, one claim.
import { inArray } from "drizzle-orm";
import { expect, it } from "vitest";
import { appendAuditEvent, flushAuditChain, verifyAuditChain } from "../../src/db/audit.ts";
import type { Database } from "../../src/db/client.ts";
import { migrateDatabase, migrationStatus } from "../../src/db/migrate.ts";
import { auditEvents, auditTrail } from "../../src/db/schema.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import { describeEachDatabase } from "../support/databases.ts";

/** Appends in parallel, chains, and returns the seqs the chainer gave these events. */
async function appendInParallel(database: Database, actor: string, count: number) {
  const appended = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      appendAuditEvent(database.db, {
        actor: actor as AuditActor,
        kind: "test.race" as AuditKind,
        data: { i },
      }),
    ),
  );
  await flushAuditChain(database.db);
  const rows = await database.db
    .select({ seq: auditTrail.seq })
    .from(auditTrail)
    .where(
      inArray(
        auditTrail.id,
        appended.map((a) => a.id),
      ),
    );
  expect(rows).toHaveLength(count);
  return rows.map((r) => ({ seq: Number(r.seq) }));
}

describeEachDatabase("concurrent audit appends", (ctx) => {
  it("200 parallel appends on one database make one contiguous chain", async () => {
    const appended = await appendInParallel(ctx.database, "one", 200);
    expect(appended.map((a) => a.seq).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: true, count: 200 });
  });

  it.runIf(ctx.kind === "postgres")(
    "2×100 parallel appends from two instances make one contiguous, valid chain",
    async () => {
      const other = await ctx.openSecondConnection();
      const started = performance.now();
      const [a, b] = await Promise.all([
        appendInParallel(ctx.database, "instance-a", 100),
        appendInParallel(other, "instance-b", 100),
      ]);
      const took = Math.round(performance.now() - started);
      const seqs = [...a, ...b].map((x) => x.seq).sort((x, y) => x - y);
      expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      const rows = await ctx.db.select({ actor: auditEvents.actor }).from(auditEvents);
      expect(rows.filter((r) => r.actor === "instance-b")).toHaveLength(100);
      expect(await verifyAuditChain(ctx.db, { batchSize: 64 })).toMatchObject({
        ok: true,
        count: 200,
      });
      console.log(`2×100 concurrent audit appends on PostgreSQL: ${took} ms`);
    },
  );
});

describeEachDatabase(
  "concurrent migrations",
  (ctx) => {
    it.runIf(ctx.kind === "postgres")(
      "two instances migrating one empty database at once apply each migration once",
      async () => {
        const other = await ctx.openSecondConnection();
        const [a, b] = await Promise.all([migrateDatabase(ctx.database), migrateDatabase(other)]);
        const { expected, pending } = await migrationStatus(ctx.database);
        expect(pending).toEqual([]);
        expect([a.applied, b.applied].sort()).toEqual([0, expected]);
      },
    );

    it("migrating twice in parallel on one database is also safe", async () => {
      const results = await Promise.all([
        migrateDatabase(ctx.database),
        migrateDatabase(ctx.database),
      ]);
      const { expected } = await migrationStatus(ctx.database);
      expect(results.map((r) => r.applied).sort()).toEqual([0, expected]);
    });
  },
  { migrate: false },
);
