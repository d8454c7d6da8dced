// The run engine (DESIGN §3-5) as the surfaces see it: one object whose methods are the run verbs
// of this folder, bound to one instance's run core (src/runs/run-core.ts). It registers the instance,
// listens for cancels of runs executing here, stops a revoked caller's runs and tells the surfaces
// which of its parked runs the revocation closed, sweeps, and shuts down in order.
//
// Several instances share one database. Each heartbeats the runs it executes; a run whose
// heartbeat goes stale is marked `interrupted` by whichever instance notices first. A cancel is
// recorded in the run's row (src/services/runs/cancel-run.ts); NOTIFY only makes it fast.
//
// @example
// const engine = await createRunEngine({ database, policies, ceilings, tools, model, instanceId,
//   logger, priceTable });
// directory.onCallerEvent((event) => engine.callerChanged(event));   // src/reactions.ts
// const { runId, outcome } = await engine.start({ caller, origin: "a2a", messages }, onEvent);
import { hostname } from "node:os";
import { type Notifications, openNotifications } from "../../db/notifications.ts";
import { cancelNotices } from "../../runs/cancel-channel.ts";
import { outcomeOf, type SettledRun, settledFromRun } from "../../runs/outcome.ts";
import { createRunCore, type RunCoreOptions } from "../../runs/run-core.ts";
import { readRun, registerInstance, removeInstance } from "../../runs/run-queries.ts";
import { revokedStopReason } from "../../runs/run-state.ts";
import type { StartQueue } from "../../runs/start-queue.ts";
import {
  describeError,
  recoverRuns,
  startSweeper,
  stopRecordedCancels,
  sweep,
} from "../../runs/sweeper.ts";
import type { RunEngine, RunHandle } from "../../runs/types.ts";
import { answerRunInput } from "./answer-run-input.ts";
import { type ApproveRunInput, approveRun } from "./approve-run.ts";
import { cancelRun } from "./cancel-run.ts";
import { getRun, type RunDetail } from "./get-run.ts";
import { type ListRunsInput, listRuns, type RunSummary } from "./list-runs.ts";
import { type RejectRunInput, rejectRun } from "./reject-run.ts";
import { startRun } from "./start-run.ts";

export type { SettledRun } from "../../runs/outcome.ts";
export type { ApproveRunInput } from "./approve-run.ts";
export type { RejectRunInput } from "./reject-run.ts";

export type RunEngineOptions = RunCoreOptions & {
  /** The instance's notification hub (shared with the caller directory). Default: its own. */
  readonly notifications?: Notifications;
  /**
   * Caller events (the caller directory's `onCallerEvent`): `revoked` stops the caller's runs. The
   * server passes none and wires `callerChanged` in its reactions table instead; tests use this.
   */
  readonly subscribeCallerEvents?: (listener: (event: CallerEventNotice) => void) => () => void;
};

/** What the engine needs of a caller event (src/services/caller-events.ts). */
export type CallerEventNotice = {
  readonly callerId: string;
  readonly change: string;
  /** `revoked`: the parked runs the revocation closed. */
  readonly closedRunIds?: readonly string[] | undefined;
};

export type PeergateRunEngine = RunEngine & {
  readonly instanceId: string;
  /** Approves the pending call of a parked run and resumes it here (first valid answer wins). */
  approveRun(input: ApproveRunInput): Promise<RunHandle>;
  /** Turns down the pending call; the run resumes here and the model reads the reason. */
  rejectRun(input: RejectRunInput): Promise<RunHandle>;
  listRuns(input?: ListRunsInput): Promise<RunSummary[]>;
  getRun(runId: string): Promise<RunDetail | undefined>;
  /** Marks orphaned runs interrupted; returns how many. Runs at creation and on every sweep. */
  recoverRuns(): Promise<number>;
  /** Heartbeat, parked-run expiry and orphan recovery, once (the timer does this periodically). */
  sweep(): Promise<void>;
  /** Told of every run that settles outside a `start()` handle. Returns an unsubscribe. */
  onRunSettled(listener: (settled: SettledRun) => void): () => void;
  /** Runs executing on this instance. */
  activeRunIds(): string[];
  /** The starts in flight and waiting on this instance (src/runs/start-queue.ts), for /metrics. */
  readonly starts: Pick<StartQueue, "stats" | "onWaited">;
  /**
   * A caller event heard on this instance (src/reactions.ts wires it): `revoked` stops the
   * caller's runs here and reports the parked runs the revocation closed.
   */
  callerChanged(event: CallerEventNotice): void;
  /** Graceful shutdown: refuse new runs, stop every run here, wait for their records. */
  stop(): Promise<void>;
};

