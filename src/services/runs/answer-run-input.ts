// The caller's answer to a run waiting `input-required` (the model asked it a question with
// ask_caller): the run resumes on this instance from where it stopped, with what it had. Its tool
// set is the caller's ceiling now ∩ the set it started with, its controls the stricter of how it
// started and the caller now, and its budgets what earlier segments left (the same row, the same
// meters): answering never buys a fresh run.
//
// Only the caller that started the run may answer; any other caller, and a run that does not
// exist, get the same NotFoundError, so an answer learns nothing about other callers' runs. A run
// that is not waiting for input is refused (ConflictError) and left as it is. A run whose window
// closed, or whose caller was revoked, is closed, not resumed.
//
// The claim and the going on are two steps (AnsweredRun): the claim is the compare-and-set that
// lets one answer through; the run goes on when the answering request resumes it, once the
// answer is recorded where the caller reads it (the A2A task's history). Otherwise a fast run
// could write its task's end before the task took the answer, and the answer would find its task
// finished. A stop meanwhile lets it go on as well, so it records why it ended.

import { appendAuditEvent } from "../../db/audit.ts";
import type { Caller, Run } from "../../db/schema.ts";
import type { PendingInput } from "../../domain/run.ts";
import { ConflictError, NotFoundError, UnavailableError } from "../../errors.ts";
import type { RunCore } from "../../runs/run-core.ts";
import { isUuid, lockRun } from "../../runs/run-queries.ts";
import { executeSegment } from "../../runs/segment.ts";
import type { AnsweredRun, AnswerRunInputRequest, RunEvent } from "../../runs/types.ts";
import { closeOrClaimWaitingRun, refuseClosedRun } from "./close-or-claim-waiting-run.ts";

/** Bound on the answer the model reads (the same order as a conversation turn). */
export const maxAnswerChars = 64 * 1024;

type Claim =
  | { kind: "claimed"; run: Run; caller: Caller; pending: PendingInput }
  | { kind: "closed"; why: string };

export async function answerRunInput({
  core,
  input,
}: {
  core: RunCore;
  input: { request: AnswerRunInputRequest; onEvent?: (event: RunEvent) => void };
}): Promise<AnsweredRun> {
  const { request, onEvent = () => {} } = input;
  if (core.stopping()) throw new UnavailableError("the run engine is shutting down");
  if (!isUuid(request.runId)) throw new NotFoundError("no such run");
  core.active.claiming.add(request.runId);
  try {
    const claim = await claimRun(core, request);
    if (claim.kind === "closed") return await refuseClosedRun(core, request.runId, claim.why);
    const { run, caller, pending } = claim;
    const entry = core.active.register(run.id, caller.id);
    let resume = () => {};
    const resumed = new Promise<void>((go) => {
      resume = go;
      const signal = entry.controller.signal;
      if (signal.aborted) go();
      else signal.addEventListener("abort", () => go(), { once: true });
    });
    const outcome = resumed.then(() => {
      core.emit(onEvent, { type: "status", status: "working" });
      return executeSegment(core, entry, {
        run,
        caller,
        // The recomputed ceiling, never wider than the set the run started with.
        set: core.toolSetFor(caller, run.toolSet),
        resume: { answer: { pending, text: request.answer.slice(0, maxAnswerChars) } },
        ...(request.stream === false ? { stream: false } : {}),
        ...(request.atEnd ? { atEnd: request.atEnd } : {}),
        onEvent,
      }).then((result) => result.outcome);
    });
    entry.done = outcome;
    return { runId: run.id, outcome, resume };
  } finally {
    core.active.claiming.delete(request.runId);
  }
}

async function claimRun(core: RunCore, request: AnswerRunInputRequest): Promise<Claim> {
  return core.db.transaction(async (tx): Promise<Claim> => {
    const run = await lockRun(tx, request.runId);
    // Another caller's run reads as a missing one.
    if (!run || run.callerId !== request.caller.id) throw new NotFoundError("no such run");
    const pending = run.pendingInput;
    if (run.status !== "input-required" || !pending) {
      throw new ConflictError(`the run is ${run.status}, not waiting for its caller's input`);
    }
    const claim = await closeOrClaimWaitingRun(tx, core, {
      run,
      from: "input-required",
      revokedBy: `instance:${core.instanceId}`,
      expiredWhy: "no answer came in time: the run expired",
      revokedMessage: "the caller was revoked while its run waited",
    });
    if (claim.kind === "closed") return claim;
    const { caller } = claim;
    await appendAuditEvent(tx, {
      actor: `caller:${caller.name}`,
      kind: "run.input-answered",
      subject: `run:${run.id}`,
      data: { runId: run.id, callId: pending.callId, answerChars: request.answer.length },
    });
    return { ...claim, pending };
  });
}
