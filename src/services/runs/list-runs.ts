// Runs for the admin API and CLI, newest first: what each run is doing, for whom, and what it
// used. Plain inputs and plain JSON-ready outputs; src/http and src/cli shape them further.
import { and, desc, eq, lt, type SQL, sql } from "drizzle-orm";
import type { DbOrTx } from "../../db/client.ts";
import {
  callers,
  type PendingApproval,
  type Run,
  type RunBudgetLimits,
  type RunBudgetUsed,
  type RunError,
  type RunStatus,
  runStatuses,
  runs,
} from "../../db/schema.ts";
import { ValidationError } from "../../errors.ts";
import { isUuid } from "../../runs/run-queries.ts";

export type ListRunsInput = {
  readonly callerId?: string;
  readonly status?: RunStatus;
  /** Default 50, at most 500. */
  readonly limit?: number;
  /** Only runs created before this time (paging: pass the last row's createdAt). */
  readonly before?: Date;
  /**
   * With `before`: the last row's id too, so a page ends exactly after that row. Runs started
   * in the same millisecond share a createdAt, and a cursor of the time alone skipped the ones
   * of the last row's millisecond that did not fit on its page.
   */
  readonly beforeId?: string;
};

export type RunSummary = {
  id: string;
  callerId: string;
  callerName: string;
  origin: Run["origin"];
  status: RunStatus;
  approvalPolicy: Run["approvalPolicy"];
  a2aTaskId: string | null;
  modelId: string | null;
  segments: number;
  budgetLimits: RunBudgetLimits;
  budgetUsed: RunBudgetUsed;
  /** What a parked run waits on (arguments and preview are in getRun). */
  pendingApproval: Omit<PendingApproval, "args" | "previewDiff"> | null;
  parkedUntil: string | null;
  error: RunError | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
};

const iso = (date: Date | null): string | null => (date ? date.toISOString() : null);

export function summarizeRun(run: Run, callerName: string): RunSummary {
  const pending = run.pendingApproval;
  let shown: RunSummary["pendingApproval"] = null;
  if (pending) {
    const { args: _args, previewDiff: _diff, ...rest } = pending;
    shown = rest;
  }
  return {
    id: run.id,
    callerId: run.callerId,
    callerName,
    origin: run.origin,
    status: run.status,
    approvalPolicy: run.approvalPolicy,
    a2aTaskId: run.a2aTaskId,
    modelId: run.modelId,
    segments: run.segments,
    budgetLimits: run.budgetLimits,
    budgetUsed: run.budgetUsed,
    pendingApproval: shown,
    parkedUntil: iso(run.parkedUntil),
    error: run.error,
    createdAt: run.createdAt.toISOString(),
    startedAt: iso(run.startedAt),
    finishedAt: iso(run.finishedAt),
    updatedAt: run.updatedAt.toISOString(),
  };
}

/** Lists runs, newest first. Throws ValidationError for a bad filter. */
export async function listRuns({
  services,
  input = {},
}: {
  services: { readonly db: DbOrTx };
  input?: ListRunsInput;
}): Promise<RunSummary[]> {
  const { db } = services;
  const limit = input.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) {
    throw new ValidationError([{ field: "limit", value: limit, message: "limit: 1 to 500" }]);
  }
  if (input.status !== undefined && !(runStatuses as readonly string[]).includes(input.status)) {
    throw new ValidationError([
      { field: "status", value: input.status, message: `status: one of ${runStatuses.join(", ")}` },
    ]);
  }
  const filters: SQL[] = [];
  if (input.callerId !== undefined) {
    if (!isUuid(input.callerId)) return [];
    filters.push(eq(runs.callerId, input.callerId));
  }
  if (input.status !== undefined) filters.push(eq(runs.status, input.status));
  if (input.before !== undefined) {
    filters.push(
      input.beforeId !== undefined
        ? sql`(${runs.createdAt}, ${runs.id}) < (${input.before.toISOString()}::timestamptz, ${input.beforeId}::uuid)`
        : lt(runs.createdAt, input.before),
    );
  }
  const rows = await db
    .select({ run: runs, callerName: callers.name })
    .from(runs)
    .innerJoin(callers, eq(callers.id, runs.callerId))
    .where(filters.length > 0 ? and(...filters) : undefined)
    .orderBy(desc(runs.createdAt), desc(runs.id))
    .limit(limit);
  return rows.map((row) => summarizeRun(row.run, row.callerName));
}
