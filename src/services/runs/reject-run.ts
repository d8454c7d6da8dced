// Turning down the pending call of a parked run: the run resumes here and the model reads the
// reason as the call's result, so it can reason around the refusal.
import type { AuditActor } from "../../domain/audit.ts";
import type { RunCore } from "../../runs/run-core.ts";
import type { RunHandle } from "../../runs/types.ts";
import { answerParkedRun } from "./answer-parked-run.ts";

export type RejectRunInput = {
  readonly runId: string;
  /** Shown to the model as the call's result. */
  readonly reason?: string;
  /** When given, must name the pending call (a stale rejection is refused like a stale approval). */
  readonly callId?: string;
  /** Audit actor. Default `admin`. */
  readonly actor?: AuditActor;
};

export function rejectRun({
  core,
  input,
}: {
  core: RunCore;
  input: RejectRunInput;
}): Promise<RunHandle> {
  return answerParkedRun({
    core,
    input: {
      runId: input.runId,
      ...(input.callId !== undefined ? { callId: input.callId } : {}),
      decision: { approved: false, ...(input.reason ? { reason: input.reason } : {}) },
      actor: input.actor ?? "admin",
    },
  });
}
