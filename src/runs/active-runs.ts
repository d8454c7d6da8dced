// The runs executing on this instance, each with the AbortController that stops it and the reason
// it was stopped. Cancel, revocation, deadline and shutdown all stop a run the same way: they set
// the reason once and abort; the segment reads the reason when it records the end.
export type StopReason = {
  readonly kind: "cancel" | "revoked" | "deadline" | "shutdown";
  readonly message: string;
};

export type ActiveRun = {
  readonly runId: string;
  readonly callerId: string;
  readonly controller: AbortController;
  reason: StopReason | undefined;
  /** Settles when the run's segment has recorded its end. */
  done: Promise<unknown>;
};

export type ActiveRuns = {
  /** Registers a run before its row exists, so a revocation landing meanwhile still finds it. */
  register(runId: string, callerId: string): ActiveRun;
  get(runId: string): ActiveRun | undefined;
  remove(runId: string): void;
  /** Stops a run (the first reason wins). */
  stop(entry: ActiveRun, reason: StopReason): void;
  /** Stops every run of one caller here. */
  stopCaller(callerId: string, reason: StopReason): void;
  all(): ActiveRun[];
  ids(): string[];
  /** Runs this instance is claiming from `parked` (the row names it before it is registered). */
  readonly claiming: Set<string>;
};

export function createActiveRuns(): ActiveRuns {
  const active = new Map<string, ActiveRun>();
  const stop = (entry: ActiveRun, reason: StopReason) => {
    if (entry.controller.signal.aborted) return;
    entry.reason = reason;
    entry.controller.abort(new Error(reason.message));
  };
  return {
    register(runId, callerId) {
      const entry: ActiveRun = {
        runId,
        callerId,
        controller: new AbortController(),
        reason: undefined,
        done: Promise.resolve(),
      };
      active.set(runId, entry);
      return entry;
    },
    get: (runId) => active.get(runId),
    remove: (runId) => void active.delete(runId),
    stop,
    stopCaller(callerId, reason) {
      for (const entry of active.values()) if (entry.callerId === callerId) stop(entry, reason);
    },
    all: () => [...active.values()],
    ids: () => [...active.keys()],
    claiming: new Set(),
  };
}
