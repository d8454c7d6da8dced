// The notification that makes a recorded cancel fast: the instance executing the run hears it and
// stops the run at once. Losing it delays the cancel to the run's next between-steps check or
// heartbeat, never loses it (the cancel is in the run's row).
import type { Channel } from "../db/notifications.ts";

export const runsChannel = "peergate_runs";

export type CancelNotice = {
  readonly type: "cancel";
  readonly runId: string;
  readonly reason: string;
};

export function formatCancelNotice(notice: Pick<CancelNotice, "runId" | "reason">): string {
  return JSON.stringify({ type: "cancel", runId: notice.runId, reason: notice.reason });
}

export function parseCancelNotice(payload: string): CancelNotice | undefined {
  let message: { type?: unknown; runId?: unknown; reason?: unknown };
  try {
    message = JSON.parse(payload) as typeof message;
  } catch {
    return undefined;
  }
  if (message.type !== "cancel" || typeof message.runId !== "string") return undefined;
  return {
    type: "cancel",
    runId: message.runId,
    reason: typeof message.reason === "string" ? message.reason : "canceled",
  };
}

export const cancelNotices: Channel<CancelNotice> = {
  name: runsChannel,
  parse: parseCancelNotice,
  format: formatCancelNotice,
};
