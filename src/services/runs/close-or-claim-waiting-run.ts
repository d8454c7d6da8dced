// What an answer does with the waiting run it names (parked for an operator, or input-required
// for its caller) once it holds the row lock, shared by both answers so the two cannot drift: a
// run whose window closed is expired, a run whose caller was revoked (or is gone) is revoked;
// either way it is closed, not resumed, and the answer is refused with why. Otherwise the run is
// claimed for this instance, to resume here.

import type { DbTransaction } from "../../db/client.ts";
import type { Caller, Run } from "../../db/schema.ts";
import type { AuditActor } from "../../domain/audit.ts";
import { ConflictError, RateLimitedError } from "../../errors.ts";
import { isCallerRevoked } from "../../policy/caller-revoked.ts";
import { expiredError, outcomeOf, settledFromRun } from "../../runs/outcome.ts";
import type { RunCore } from "../../runs/run-core.ts";
import { readCaller, readRun } from "../../runs/run-queries.ts";
import { claimWaitingRun, closeParkedRuns } from "../../runs/run-state.ts";

export type WaitingRunClaim =
  | { kind: "claimed"; run: Run; caller: Caller }
  | { kind: "closed"; why: string };

/**
 * Inside the transaction that holds the run's row lock: closes `run` if its window has closed or
 * its caller was revoked, else claims it and returns the claimed row and the caller it resumes
 * under. A run that changed meanwhile is a ConflictError.
 */
export async function closeOrClaimWaitingRun(
  tx: DbTransaction,
  core: RunCore,
  input: {
    readonly run: Run;
    /** The status the run waits in. */
    readonly from: "parked" | "input-required";
    /** Who the end of a revoked caller's run is audited to. */
    readonly revokedBy: AuditActor;
    /** Why an expired run was not resumed, in the words of what it waited for. */
    readonly expiredWhy: string;
    /** The error the run of a revoked caller keeps. */
    readonly revokedMessage: string;
  },
): Promise<WaitingRunClaim> {
  const { run } = input;
  const at = core.now();
  if (run.parkedUntil && run.parkedUntil.getTime() <= at.getTime()) {
    await closeParkedRuns(tx, {
      runs: [run],
      status: "expired",
      error: expiredError(run),
      actor: `instance:${core.instanceId}`,
      at,
    });
    return { kind: "closed", why: input.expiredWhy };
  }
  const caller = await readCaller(tx, run.callerId);
  if (!caller || isCallerRevoked(caller)) {
    await closeParkedRuns(tx, {
      runs: [run],
      status: "revoked",
      error: { code: "caller-revoked", message: input.revokedMessage },
      actor: input.revokedBy,
      at,
    });
    return { kind: "closed", why: "its caller was revoked: the run ended" };
  }
  // A caller's answer resumes its run only within its concurrency limit: runs that ask questions
  // give their slots back, so answering many at once would otherwise run more than the limit.
  const slotLimit = input.from === "input-required" ? concurrencyLimit(caller) : undefined;
  const claimed = await claimWaitingRun(tx, {
    run,
    instanceId: core.instanceId,
    at,
    from: input.from,
    ...(slotLimit !== undefined ? { slotLimit } : {}),
  });
  if (claimed === "no-slot") {
    throw new RateLimitedError(
      `caller has ${slotLimit} runs in progress; its limit is ${slotLimit}`,
      core.concurrencyRetryAfterSeconds,
    );
  }
  if (!claimed) throw new ConflictError("the run changed while it was being answered");
  return { kind: "claimed", run: claimed, caller };
}

function concurrencyLimit(caller: Caller): number | null {
  const limit = caller.budgets.concurrentRuns;
  return typeof limit === "number" && Number.isFinite(limit) && limit >= 0 ? limit : null;
}

/**
 * After the transaction that closed the run has committed: tells the settled listeners how it
 * ended and refuses the answer.
 */
export async function refuseClosedRun(core: RunCore, runId: string, why: string): Promise<never> {
  const current = await readRun(core.db, runId);
  if (current) core.notifySettled(settledFromRun(current, outcomeOf(current)));
  throw new ConflictError(`the run was not resumed: ${why}`);
}
