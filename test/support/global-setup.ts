// vitest globalSetup: starts ONE throwaway PostgreSQL cluster for the whole test run and hands
// its admin URL to test files (`inject("postgresAdminUrl")`; test/support/databases.ts wraps
// it). The cluster lives in a fresh temp dir, listens on 127.0.0.1 only, on a port picked here,
// and is stopped and removed in teardown (see postgres-cluster.ts).
//
// Without PostgreSQL on the machine the real-PostgreSQL tests are skipped with a visible message,
// unless PEERGATE_TEST_POSTGRES=required (set by .ci/run): then the run fails.
// PEERGATE_TEST_POSTGRES=skip skips them on purpose (a quick PGlite-only run).
import type { TestProject } from "vitest/node";
import { findPostgres, type PostgresCluster, startPostgresCluster } from "./postgres-cluster.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** Superuser URL of the shared test cluster; absent when PostgreSQL is not available. */
    postgresAdminUrl?: string;
    /** Why the real-PostgreSQL tests are skipped; absent when they run. */
    postgresSkipReason?: string;
  }
}

let cluster: PostgresCluster | undefined;

function skip(project: TestProject, reason: string): void {
  if (process.env.PEERGATE_TEST_POSTGRES === "required") {
    throw new Error(`PEERGATE_TEST_POSTGRES=required, but ${reason}`);
  }
  console.warn(
    `\n  SKIPPING real-PostgreSQL tests: ${reason}.\n` +
      "  (PGlite variants still run. Install PostgreSQL, or set PEERGATE_TEST_POSTGRES=required to make this an error.)\n",
  );
  project.provide("postgresSkipReason", reason);
}

export async function setup(project: TestProject): Promise<void> {
  if (process.env.PEERGATE_TEST_POSTGRES === "skip") {
    skip(project, "PEERGATE_TEST_POSTGRES=skip");
    return;
  }
  const installation = findPostgres();
  if ("unavailable" in installation) {
    skip(project, installation.unavailable);
    return;
  }
  const started = performance.now();
  // Present but failing to start is a broken machine, not a missing feature: always an error.
  cluster = await startPostgresCluster({ installation });
  const ms = Math.round(performance.now() - started);
  console.log(
    `  test PostgreSQL (${installation.binDir}) on 127.0.0.1:${cluster.port}, started in ${ms} ms`,
  );
  project.provide("postgresAdminUrl", cluster.adminUrl);
}

export async function teardown(): Promise<void> {
  cluster?.remove();
  cluster = undefined;
}
