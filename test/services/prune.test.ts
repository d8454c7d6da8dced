// Retention (src/services/prune-tables.ts, src/db/retention.ts, src/db/audit-prune.ts): what is
// past its retention goes, what still guards something stays, a dry run changes nothing, and a
// pruned audit chain still verifies — against a signed checkpoint whose tampering, like a
// tampered retained event, `audit verify` names.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { defaultRetentionDays } from "../../src/config.ts";
import { appendAuditEvent, flushAuditChain, verifyAuditChain } from "../../src/db/audit.ts";
import type { Db } from "../../src/db/client.ts";
import { selectRows } from "../../src/db/client.ts";
import type { AuditActor, AuditKind } from "../../src/domain/audit.ts";
import type { RetentionSettings } from "../../src/domain/retention.ts";
import type { ServiceContext } from "../../src/services/context.ts";
import { checkpointSigner, prune } from "../../src/services/prune-tables.ts";
import { verifyAudit } from "../../src/services/read-audit.ts";
import { adminRequest, createTestApp, operatorRequest } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

const dayMs = 86_400_000;

function withRetention(services: ServiceContext, days: Partial<RetentionSettings["days"]>) {
  return {
    ...services,
    retention: { days: { ...defaultRetentionDays, ...days }, intervalMs: 0, batchSize: 3 },
  } satisfies ServiceContext;
}

async function appendEvents(db: Db, count: number, from = 1): Promise<void> {
  for (let i = from; i < from + count; i++) {
    await appendAuditEvent(db, {
      actor: "test" as AuditActor,
      kind: "test.event" as AuditKind,
      subject: `item:${i}`,
      data: { i },
    });
  }
  await flushAuditChain(db);
}

/** Changes audit rows with the triggers out of the way, as an attacker with DDL would. */
async function tamper(db: Db, statement: string): Promise<void> {
  await db.transaction(async (tx) => {
    for (const table of ["audit_events", "audit_chain", "audit_checkpoints"]) {
      await tx.execute(sql.raw(`alter table ${table} disable trigger user`));
    }
    await tx.execute(sql.raw(statement));
    for (const table of ["audit_events", "audit_chain", "audit_checkpoints"]) {
      await tx.execute(sql.raw(`alter table ${table} enable trigger user`));
    }
  });
}

async function count(db: Db, table: string): Promise<number> {
  const [row] = await selectRows<{ n: number }>(
    db,
    sql.raw(`select count(*)::int as n from ${table}`),
  );
  return row?.n ?? 0;
}

