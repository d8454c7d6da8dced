// The audit chainer: gives committed audit events their seq and hashes (src/db/audit.ts explains
// the order and why nothing is skipped). Every instance runs one; a pass takes a
// transaction-scoped advisory lock, so one pass at a time chains, cluster-wide, and whichever
// instance gets the lock next does the work. A chainer that dies mid-pass loses its connection,
// PostgreSQL rolls the pass back and frees the lock, and the next pass of any instance redoes it:
// there is no leader to elect or hand over.
//
// Appends send no NOTIFY (that would be one more statement per append). Instead each append made
// in this process cues this process's chainer (`onAuditWrite`, before the commit): an idle
// chainer's next pass comes `intervalMs` (default 50 ms) later, a busy one's pause starts again
// from `intervalMs` after the pass it waits for, and while passes find nothing the pause doubles (a
// commit that lands after the first look is still chained soon) until it would pass 2 s; then it
// is `idleIntervalMs` (default 30 s): an idle instance looks twice a minute. Batches run back to back while they come back
// full. Chaining lag, measured in bench/audit.ts, is the interval plus the longest transaction
// running at the time; an event whose instance died before its chainer looked is chained by the
// next pass of any instance, within `idleIntervalMs`.
import type { Logger } from "../log.ts";
import { chainAuditEvents, type FlushResult, flushAuditChain, onAuditWrite } from "./audit.ts";
import { backOff } from "./back-off.ts";
import type { Database } from "./client.ts";

export type AuditChainer = {
  /**
   * Stops polling, waits for the pass in progress, then chains once more what is chainable;
   * gives up on those after `stopTimeoutMs` (a database that does not answer must not hold up a
   * shutdown: what is left is chained by the next pass of any instance).
   */
  stop(): Promise<void>;
  /** Chains every event committed before the call (see `flushAuditChain`). */
  flush(options?: { timeoutMs?: number }): Promise<FlushResult>;
};

export type AuditChainerOptions = {
  database: Database;
  logger: Logger;
  /** Pause after a cue or a pass that chained something. Default 50 ms. */
  intervalMs?: number;
  /** The longest pause: passes that find nothing double the pause up to it. Default 30 s. */
  idleIntervalMs?: number;
  /** Events per transaction. Default 1 000. */
  batchSize?: number;
  /** How long `stop()` waits for the last passes. Default 2 s. */
  stopTimeoutMs?: number;
};

/** The pause after a failed pass. */
const failureRetryMs = 1_000;

/** Logs a failing pass at most this often; the chainer keeps trying. */
const errorLogIntervalMs = 10_000;

export function startAuditChainer(options: AuditChainerOptions): AuditChainer {
  const { database, logger } = options;
  const intervalMs = options.intervalMs ?? 50;
  const idleIntervalMs = Math.max(options.idleIntervalMs ?? 30_000, intervalMs);
  const batchSize = options.batchSize ?? 1_000;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  /** The pause the timer was set for (undefined while a pass runs). */
  let scheduledMs: number | undefined;
  let pauseMs = intervalMs;
  let pass: Promise<void> | undefined;
  let lastErrorLogAt = Number.NEGATIVE_INFINITY;
  let failing = false;

  /** Batches back to back while they come back full (until stopped, unless `toTheEnd`). */
  const runPass = async (toTheEnd = false) => {
    try {
      // Not waiting for the lock: another instance's pass holding it chains the same events.
      let result = await chainAuditEvents(database.db, { batchSize, maxBatches: 1 });
      let chained = result.chained;
      while (result.more && (toTheEnd || !stopped)) {
        result = await chainAuditEvents(database.db, { batchSize, maxBatches: 1 });
        chained += result.chained;
      }
      // Work found: look again soon. Nothing (or another instance's pass busy): look later.
      pauseMs = chained > 0 ? intervalMs : backOff(pauseMs, idleIntervalMs);
      failing = false;
    } catch (error) {
      failing = true;
      const now = performance.now();
      if (now - lastErrorLogAt >= errorLogIntervalMs) {
        lastErrorLogAt = now;
        logger.warn("audit chaining failed; retrying", { error });
      }
    }
  };

  const schedule = () => {
    if (stopped) return;
    // While the database is failing, try once a second rather than every interval.
    scheduledMs = failing ? Math.max(pauseMs, failureRetryMs) : pauseMs;
    timer = setTimeout(() => {
      scheduledMs = undefined;
      pass = runPass().finally(() => {
        pass = undefined;
        schedule();
      });
    }, scheduledMs);
    timer.unref();
  };
  // An append here: the next pass within `intervalMs` (a pass running now schedules it itself).
  const offWrite = onAuditWrite(() => {
    pauseMs = intervalMs;
    // Only an idle chainer is woken early; a busy one's next pass is near anyway.
    if (scheduledMs === undefined || scheduledMs < idleIntervalMs || failing || stopped) return;
    clearTimeout(timer);
    schedule();
  });
  schedule();

  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      offWrite();
      clearTimeout(timer);
      const last = (async () => {
        await pass;
        await runPass(true);
      })();
      let giveUp: NodeJS.Timeout | undefined;
      await Promise.race([
        last,
        new Promise((resolve) => {
          giveUp = setTimeout(resolve, options.stopTimeoutMs ?? 2_000);
        }),
      ]);
      clearTimeout(giveUp);
    },
    flush(flushOptions = {}) {
      return flushAuditChain(database.db, { batchSize, timeoutMs: flushOptions.timeoutMs });
    },
  };
}
