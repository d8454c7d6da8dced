// The admin's view of runs and the operator's answers to parked ones. Approving grants something,
// so it needs the operator token as well as the admin token (DESIGN §5), names the pending call
// and the digest of its arguments, and the first valid answer wins (the engine compare-and-sets).
// Rejecting needs only the admin token and may carry a reason the run reads.
import { z } from "zod";
import { type RunStatus, runStatuses } from "../db/schema.ts";
import { NotFoundError } from "../errors.ts";
import { verifyOperatorToken } from "./admin-credentials.ts";
import type { AuthFailureContext } from "./authenticate-caller.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";
import { findCallerRow } from "./find-caller.ts";
import type { PeergateRunEngine } from "./runs/engine.ts";
import type { RunDetail } from "./runs/get-run.ts";
import type { RunSummary } from "./runs/list-runs.ts";

export const listRunsQuerySchema = z
  .strictObject({
    caller: z.string().max(63).optional(),
    status: z.enum(runStatuses, { error: `one of ${runStatuses.join(", ")}` }).optional(),
    limit: z.coerce.number().int().min(1).max(500).optional(),
    before: z.iso
      .datetime({ error: "an ISO 8601 time, e.g. the createdAt of the last run seen" })
      .optional(),
    beforeId: z.uuid({ error: "a run id, the id of the last run seen (with before)" }).optional(),
  })
  .refine((q) => q.beforeId === undefined || q.before !== undefined, {
    path: ["beforeId"],
    error: "beforeId pages with before: pass the last run's createdAt as before too",
  });

export async function listRunsForAdmin({
  services,
  engine,
  query,
}: {
  services: ServiceContext;
  engine: PeergateRunEngine;
  query: unknown;
}): Promise<RunSummary[]> {
  const q = parseInput(listRunsQuerySchema, query);
  const callerId = q.caller ? (await findCallerRow(services.db, q.caller)).id : undefined;
  return engine.listRuns({
    ...(callerId ? { callerId } : {}),
    ...(q.status ? { status: q.status as RunStatus } : {}),
    ...(q.limit ? { limit: q.limit } : {}),
    ...(q.before ? { before: new Date(q.before) } : {}),
    ...(q.beforeId ? { beforeId: q.beforeId } : {}),
  });
}

export async function getRunForAdmin({
  engine,
  runId,
}: {
  engine: PeergateRunEngine;
  runId: string;
}): Promise<RunDetail> {
  const run = await engine.getRun(runId);
  if (!run) throw new NotFoundError(`no run ${JSON.stringify(runId.slice(0, 60))}`);
  return run;
}

export const approveRunSchema = z.strictObject({
  callId: z.string().min(1).max(200),
  argsDigest: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { error: "the 64-hex-digit digest shown by `runs show`" }),
});

export async function approveParkedRun({
  services,
  engine,
  runId,
  input,
  operatorToken,
  failure,
}: {
  services: ServiceContext;
  engine: PeergateRunEngine;
  runId: string;
  input: unknown;
  operatorToken: string | undefined;
  failure: AuthFailureContext;
}): Promise<{ runId: string; status: "resumed" }> {
  await verifyOperatorToken(services, operatorToken, failure);
  const { callId, argsDigest } = parseInput(approveRunSchema, input);
  const handle = await engine.approveRun({ runId, callId, argsDigest, actor: "operator" });
  return { runId: handle.runId, status: "resumed" };
}

export const rejectRunSchema = z.strictObject({
  reason: z.string().max(2_000).optional(),
  callId: z.string().min(1).max(200).optional(),
});

export async function rejectParkedRun({
  engine,
  runId,
  input,
}: {
  engine: PeergateRunEngine;
  runId: string;
  input: unknown;
}): Promise<{ runId: string; status: "resumed" }> {
  const { reason, callId } = parseInput(rejectRunSchema, input);
  const handle = await engine.rejectRun({
    runId,
    actor: "admin",
    ...(reason ? { reason } : {}),
    ...(callId ? { callId } : {}),
  });
  return { runId: handle.runId, status: "resumed" };
}

export async function cancelRunForAdmin({
  engine,
  runId,
}: {
  engine: PeergateRunEngine;
  runId: string;
}): Promise<{ runId: string; stopped: boolean }> {
  return { runId, stopped: await engine.cancel(runId, "canceled by the admin") };
}
