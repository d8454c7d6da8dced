// One run in full for the admin API and CLI: its summary, the tool set it started with, the
// pending call with its arguments and preview, the answer, the conversation, and every tool call
// with how it ended (completed, interrupted, not started, refused, failed, parked, rejected).
import { asc, desc, eq, type SQL } from "drizzle-orm";
import type { DbOrTx } from "../../db/client.ts";
import {
  callers,
  type PendingApproval,
  runs,
  type ToolCallDecisionRecord,
  type ToolCallStatus,
  toolCalls,
} from "../../db/schema.ts";
import { isUuid } from "../../runs/run-queries.ts";
import { type RunSummary, summarizeRun } from "./list-runs.ts";

export type RunToolCall = {
  callId: string;
  tool: string;
  argsDigest: string;
  status: ToolCallStatus;
  code: string | null;
  segment: number;
  outputTruncated: boolean;
  /** How the call was decided: rule, reason, floor reasons, coverage, the classifier's verdict. */
  decision: ToolCallDecisionRecord | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};

export type RunDetail = RunSummary & {
  toolSet: string[];
  /** The full pending call: what approving runs, with its arguments and the tool's preview. */
  pending: PendingApproval | null;
  /** The model's final answer. */
  text: string | null;
  /** The conversation (AI SDK ModelMessages), without the agent's instructions. */
  messages: unknown[];
  toolCalls: RunToolCall[];
};

/** The run, or undefined when no run has this id. */
export async function getRun({
  services,
  input,
}: {
  services: { readonly db: DbOrTx };
  input: { readonly runId: string };
}): Promise<RunDetail | undefined> {
  const { db } = services;
  const byColumn = (where: SQL) =>
    db
      .select({ run: runs, callerName: callers.name })
      .from(runs)
      .innerJoin(callers, eq(callers.id, runs.callerId))
      .where(where)
      .orderBy(desc(runs.createdAt))
      .limit(1);
  // The run id, or the A2A task id a peer was given for it (what an operator is usually told).
  const [byId] = isUuid(input.runId) ? await byColumn(eq(runs.id, input.runId)) : [];
  const row = byId ?? (await byColumn(eq(runs.a2aTaskId, input.runId)))[0];
  if (!row) return undefined;
  const runId = row.run.id;
  const calls = await db
    .select()
    .from(toolCalls)
    .where(eq(toolCalls.runId, runId))
    .orderBy(asc(toolCalls.createdAt), asc(toolCalls.callId));
  const result = row.run.result as { text?: unknown } | null;
  return {
    ...summarizeRun(row.run, row.callerName),
    toolSet: row.run.toolSet,
    pending: row.run.pendingApproval,
    text: typeof result?.text === "string" ? result.text : null,
    messages: row.run.messages,
    toolCalls: calls.map((call) => ({
      callId: call.callId,
      tool: call.tool,
      argsDigest: call.argsDigest,
      status: call.status,
      code: call.code,
      segment: call.segment,
      outputTruncated: call.outputTruncated,
      decision: call.decision ?? null,
      createdAt: call.createdAt.toISOString(),
      startedAt: call.startedAt?.toISOString() ?? null,
      finishedAt: call.finishedAt?.toISOString() ?? null,
    })),
  };
}
