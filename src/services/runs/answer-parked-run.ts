// The operator's answer to a parked run, shared by approve and reject: the first valid answer wins
// (the run row is locked and compare-and-set from `parked`), a stale or late answer is refused and
// audited, and a run whose window closed or whose caller was revoked meanwhile is closed, not
// resumed. A claimed run resumes on this instance, whichever instance parked it.

import { appendAuditEvent } from "../../db/audit.ts";
import type { Caller, Run, RunStatus } from "../../db/schema.ts";
import type { AuditActor } from "../../domain/audit.ts";
import { ConflictError, NotFoundError, UnavailableError } from "../../errors.ts";
import type { ApprovalDecision } from "../../gate/batch.ts";
import { settledFromRun } from "../../runs/outcome.ts";
import type { RunCore } from "../../runs/run-core.ts";
import { lockRun } from "../../runs/run-queries.ts";
import { executeSegment } from "../../runs/segment.ts";
import type { RunHandle } from "../../runs/types.ts";
import { closeOrClaimWaitingRun, refuseClosedRun } from "./close-or-claim-waiting-run.ts";

export type ParkedRunAnswer = {
  readonly runId: string;
  readonly callId?: string | undefined;
  readonly argsDigest?: string | undefined;
  readonly decision: ApprovalDecision;
  readonly actor: AuditActor;
};

type Claim =
  | { kind: "claimed"; run: Run; caller: Caller }
  | { kind: "stale" }
  | { kind: "not-waiting"; status: RunStatus }
  | { kind: "closed"; why: string };

export async function answerParkedRun({
  core,
  input,
}: {
  core: RunCore;
  input: ParkedRunAnswer;
}): Promise<RunHandle> {
  if (core.stopping()) throw new UnavailableError("the run engine is shutting down");
  core.active.claiming.add(input.runId);
  try {
    const claim = await claimRun(core, input);
    if (claim.kind !== "claimed") return await refuse(core, input, claim);
    return resumeClaimed(core, claim.run, claim.caller, input.decision);
  } finally {
    core.active.claiming.delete(input.runId);
  }
}

async function claimRun(core: RunCore, answer: ParkedRunAnswer): Promise<Claim> {
  return core.db.transaction(async (tx): Promise<Claim> => {
    const run = await lockRun(tx, answer.runId);
    if (!run) throw new NotFoundError("no such run");
    const pending = run.pendingApproval;
    if (run.status !== "parked" || !pending || !run.pendingBatch) {
      return { kind: "not-waiting", status: run.status };
    }
    if (
      (answer.callId !== undefined && answer.callId !== pending.callId) ||
      (answer.argsDigest !== undefined && answer.argsDigest !== pending.argsDigest)
    ) {
      return { kind: "stale" };
    }
    const claim = await closeOrClaimWaitingRun(tx, core, {
      run,
      from: "parked",
      revokedBy: answer.actor,
      expiredWhy: "its approval window had closed: the run expired",
      revokedMessage: "the caller was revoked while this run was parked",
    });
    if (claim.kind === "closed") return claim;
    await appendAuditEvent(tx, {
      actor: answer.actor,
      kind: answer.decision.approved ? "run.approved" : "run.call-rejected",
      subject: `run:${run.id}`,
      data: {
        runId: run.id,
        callId: pending.callId,
        tool: pending.tool,
        argsDigest: pending.argsDigest,
        ...(!answer.decision.approved && answer.decision.reason
          ? { reason: answer.decision.reason.slice(0, 500) }
          : {}),
      },
    });
    return claim;
  });
}

async function refuse(
  core: RunCore,
  answer: ParkedRunAnswer,
  claim: Exclude<Claim, { kind: "claimed" }>,
): Promise<never> {
  if (claim.kind === "closed") return await refuseClosedRun(core, answer.runId, claim.why);
  // A refused answer is audited like any refusal: an approval that arrives after the run was
  // revoked (its caller revoked), answered or expired leaves a trace, not only a 409.
  await appendAuditEvent(core.db, {
    actor: answer.actor,
    kind: "run.answer-refused",
    subject: `run:${answer.runId}`,
    data: {
      runId: answer.runId,
      callId: answer.callId ?? null,
      argsDigest: answer.argsDigest ?? null,
      ...(claim.kind === "not-waiting" ? { runStatus: claim.status } : {}),
    },
  });
  throw new ConflictError(
    claim.kind === "stale"
      ? "the answer does not name the call this run waits on: callId and argsDigest must match its pending approval"
      : `the run is ${claim.status}, not waiting for an operator`,
  );
}

/** Continues a run this instance just claimed; its end goes to the onRunSettled listeners. */
function resumeClaimed(
  core: RunCore,
  run: Run,
  caller: Caller,
  decision: ApprovalDecision,
): RunHandle {
  const entry = core.active.register(run.id, caller.id);
  // The recomputed ceiling, never wider than the set the run started with.
  const set = core.toolSetFor(caller, run.toolSet);
  const outcome = executeSegment(core, entry, {
    run,
    caller,
    set,
    resume: { decision },
    onEvent: () => {},
  }).then((result) => {
    if (!result.takenOver) {
      core.notifySettled(settledFromRun(run, result.outcome, result.pendingTool));
    }
    return result.outcome;
  });
  entry.done = outcome;
  return { runId: run.id, outcome };
}