describeEachDatabase("retention", (ctx) => {
  it("prunes an audit prefix under a signed checkpoint; verify names a tampered event or checkpoint", async () => {
    const app = await createTestApp(ctx.database);
    try {
      await appendEvents(ctx.db, 10);
      // The app's own set-up wrote events too: the chain's head is `head`.
      const head = await count(ctx.db, "audit_chain");
      const cut = head - 1;
      // Everything so far is a hundred days old for this clock; the head is never pruned.
      const later = withRetention(
        { ...app.services, now: () => new Date(Date.now() + 100 * dayMs) },
        { audit: 30 },
      );
      const dry = await prune(later, { apply: false, actor: "cli:test" });
      expect(dry.families.find((f) => f.family === "audit")?.rows).toBe(cut);
      expect(await count(ctx.db, "audit_chain")).toBe(head);

      const applied = await prune(later, { apply: true, actor: "cli:test" });
      expect(applied.families.find((f) => f.family === "audit")?.rows).toBe(cut);
      expect(applied.checkpoint?.seq).toBe(cut);

      await appendEvents(ctx.db, 5, 11);
      const intact = await verifyAudit({ services: later });
      // 1 kept + 5 new + the retention.pruned event.
      expect(intact).toMatchObject({ ok: true, count: 7, checkpoint: { seq: cut } });

      // Without the key, a pruned chain cannot be vouched for.
      expect(await verifyAuditChain(ctx.db)).toMatchObject({ ok: false, reason: "checkpoint" });

      // Deleting a row no checkpoint covers is still refused.
      await expect(
        ctx.db.execute(sql`delete from audit_chain where seq = (select max(seq) from audit_chain)`),
      ).rejects.toThrow();

      // A retained event edited: named by its seq.
      const edited = head + 2;
      const event = `(select event_id from audit_chain where seq = ${edited})`;
      const original = await selectRows<{ data: string }>(
        ctx.db,
        sql.raw(`select data::text as data from audit_events where id = ${event}`),
      );
      await tamper(ctx.db, `update audit_events set data = '{"i": 999}' where id = ${event}`);
      expect(await verifyAudit({ services: later })).toMatchObject({
        ok: false,
        seq: edited,
        reason: "content",
      });
      await tamper(
        ctx.db,
        `update audit_events set data = '${original[0]?.data}' where id = ${event}`,
      );
      expect(await verifyAudit({ services: later })).toMatchObject({ ok: true });

      // The checkpoint edited (its hash moved with the chain's first kept link): the signature.
      await tamper(ctx.db, `update audit_checkpoints set count = 5 where seq = ${cut}`);
      expect(await verifyAudit({ services: later })).toMatchObject({
        ok: false,
        seq: cut,
        reason: "checkpoint",
      });
      await tamper(ctx.db, `update audit_checkpoints set count = ${cut} where seq = ${cut}`);

      // The first kept event no longer follows the checkpoint.
      await tamper(
        ctx.db,
        `update audit_chain set prev_hash = repeat('1', 64) where seq = ${head}`,
      );
      expect(await verifyAudit({ services: later })).toMatchObject({ ok: false, seq: head });
      await tamper(
        ctx.db,
        `update audit_chain set prev_hash = (select hash from audit_checkpoints where seq = ${cut}) where seq = ${head}`,
      );

      // Another server's key does not vouch for this one's checkpoints.
      const other = await createTestApp(ctx.database);
      try {
        expect(await verifyAudit({ services: other.services })).toMatchObject({
          ok: false,
          reason: "checkpoint",
        });
      } finally {
        await other.close();
      }
      const signer = await checkpointSigner(later);
      expect(await verifyAuditChain(ctx.db, { checkpointKey: signer })).toMatchObject({ ok: true });
    } finally {
      await app.close();
    }
  });

  it("deletes what is past its retention and keeps what still guards something", async () => {
    const app = await createTestApp(ctx.database);
    try {
      const old = new Date(Date.now() - 200 * dayMs).toISOString();
      await ctx.db.execute(sql`
        insert into callers (id, name, kind) values
          ('00000000-0000-4000-8000-000000000001', 'peer-a', 'peer'),
          ('00000000-0000-4000-8000-000000000002', 'gh', 'github'),
          ('00000000-0000-4000-8000-000000000003', 'hook', 'ifttt')`);
      const peer = "00000000-0000-4000-8000-000000000001";
      await ctx.db.execute(sql`
        insert into runs (id, caller_id, origin, approval_policy, tool_set, status, created_at, a2a_task_id) values
          ('10000000-0000-4000-8000-000000000001', ${peer}, 'a2a', 'auto', '{}', 'completed', ${old}, 't-done'),
          ('10000000-0000-4000-8000-000000000002', ${peer}, 'a2a', 'auto', '{}', 'parked', ${old}, 't-live'),
          ('10000000-0000-4000-8000-000000000003', ${peer}, 'a2a', 'auto', '{}', 'completed', now(), null)`);
      await ctx.db.execute(sql`
        insert into tool_calls (run_id, call_id, tool, args_digest, status) values
          ('10000000-0000-4000-8000-000000000001', 'c1', 'read_file', 'x', 'completed')`);
      await ctx.db.execute(sql`
        insert into a2a_tasks (id, caller_id, context_id, task, created_at) values
          ('t-done', ${peer}, 'c', '{"status":{"state":"TASK_STATE_COMPLETED"}}', ${old}),
          ('t-live', ${peer}, 'c', '{"status":{"state":"TASK_STATE_COMPLETED"}}', ${old}),
          ('t-working', ${peer}, 'c', '{"status":{"state":"TASK_STATE_WORKING"}}', ${old})`);
      await ctx.db.execute(sql`
        insert into webhook_deliveries (caller_id, delivery_id, body_sha256, received_at, run_id) values
          ('00000000-0000-4000-8000-000000000002', 'd1', 'a', ${old}, null),
          ('00000000-0000-4000-8000-000000000003', null, 'b', ${old}, '10000000-0000-4000-8000-000000000001')`);
      await ctx.db.execute(sql`
        insert into jwt_replays (issuer, jti, expires_at) values
          ('iss', 'old', ${old}), ('iss', 'live', now() + interval '5 minutes')`);
      const services = withRetention(app.services, {
        runs: 30,
        tasks: 30,
        "webhook-claims": 30,
        "jti-claims": 1,
      });

      const dry = await prune(services, { apply: false, actor: "cli:test" });
      const rows = Object.fromEntries(dry.families.map((f) => [f.family, f.rows]));
      expect(rows).toMatchObject({
        runs: 1,
        tasks: 1,
        "webhook-claims": 1,
        "jti-claims": 1,
        audit: 0,
      });
      expect(await count(ctx.db, "runs")).toBe(3);

      const applied = await prune(services, { apply: true, actor: "cli:test" });
      expect(applied.families.map((f) => [f.family, f.rows])).toEqual(
        dry.families.map((f) => [f.family, f.rows]),
      );
      const left = await selectRows<{ id: string }>(ctx.db, sql`select id from runs order by id`);
      // The parked run and the recent one stay; the old ended run goes with its tool calls.
      expect(left.map((r) => r.id)).toEqual([
        "10000000-0000-4000-8000-000000000002",
        "10000000-0000-4000-8000-000000000003",
      ]);
      expect(await count(ctx.db, "tool_calls")).toBe(0);
      const tasks = await selectRows<{ id: string }>(
        ctx.db,
        sql`select id from a2a_tasks order by id`,
      );
      expect(tasks.map((t) => t.id)).toEqual(["t-live", "t-working"]);
      // The GitHub claim is inside its replay window (a year), whatever the family's days.
      const claims = await selectRows<{ delivery_id: string | null }>(
        ctx.db,
        sql`select delivery_id from webhook_deliveries`,
      );
      expect(claims).toEqual([{ delivery_id: "d1" }]);
      const jtis = await selectRows<{ jti: string }>(ctx.db, sql`select jti from jwt_replays`);
      expect(jtis).toEqual([{ jti: "live" }]);
      await flushAuditChain(ctx.db);
      const events = await selectRows<{ data: unknown }>(
        ctx.db,
        sql`select data from audit_events where kind = 'retention.pruned'`,
      );
      expect(events).toHaveLength(1);

      // Over the admin API: a dry run with the admin token; deleting needs the operator token.
      const dryApi = await adminRequest(app, "POST", "/prune", { apply: false });
      expect(dryApi.status).toBe(200);
      expect(await adminRequest(app, "POST", "/prune", { apply: true })).toMatchObject({
        status: 403,
      });
      expect((await operatorRequest(app, "POST", "/prune", { apply: true })).status).toBe(200);
      const checkpoints = await adminRequest(app, "GET", "/audit/checkpoints");
      expect(await checkpoints.json()).toMatchObject({
        checkpoints: [],
        publicKey: { crv: "Ed25519" },
      });
    } finally {
      await app.close();
    }
  });
});
