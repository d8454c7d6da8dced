// Reading the audit trail for the admin: a page of events after a sequence number, optionally of
// one kind or subject, and the chain verification. Both first chain what is committed (waiting
// briefly for older open transactions); a page that reaches the end of the chain then lists the
// events still unchained after it, in the order they will be chained, with seq and hash null.
import { and, asc, eq, gt, isNull, type SQL } from "drizzle-orm";
import { z } from "zod";
import { type AuditChainVerification, flushAuditChain, verifyAuditChain } from "../db/audit.ts";
import { auditEvents } from "../db/schema.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";

const querySchema = z.strictObject({
  after: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  kind: z.string().max(100).optional(),
  subject: z.string().max(200).optional(),
});

export type AuditEventView = {
  /** Null while the event is not chained yet. */
  seq: number | null;
  createdAt: string;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
  /** Null while the event is not chained yet. */
  hash: string | null;
};

export async function listAuditEvents({
  ctx,
  query,
}: {
  ctx: ServiceContext;
  query: unknown;
}): Promise<{ events: AuditEventView[]; next: number | null }> {
  const q = parseInput(querySchema, query);
  await flushAuditChain(ctx.db, { timeoutMs: 2_000, onTimeout: "return" });
  const filters: SQL[] = [];
  if (q.kind) filters.push(eq(auditEvents.kind, q.kind));
  if (q.subject) filters.push(eq(auditEvents.subject, q.subject));
  const chained = await ctx.db
    .select()
    .from(auditEvents)
    .where(and(gt(auditEvents.seq, q.after), ...filters))
    .orderBy(asc(auditEvents.seq))
    .limit(q.limit);
  const last = chained.at(-1);
  const full = chained.length === q.limit;
  const unchained = full
    ? []
    : await ctx.db
        .select()
        .from(auditEvents)
        .where(and(isNull(auditEvents.seq), ...filters))
        .orderBy(asc(auditEvents.xactId), asc(auditEvents.id))
        .limit(q.limit - chained.length);
  const rows = [...chained, ...unchained];
  return {
    events: rows.map((r) => ({
      seq: r.seq,
      createdAt: r.createdAt.toISOString(),
      actor: r.actor,
      kind: r.kind,
      subject: r.subject,
      data: r.data,
      hash: r.hash,
    })),
    next: full && last ? last.seq : null,
  };
}

export function verifyAudit({ ctx }: { ctx: ServiceContext }): Promise<AuditChainVerification> {
  return verifyAuditChain(ctx.db);
}
