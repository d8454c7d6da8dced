// Starting a run: admitted (a concurrency slot and the day's share taken by conditional updates of
// the caller's rows, src/runs/admission.ts), created with its `run.started` (or, when it cannot
// start at all, `run.failed`) audit event in one transaction, then executed here.
import { randomUUID } from "node:crypto";
import { appendAuditEvent } from "../../db/audit.ts";
import { commitAfterStatements } from "../../db/pipelined-transactions.ts";
import type { Caller, Run, RunError } from "../../db/schema.ts";
import { UnavailableError } from "../../errors.ts";
import { snapshotControls } from "../../gate/controls.ts";
import type { EffectiveToolSet } from "../../policy/effective-set.ts";
import { checkMessages, readCallerAndAdmit } from "../../runs/admission.ts";
import { readRunLimits, zeroUsage } from "../../runs/budgets.ts";
import { outcomeOf } from "../../runs/outcome.ts";
import type { RunCore } from "../../runs/run-core.ts";
import { insertRun } from "../../runs/run-state.ts";
import { executeSegment } from "../../runs/segment.ts";
import type { RunEvent, RunHandle, StartRunRequest } from "../../runs/types.ts";
import { failSpan, startSpan } from "../../trace.ts";
import { claimDelivery } from "./delivery-claim.ts";

export async function startRun({
  core,
  input,
}: {
  core: RunCore;
  input: { request: StartRunRequest; onEvent?: (event: RunEvent) => void };
}): Promise<RunHandle> {
  const { request, onEvent = () => {} } = input;
  if (core.stopping()) throw new UnavailableError("the run engine is shutting down");
  checkMessages(request.messages);
  // Admission as a span: the start queue's wait, the budget and concurrency checks, the run row.
  const admission = startSpan("peergate.run.admit", { "peergate.run.origin": request.origin });
  // A place among the starts in flight on this instance (src/runs/start-queue.ts): a caller's
  // burst waits its turn, in slices, behind every other caller's.
  const leave = await core.startQueue.enter(request.caller.id, concurrencyLimitOf(request.caller));
  const runId = randomUUID();
  const model = core.model;
  let created: {
    run: Run;
    caller: Caller;
    set: EffectiveToolSet;
    retryOf: string | undefined;
    failure?: RunError;
  };
  let entry: ReturnType<typeof core.active.register>;
  try {
    if (core.stopping()) throw new UnavailableError("the run engine is shutting down");
    // Registered before the run exists, so a revocation that lands meanwhile still finds it.
    entry = core.active.register(runId, request.caller.id);
    created = await core.db.transaction(async (tx) => {
      const at = core.now();
      const { caller, failure, reserve } = await readCallerAndAdmit(tx, {
        expected: request.caller,
        at,
        checkStartable: (c) => core.checkStartable(c),
        concurrencyRetryAfterSeconds: core.concurrencyRetryAfterSeconds,
      });
      const limits = readRunLimits(caller.budgets);
      const set = core.toolSetFor(caller);
      // The run, its event and the request's own rows are independent: sent together (pipelined),
      // with the COMMIT behind them unless a delivery is claimed (that reads, then decides).
      const writes = request.atStart?.(runId) ?? [];
      if (!request.delivery) commitAfterStatements(tx, 2 + writes.length);
      const inserting = insertRun(tx, {
        id: runId,
        callerId: caller.id,
        origin: request.origin,
        a2aTaskId: request.a2a?.taskId ?? null,
        a2aContextId: request.a2a?.contextId ?? null,
        status: failure ? "failed" : "working",
        approvalPolicy: caller.approvalPolicy,
        toolSet: set.offered.map((t) => t.name),
        segments: failure ? 0 : 1,
        budgetLimits: reserve ? { ...limits, dailyReserve: reserve } : limits,
        budgetUsed: { ...zeroUsage },
        messages: request.messages,
        modelId: model.ok ? model.id : null,
        ownerInstanceId: failure ? null : core.instanceId,
        heartbeatAt: failure ? null : at,
        startedAt: at,
        segmentStartedAt: failure ? null : at,
        createdAt: at,
        updatedAt: at,
        ...(failure ? { error: failure, finishedAt: at } : { controls: snapshotControls(caller) }),
      });
      const auditing = appendAuditEvent(tx, {
        actor: `caller:${caller.name}`,
        kind: failure ? "run.failed" : "run.started",
        subject: `run:${runId}`,
        data: {
          runId,
          callerId: caller.id,
          origin: request.origin,
          ...(request.a2a ? { a2aTaskId: request.a2a.taskId } : {}),
          approvalPolicy: caller.approvalPolicy,
          toolSet: set.offered.map((t) => t.name),
          modelId: model.ok ? model.id : null,
          ...(failure ? { error: { code: failure.code } } : {}),
        },
      });
      const [run, claimed] = await Promise.all([
        inserting,
        request.delivery
          ? claimDelivery(tx, request.delivery, { runId, callerId: caller.id })
          : undefined,
        auditing,
        ...writes.map((write) => tx.execute(write)),
      ]);
      return { run, caller, set, retryOf: claimed?.retryOf, ...(failure ? { failure } : {}) };
    });
    if (created.failure) failSpan(admission, undefined, created.failure.code);
  } catch (error) {
    failSpan(admission, error);
    core.active.remove(runId);
    throw error;
  } finally {
    admission.setAttribute("peergate.run.id", runId);
    admission.end();
    leave();
  }

  if (created.failure) {
    core.active.remove(runId);
    core.logger.warn("a run failed before it started", { runId, code: created.failure.code });
    core.emit(onEvent, { type: "status", status: "failed", message: created.failure.message });
    return {
      runId,
      ...(created.retryOf ? { retryOf: created.retryOf } : {}),
      outcome: Promise.resolve(outcomeOf(created.run)),
    };
  }
  core.emit(onEvent, { type: "status", status: "working" });
  const outcome = executeSegment(core, entry, {
    run: created.run,
    caller: created.caller,
    set: created.set,
    ...(request.stream === false ? { stream: false } : {}),
    ...(request.atEnd ? { atEnd: request.atEnd } : {}),
    onEvent,
  }).then((result) => result.outcome);
  entry.done = outcome;
  return { runId, ...(created.retryOf ? { retryOf: created.retryOf } : {}), outcome };
}

/** The caller's concurrent-run limit as it authenticated (null: none). */
function concurrencyLimitOf(caller: Caller): number | null {
  const limit = caller.budgets.concurrentRuns;
  return typeof limit === "number" && Number.isFinite(limit) && limit >= 0 ? limit : null;
}
