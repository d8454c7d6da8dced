// The audit chainer: gives committed audit events their seq and hashes (src/db/audit.ts explains
// the order and why nothing is skipped). Every instance runs one; a pass takes a
// transaction-scoped advisory lock, so one pass at a time chains, cluster-wide, and whichever
// instance gets the lock next does the work. A chainer that dies mid-pass loses its connection,
// PostgreSQL rolls the pass back and frees the lock, and the next pass of any instance redoes it:
// there is no leader to elect or hand over.
//
// Appends send no NOTIFY (that would be one more statement per append); the chainer polls every
// `intervalMs` (default 50 ms) and runs batches back to back while they come back full. Chaining
// lag, measured in bench/audit.ts, is the interval plus the longest transaction running at the
// time.
import type { Logger } from "../log.ts";
import { chainAuditEvents, type FlushResult, flushAuditChain } from "./audit.ts";
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
  /** Pause between passes that found nothing more to do. Default 50 ms. */
  intervalMs?: number;
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
  const batchSize = options.batchSize ?? 1_000;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<void> | undefined;
  let lastErrorLogAt = Number.NEGATIVE_INFINITY;
  let failing = false;

  /** Batches back to back while they come back full (until stopped, unless `toTheEnd`). */
  const runPass = async (toTheEnd = false) => {
    try {
      // Not waiting for the lock: another instance's pass holding it chains the same events.
      let result = await chainAuditEvents(database.db, { batchSize, maxBatches: 1 });
      while (result.more && (toTheEnd || !stopped)) {
        result = await chainAuditEvents(database.db, { batchSize, maxBatches: 1 });
      }
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
    timer = setTimeout(
      () => {
        pass = runPass().finally(() => {
          pass = undefined;
          schedule();
        });
      },
      failing ? Math.max(intervalMs, failureRetryMs) : intervalMs,
    );
    timer.unref();
  };
  schedule();

  return {
    async stop() {
      if (stopped) return;
      stopped = true;
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
