// Reading the audit trail for the admin: a page of events after a sequence number, optionally of
// one kind or subject, and the chain verification. Both first chain what is committed (waiting
// briefly for older open transactions); a page that reaches the end of the chain then lists the
// events still unchained after it, in the order they will be chained, with seq and hash null.
import { z } from "zod";
import {
  type AuditChainVerification,
  flushAuditChain,
  readAuditPage,
  verifyAuditChain,
} from "../db/audit.ts";
import { checkpointText, readAuditCheckpoints } from "../db/audit-prune.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";
import { checkpointSigner } from "./prune-tables.ts";

export const auditQuerySchema = z.strictObject({
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
  services,
  query,
}: {
  services: ServiceContext;
  query: unknown;
}): Promise<{ events: AuditEventView[]; next: number | null }> {
  const q = parseInput(auditQuerySchema, query);
  await flushAuditChain(services.db, { timeoutMs: 2_000, onTimeout: "return" });
  const rows = await readAuditPage(services.db, q);
  const chained = rows.filter((r) => r.seq !== null);
  const last = chained.at(-1);
  const full = chained.length === q.limit;
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

export async function verifyAudit({
  services,
}: {
  services: ServiceContext;
}): Promise<AuditChainVerification> {
  return verifyAuditChain(services.db, { checkpointKey: await checkpointSigner(services) });
}

/** An audit checkpoint as exported: enough to check its signature with `publicKey` alone. */
export type AuditCheckpointView = {
  seq: number;
  hash: string;
  count: number;
  createdAt: string;
  keyId: string;
  signature: string;
  /** The exact text signed (Ed25519), lines joined by \n. */
  signedText: string;
};

/** Every checkpoint over a pruned prefix, with the public key that checks them. */
export async function listAuditCheckpoints({ services }: { services: ServiceContext }): Promise<{
  checkpoints: AuditCheckpointView[];
  publicKey: Record<string, unknown>;
}> {
  const signer = await checkpointSigner(services);
  const rows = await readAuditCheckpoints(services.db);
  return {
    checkpoints: rows.map((c) => ({
      seq: c.seq,
      hash: c.hash,
      count: c.count,
      createdAt: c.createdAt.toISOString(),
      keyId: c.keyId,
      signature: c.signature,
      signedText: checkpointText(c),
    })),
    publicKey: { ...signer.publicJwk },
  };
}