/** Creates the engine: registers this instance, listens for cancels, recovers orphaned runs. */
export async function createRunEngine(options: RunEngineOptions): Promise<PeergateRunEngine> {
  let stopping = false;
  // A hub of its own sends no heartbeats: nothing here trusts notifications, they only speed up.
  const notifications =
    options.notifications ??
    (await openNotifications({
      database: options.database,
      logger: options.logger,
      heartbeatMs: 0,
    }));
  const core = await createRunCore(options, notifications, () => stopping);
  const { db, instanceId, logger, active } = core;

  await registerInstance(db, {
    id: instanceId,
    hostname: hostname(),
    pid: process.pid,
    at: core.now(),
  });
  const unlisten = await notifications.subscribe(cancelNotices, (notice) => {
    const entry = active.get(notice.runId);
    if (entry) active.stop(entry, { kind: "cancel", message: notice.reason });
  });
  // Cancels sent while notifications were lost are in the runs' rows: read them now rather than
  // at the next step or heartbeat.
  const offGap = notifications.onGap(() => {
    stopRecordedCancels(core).catch((error: unknown) =>
      logger.warn("could not read recorded cancels", { error: describeError(error) }),
    );
  });
  function callerChanged(event: CallerEventNotice): void {
    if (event.change !== "revoked") return;
    active.stopCaller(event.callerId, { kind: "revoked", message: revokedStopReason });
    // The revocation closed these parked runs in its own transaction; their surfaces learn it
    // here (every instance hears the event, so a surface may be told twice).
    void settleClosedRuns(event.closedRunIds ?? []);
  }
  const unsubscribe = options.subscribeCallerEvents?.(callerChanged) ?? (() => {});

  async function settleClosedRuns(runIds: readonly string[]): Promise<void> {
    for (const runId of runIds) {
      try {
        const run = await readRun(db, runId);
        if (run) core.notifySettled(settledFromRun(run, outcomeOf(run)));
      } catch (error) {
        logger.warn("could not read a run a revocation closed", {
          runId,
          error: describeError(error),
        });
      }
    }
  }

  await recoverRuns(core);
  const sweeper = startSweeper(core, options.heartbeatMs ?? 5_000);

  async function stop(): Promise<void> {
    if (stopping) return;
    stopping = true;
    // No sweep starts from here on; one in flight is waited for below.
    const sweepDone = sweeper.stop();
    const running = active.all();
    for (const entry of running) {
      active.stop(entry, {
        kind: "shutdown",
        message: "the instance shut down while the run worked",
      });
    }
    await Promise.allSettled(running.map((entry) => entry.done));
    await sweepDone;
    unsubscribe();
    offGap();
    try {
      await unlisten();
      if (!options.notifications) await notifications.close();
    } catch (error) {
      logger.warn("could not stop listening for run cancels", { error: describeError(error) });
    }
    try {
      await removeInstance(db, instanceId);
    } catch (error) {
      logger.warn("could not unregister this instance", { error: describeError(error) });
    }
  }

  return {
    instanceId,
    start: (request, onEvent) =>
      startRun({ core, input: { request, ...(onEvent ? { onEvent } : {}) } }),
    answerInput: (request, onEvent) =>
      answerRunInput({ core, input: { request, ...(onEvent ? { onEvent } : {}) } }),
    cancel: (runId, reason) => cancelRun({ core, input: { runId, reason } }),
    approveRun: (input) => approveRun({ core, input }),
    rejectRun: (input) => rejectRun({ core, input }),
    listRuns: (input) => listRuns({ services: core, ...(input ? { input } : {}) }),
    getRun: (runId) => getRun({ services: core, input: { runId } }),
    recoverRuns: () => recoverRuns(core),
    sweep: () => sweep(core),
    onRunSettled: (listener) => core.onRunSettled(listener),
    activeRunIds: () => active.ids(),
    starts: core.startQueue,
    callerChanged,
    stop,
  };
}
