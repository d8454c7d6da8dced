// Readiness: the database answers and every migration in drizzle/ is applied. Anything else is
// "not ready", so a load balancer never sends traffic to an instance that would fail closed.
// The sandbox's state (checked once at start) is shown too, so PEERGATE_SANDBOX=none is visible
// to whoever watches the instance, not only in its start-up log.
import type { Database } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import type { SandboxStatus } from "../sandbox/prepare-sandbox.ts";

export type ReadinessCheck = { name: string; ok: boolean; detail: string };
export type Readiness = { ready: boolean; checks: ReadinessCheck[] };

/** The event loop's recent delay (src/metrics.ts createEventLoopLag). */
export type EventLoopReading = {
  readonly maxMs: number;
  readonly p99Ms: number;
  readonly windowSeconds: number;
};

/** A stall of at least this long is named on /readyz. */
export const highEventLoopLagMs = 250;

export async function checkReadiness({
  database,
  sandbox,
  eventLoop,
  timeoutMs = 1_000,
}: {
  database: Database;
  sandbox?: SandboxStatus;
  /** Reads the event loop's recent delay; shown, never a reason to be not ready. */
  eventLoop?: () => EventLoopReading;
  timeoutMs?: number;
}): Promise<Readiness> {
  const checks: ReadinessCheck[] = [];
  if (sandbox !== undefined) checks.push({ name: "sandbox", ...sandbox });
  if (eventLoop !== undefined) checks.push(describeEventLoop(eventLoop()));
  try {
    await database.ping(timeoutMs);
    checks.push({ name: "database", ok: true, detail: `${database.kind} answers` });
  } catch (error) {
    checks.push({ name: "database", ok: false, detail: describe(error) });
    checks.push({ name: "migrations", ok: false, detail: "not checked: database unreachable" });
    return { ready: false, checks };
  }
  try {
    const status = await migrationStatus(database);
    const ok = status.pending.length === 0;
    checks.push({
      name: "migrations",
      ok,
      detail: ok
        ? `${status.applied} of ${status.expected} applied`
        : `${status.pending.length} pending (${status.pending.join(", ")}); run \`peergate migrate\``,
    });
  } catch (error) {
    checks.push({ name: "migrations", ok: false, detail: describe(error) });
  }
  return { ready: checks.every((c) => c.ok), checks };
}

/**
 * The event loop as an operator reads it. A high delay does not make the instance not ready: it
 * answers, late, and taking it out of a load balancer would move its load onto the others. The
 * detail says what the figure means and where to look.
 */
function describeEventLoop(reading: EventLoopReading): ReadinessCheck {
  const seconds = Math.round(reading.windowSeconds);
  const max = Math.round(reading.maxMs);
  const p99 = Math.round(reading.p99Ms);
  if (reading.maxMs < highEventLoopLagMs) {
    return {
      name: "event-loop",
      ok: true,
      detail: `responsive: longest stall ${max} ms in the last ${seconds} s`,
    };
  }
  return {
    name: "event-loop",
    ok: true,
    detail: `high lag: the event loop was held for up to ${max} ms (p99 ${p99} ms) in the last ${seconds} s, so every request on this instance (probes, heartbeats, revocations) waited up to that long; see peergate_run_starts_waiting and peergate_event_loop_lag_max_seconds on /metrics, and PEERGATE_RUN_STARTS_AT_ONCE`,
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
