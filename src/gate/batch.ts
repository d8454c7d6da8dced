// The executor (DESIGN §4-5) for the tool calls of one model step, a "batch": the one place the
// order of a call's checks is written. Every call passes, in this order:
//
// 1. plan (src/gate/plan.ts): the run's effective set, a deny override, the tool's own schema;
// 2. decide (src/gate/decide.ts): the risk floor, allowlist and URL-grant coverage, the
//    classifier, overrides and policy (src/gate/resolve.ts), and "nobody there";
// 3. ask (src/gate/ask.ts): a call above the policy waits for an operator; a two-phase tool
//    proposes first (changing nothing) and its request is honoured only from the tool registered
//    to make it;
// 4. invoke (src/gate/invoke.ts): bounded concurrency, each call with its own timeout and the
//    run's AbortSignal; a timeout is a failed result and the run goes on;
// 5. close (src/gate/close.ts): the row's end, the observer's event and the model's result,
//    together; a stopped run records each call as completed, interrupted or not started.
//
// A batch parks whole (DESIGN §11): its approval requests are gathered before anything of it
// runs, and while any call waits for a person nothing else of the batch runs; the run parks on
// them one at a time, first one first.
import type { HeldCall } from "../domain/run.ts";
import { holdPlan, holdProposal, plainApproval } from "./ask.ts";
import { closeWith } from "./close.ts";
import { propose, type ReadyHalf, runPlanned, runReady } from "./invoke.ts";
import { planCall } from "./plan.ts";
import { notStartedText } from "./results.ts";
import type {
  BatchDeps,
  BatchOutcome,
  IndexedApproval,
  IndexedResult,
  ModelToolCall,
  OpenedCall,
  Planned,
  RunnablePlan,
} from "./types.ts";

export { answerApproval, approvalArgs } from "./ask.ts";
export { answerParkedBatch } from "./resume.ts";
export type {
  ApprovalDecision,
  BatchDeps,
  BatchOutcome,
  CallEnd,
  IndexedApproval,
  IndexedResult,
  ModelToolCall,
  OpenedCall,
  ToolCallRecorder,
} from "./types.ts";

/**
 * Runs the executor over one step's tool calls. Never throws for anything a tool does.
 *
 * A batch parks whole: every call is planned and decided, and every proposal made (proposals
 * change nothing), before anything runs. When any call must wait for a person, nothing of the
 * batch runs: the calls the policy let run are held (`held`) and run once every approval of the
 * batch is answered (src/gate/resume.ts), approved ones with them, rejected ones refused. A call
 * that asks only when it reaches a point (a chain's stage, a fetch's redirect hop) asks there.
 */
export async function executeToolBatch(
  deps: BatchDeps,
  calls: readonly ModelToolCall[],
): Promise<BatchOutcome> {
  const planned: Planned[] = [];
  const rows: OpenedCall[] = [];
  for (const [index, call] of calls.entries()) {
    const recordId = deps.takeRecordId(call.toolCallId);
    planned.push(await planCall(deps, call, index, recordId, rows));
  }
  await deps.recorder.open(rows);

  const results: IndexedResult[] = [];
  const approvals: IndexedApproval[] = [];
  const running: RunnablePlan[] = [];
  const proposing: RunnablePlan[] = [];
  for (const plan of planned) {
    if (plan.kind === "done") results.push({ index: plan.index, part: plan.part });
    else if (plan.kind === "approve") approvals.push(plainApproval(deps, plan));
    else if (plan.kind === "propose") proposing.push(plan);
    else running.push(plan);
  }

  // Proposals first: they change nothing, and they are how a two-phase call asks.
  const ready: ReadyHalf[] = [];
  await runBounded(proposing, deps.maxConcurrency, async (plan) => {
    const outcome = await propose(deps, plan);
    if ("approval" in outcome) approvals.push(outcome.approval);
    else if ("ready" in outcome) ready.push(outcome.ready);
    else results.push({ index: plan.index, part: outcome.part });
  });

  if (approvals.length > 0 || deps.signal.aborted) {
    const held: HeldCall[] = [
      ...running.map((plan) => holdPlan(deps, plan)),
      ...ready.map((r) => holdProposal(deps, r.plan, r)),
    ];
    return parkOrStop(deps, results, approvals, held);
  }

  const work: Array<RunnablePlan | ReadyHalf> = [...running, ...ready];
  await runBounded(work, deps.maxConcurrency, async (item) => {
    if ("executeToolName" in item) {
      results.push({ index: item.plan.index, part: await runReady(deps, item) });
      return;
    }
    const outcome = await runPlanned(deps, item);
    if ("approval" in outcome) approvals.push(outcome.approval);
    else results.push({ index: item.index, part: outcome.part });
  });
  return parkOrStop(deps, results, approvals, []);
}

/** The batch's end: stopped (nothing waits once the run is stopped), parked, or done. */
async function parkOrStop(
  deps: BatchDeps,
  results: IndexedResult[],
  approvals: IndexedApproval[],
  held: HeldCall[],
): Promise<BatchOutcome> {
  approvals.sort((a, b) => a.index - b.index);
  if (deps.signal.aborted) {
    // Those calls never started.
    for (const waiting of [...approvals, ...held]) {
      const call = { recordId: waiting.callId, shown: waiting.tool, ref: waiting };
      const part = await closeWith(deps, call, { status: "not-started" }, notStartedText, {
        quiet: true,
      });
      results.push({ index: waiting.index, part });
    }
    return { results: sortResults(results), approvals: [], held: [], stopped: true };
  }
  for (const approval of approvals) {
    deps.emit({
      type: "tool-call",
      callId: approval.callId,
      tool: approval.calledTool ?? approval.tool,
      state: "parked",
    });
  }
  return {
    results: sortResults(results),
    approvals,
    held: held.sort((a, b) => a.index - b.index),
    stopped: false,
  };
}

function sortResults(results: IndexedResult[]): IndexedResult[] {
  return results.sort((a, b) => a.index - b.index);
}

/** Runs `work` over `items` with at most `limit` in flight. */
async function runBounded<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  });
  await Promise.all(lanes);
}
