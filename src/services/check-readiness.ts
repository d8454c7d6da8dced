// Readiness: the database answers and every migration in drizzle/ is applied. Anything else is
// "not ready", so a load balancer never sends traffic to an instance that would fail closed.
// The sandbox's state (checked once at start) is shown too, so PEERGATE_SANDBOX=none is visible
// to whoever watches the instance, not only in its start-up log.
import type { Database } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import type { SandboxStatus } from "../sandbox/prepare-sandbox.ts";

export type ReadinessCheck = { name: string; ok: boolean; detail: string };
export type Readiness = { ready: boolean; checks: ReadinessCheck[] };

export async function checkReadiness({
  database,
  sandbox,
  timeoutMs = 1_000,
}: {
  database: Database;
  sandbox?: SandboxStatus;
  timeoutMs?: number;
}): Promise<Readiness> {
  const checks: ReadinessCheck[] = [];
  if (sandbox !== undefined) checks.push({ name: "sandbox", ...sandbox });
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

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
