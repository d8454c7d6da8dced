// The periodic work of an instance: heartbeat the runs executing here (and stop those a cancel or
// a revocation was recorded for, in case its notification was lost), close parked runs whose
// approval window passed, and mark runs interrupted whose instance stopped heartbeating.
//
// Each on its own beat, so an idle instance costs the database little (docs/runs.md, "What an
// idle instance sends"), every `periodMs` (the heartbeat period, 5 s by default):
//   - the runs executing here: every beat, and no statement when there are none;
//   - orphan recovery: every beat (one SELECT), so a dead instance's runs are taken over within
//     the staleness limit plus one beat, as before;
//   - parked-run expiry: every `expiryEvery` beats (30 s by default; an answer after the window
//     is refused whatever the status says, so this only settles the record);
//   - this instance's own row: every `instanceEvery` beats (a minute by default; nothing decides
//     on it).
import { isWaitingStatus } from "../domain/run.ts";
import { expiredError, outcomeOf, settledFromRun } from "./outcome.ts";
import type { RunCore } from "./run-core.ts";
import { beatInstance, listExpiredParkedRuns, lockRun, readRun } from "./run-queries.ts";
import { closeParkedRuns, heartbeat, recoverOrphanedRuns } from "./run-state.ts";

/** Marks orphaned runs interrupted; returns how many. */
export async function recoverRuns(core: RunCore): Promise<number> {
  const at = core.now();
  const recovered = await recoverOrphanedRuns(core.db, {
    instanceId: core.instanceId,
    staleBefore: new Date(at.getTime() - core.staleAfterMs),
    isLocal: (runId) => core.active.get(runId) !== undefined || core.active.claiming.has(runId),
    at,
  });
  for (const run of recovered) {
    core.logger.warn("marked an orphaned run interrupted", { runId: run.id });
    core.notifySettled(settledFromRun(run, outcomeOf(run)));
  }
  return recovered.length;
}

/** Closes parked runs whose approval window passed (status `expired`). */
export async function expireParkedRuns(core: RunCore): Promise<void> {
  const at = core.now();
  for (const candidate of await listExpiredParkedRuns(core.db, at)) {
    const closed = await core.db.transaction(async (tx) => {
      const run = await lockRun(tx, candidate.id);
      if (!run || !isWaitingStatus(run.status) || !run.parkedUntil || run.parkedUntil > at)
        return [];
      return closeParkedRuns(tx, {
        runs: [run],
        status: "expired",
        error: expiredError(run),
        actor: `instance:${core.instanceId}`,
        at,
      });
    });
    if (closed.length === 0) continue;
    const current = await readRun(core.db, candidate.id);
    if (current) core.notifySettled(settledFromRun(current, outcomeOf(current)));
  }
}

/**
 * Heartbeats the runs here and stops those a stop was recorded for (a cancel, a revocation) or
 * whose caller is revoked: the durable path, for when the notification never came.
 */
export async function stopRecordedCancels(core: RunCore): Promise<void> {
  const stops = await heartbeat(core.db, {
    instanceId: core.instanceId,
    runIds: core.active.ids(),
    at: core.now(),
  });
  for (const { runId, kind, reason } of stops) {
    const entry = core.active.get(runId);
    if (entry) core.active.stop(entry, { kind, message: reason });
  }
}

/** Heartbeat (with recorded cancels), parked-run expiry and orphan recovery, once. */
export async function sweep(core: RunCore): Promise<void> {
  await beatInstance(core.db, { id: core.instanceId, at: core.now() });
  await stopRecordedCancels(core);
  await expireParkedRuns(core);
  await recoverRuns(core);
}

/** What one beat of the sweeper does: see the top of this file. */
async function sweepBeat(core: RunCore, beat: number, every: SweepEvery): Promise<void> {
  if (beat % every.instance === 0)
    await beatInstance(core.db, { id: core.instanceId, at: core.now() });
  await stopRecordedCancels(core);
  if (beat % every.expiry === 0) await expireParkedRuns(core);
  await recoverRuns(core);
}

/** How many beats apart the rarer sweeps run. */
export type SweepEvery = { readonly expiry: number; readonly instance: number };

export const defaultSweepEvery: SweepEvery = { expiry: 6, instance: 12 };

/** Sweeps every `periodMs` (never two at once) until the returned stop is awaited. */
export function startSweeper(
  core: RunCore,
  periodMs: number,
  every: SweepEvery = defaultSweepEvery,
): { stop(): Promise<void> } {
  let sweeping: Promise<void> | undefined;
  let stopped = false;
  let beat = 0;
  const timer =
    periodMs > 0
      ? setInterval(() => {
          if (sweeping || stopped) return;
          beat += 1;
          sweeping = sweepBeat(core, beat, every)
            .catch((error: unknown) =>
              core.logger.warn("run sweep failed", { error: describeError(error) }),
            )
            .finally(() => {
              sweeping = undefined;
            });
        }, periodMs)
      : undefined;
  timer?.unref();
  return {
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await sweeping;
    },
  };
}

export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
