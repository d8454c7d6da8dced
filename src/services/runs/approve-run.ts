// Approving the pending call of a parked run: the run resumes here and runs the call.
import type { AuditActor } from "../../domain/audit.ts";
import type { RunCore } from "../../runs/run-core.ts";
import type { RunHandle } from "../../runs/types.ts";
import { answerParkedRun } from "./answer-parked-run.ts";

export type ApproveRunInput = {
  readonly runId: string;
  readonly callId: string;
  readonly argsDigest: string;
  /** Audit actor. Default `operator`. */
  readonly actor?: AuditActor;
};

export function approveRun({
  core,
  input,
}: {
  core: RunCore;
  input: ApproveRunInput;
}): Promise<RunHandle> {
  return answerParkedRun({
    core,
    input: {
      runId: input.runId,
      callId: input.callId,
      argsDigest: input.argsDigest,
      decision: { approved: true },
      actor: input.actor ?? "operator",
    },
  });
}
