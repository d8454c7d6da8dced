// The server's scheduled prune (src/services/prune-tables.ts), every `intervalMs`: one statement
// per family and interval when there is nothing to delete, so it costs nothing at rest. Every
// instance schedules it; the advisory lock lets one prune at a time, and an instance that finds
// it held skips that round (the other is doing the same work). The first round comes a few
// minutes after start, not during it.
import type { Logger } from "../log.ts";
import type { ServiceContext } from "./context.ts";
import { prune } from "./prune-tables.ts";

export type PruneSchedule = {
  /** Stops scheduling; a prune in progress stops after its current batch. */
  stop(): Promise<void>;
};

/** The first round, at most this long after start (sooner when the interval is shorter). */
const firstRoundMs = 5 * 60_000;

export function startPruneSchedule(options: {
  services: ServiceContext;
  intervalMs: number;
  logger: Logger;
}): PruneSchedule {
  const { services, intervalMs, logger } = options;
  if (intervalMs <= 0) return { stop: async () => {} };
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<void> | undefined;

  const runRound = async () => {
    try {
      const report = await prune(services, {
        apply: true,
        actor: "system",
        signal: stopping.signal,
      });
      const deleted = report.families.filter((f) => f.rows > 0);
      if (deleted.length > 0) {
        logger.info("pruned rows past their retention", {
          rows: Object.fromEntries(deleted.map((f) => [f.family, f.rows])),
          durationMs: report.durationMs,
        });
      }
    } catch (error) {
      if ((error as { code?: string }).code === "conflict") return;
      logger.warn("scheduled prune failed; the next round retries", { error });
    }
  };

  const schedule = (delayMs: number) => {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      round = runRound().finally(() => {
        round = undefined;
        schedule(intervalMs);
      });
    }, delayMs);
    timer.unref();
  };
  // Spread instances started together over the first minute.
  schedule(Math.min(intervalMs, firstRoundMs) + Math.floor(Math.random() * 60_000));

  return {
    async stop() {
      stopping.abort();
      clearTimeout(timer);
      await round;
    },
  };
}
