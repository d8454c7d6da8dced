// Reading the audit trail for the admin: a page of events after a sequence number, optionally of
// one kind or subject, and the chain verification.
import { and, asc, eq, gt, type SQL } from "drizzle-orm";
import { z } from "zod";
import { type AuditChainVerification, verifyAuditChain } from "../db/audit.ts";
import { auditEvents } from "../db/schema.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";

export const auditQuerySchema = z.strictObject({
  after: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  kind: z.string().max(100).optional(),
  subject: z.string().max(200).optional(),
});

export type AuditEventView = {
  seq: number;
  createdAt: string;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
  hash: string;
};

export async function listAuditEvents({
  ctx,
  query,
}: {
  ctx: ServiceContext;
  query: unknown;
}): Promise<{ events: AuditEventView[]; next: number | null }> {
  const q = parseInput(auditQuerySchema, query);
  const filters: SQL[] = [gt(auditEvents.seq, q.after)];
  if (q.kind) filters.push(eq(auditEvents.kind, q.kind));
  if (q.subject) filters.push(eq(auditEvents.subject, q.subject));
  const rows = await ctx.db
    .select()
    .from(auditEvents)
    .where(and(...filters))
    .orderBy(asc(auditEvents.seq))
    .limit(q.limit);
  const last = rows.at(-1);
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
    next: rows.length === q.limit && last ? last.seq : null,
  };
}

export function verifyAudit({ ctx }: { ctx: ServiceContext }): Promise<AuditChainVerification> {
  return verifyAuditChain(ctx.db);
}
