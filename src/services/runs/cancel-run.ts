// Canceling a run. A parked run is closed at once. A working run gets the cancel recorded in its
// row, with its audit event, in one transaction; only then does this answer true. The instance
// executing the run reads the record before each step's tools (and on its heartbeat), so the
// cancel holds when the NOTIFY that makes it fast is lost.

import { appendAuditEvent } from "../../db/audit.ts";
import type { AuditActor } from "../../domain/audit.ts";
import { isWaitingStatus } from "../../domain/run.ts";
import { cancelNotices } from "../../runs/cancel-channel.ts";
import { outcomeOf, settledFromRun } from "../../runs/outcome.ts";
import type { RunCore } from "../../runs/run-core.ts";
import { activeStatuses, lockRun, readRun } from "../../runs/run-queries.ts";
import { closeParkedRuns, requestCancel } from "../../runs/run-state.ts";

export type CancelRunInput = { readonly runId: string; readonly reason: string };

/** True once the cancel is recorded (or the parked run closed); false when the run is not active. */
export async function cancelRun({
  core,
  input,
}: {
  core: RunCore;
  input: CancelRunInput;
}): Promise<boolean> {
  const { runId } = input;
  const reason = String(input.reason || "canceled").slice(0, 500);
  const actor: AuditActor = `instance:${core.instanceId}`;
  const result = await core.db.transaction(async (tx) => {
    const run = await lockRun(tx, runId);
    if (!run) return "none" as const;
    const at = core.now();
    if (isWaitingStatus(run.status)) {
      const closed = await closeParkedRuns(tx, {
        runs: [run],
        status: "canceled",
        error: { code: "canceled", message: reason },
        actor,
        at,
      });
      return closed.length > 0 ? ("closed" as const) : ("none" as const);
    }
    if (!activeStatuses.includes(run.status)) return "none" as const;
    if (!(await requestCancel(tx, { runId, reason, at }))) return "none" as const;
    await appendAuditEvent(tx, {
      actor,
      kind: "run.cancel-requested",
      subject: `run:${runId}`,
      data: { runId, reason },
    });
    return "requested" as const;
  });

  const local = core.active.get(runId);
  if (result === "none") {
    // A run this instance is still creating has no committed row yet; stopping it here is what
    // holds (its segment starts stopped).
    if (!local) return false;
    core.active.stop(local, { kind: "cancel", message: reason });
    return true;
  }
  if (result === "closed") {
    const current = await readRun(core.db, runId);
    if (current) core.notifySettled(settledFromRun(current, outcomeOf(current)));
    return true;
  }
  if (local) {
    core.active.stop(local, { kind: "cancel", message: reason });
    return true;
  }
  try {
    await core.notifications.publish(cancelNotices, { type: "cancel", runId, reason });
  } catch (error) {
    core.logger.warn(
      "a cancel was recorded but its notification failed; it holds at the next step",
      {
        runId,
        error,
      },
    );
  }
  return true;
}
