// A database outage in the log as state changes, not a line per failed request: the first request
// answered 503 because the database is unavailable logs why (warn), later ones are only counted
// (a summary each minute while it lasts), and the first request answered without a server error
// after it logs that the database is back, with how many requests failed and for how long. Probes
// and scrapes (/healthz, /metrics, the agent card) do not end an outage: they may not touch the
// database.

import type { Logger } from "../log.ts";

export type OutageLog = {
  /** A request failed because the database is unavailable. */
  failed(reason: string | undefined, error: unknown): void;
  /** A request was answered; `status` below 500 on a database route ends an outage. */
  answered(route: string, status: number): void;
};

const notProof = /^\/(healthz|metrics|\.well-known\/)/;

export function createOutageLog(
  logger: Logger,
  options: { now?: () => number; summaryEveryMs?: number } = {},
): OutageLog {
  const now = options.now ?? (() => performance.now());
  const summaryEveryMs = options.summaryEveryMs ?? 60_000;
  let down: { since: number; failed: number; lastSummary: number } | undefined;
  return {
    failed(reason, error) {
      const at = now();
      if (!down) {
        down = { since: at, failed: 1, lastSummary: at };
        logger.warn("the database is unavailable: requests are answered 503 until it is back", {
          reason,
          error,
        });
        return;
      }
      down.failed += 1;
      if (at - down.lastSummary >= summaryEveryMs) {
        down.lastSummary = at;
        logger.warn("the database is still unavailable", {
          failedRequests: down.failed,
          downForMs: Math.round(at - down.since),
          reason,
        });
      }
    },
    answered(route, status) {
      if (!down || status >= 500 || notProof.test(route)) return;
      logger.info("the database is available again", {
        failedRequests: down.failed,
        downForMs: Math.round(now() - down.since),
      });
      down = undefined;
    },
  };
}
