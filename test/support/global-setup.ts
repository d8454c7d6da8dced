// vitest globalSetup: starts ONE throwaway PostgreSQL cluster for the whole test run and hands
// its admin URL to test files (`inject("postgresAdminUrl")`; test/support/databases.ts wraps
// it). The cluster lives in a fresh temp dir, listens on 127.0.0.1 only, on a port picked here,
// and is stopped and removed in teardown.
//
// Without PostgreSQL on the machine the real-PostgreSQL tests are skipped with a visible message,
// unless PEERGATE_TEST_POSTGRES=required (set by .ci/run): then the run fails.
// PEERGATE_TEST_POSTGRES=skip skips them on purpose (a quick PGlite-only run).
//
// We run as root in CI and sessions, and initdb/postgres refuse root, so the cluster runs as the
// `postgres` OS user through runuser (see ../shared/notes/postgres.md).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** Superuser URL of the shared test cluster; absent when PostgreSQL is not available. */
    postgresAdminUrl?: string;
    /** Why the real-PostgreSQL tests are skipped; absent when they run. */
    postgresSkipReason?: string;
  }
}

type Cluster = { root: string; dataDir: string; pgCtl: string; runAs: string | undefined };

let cluster: Cluster | undefined;

function findBinDir(): string | undefined {
  const candidates: string[] = [];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) if (dir) candidates.push(dir);
  const base = "/usr/lib/postgresql";
  if (fs.existsSync(base)) {
    const versions = fs
      .readdirSync(base)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(path.join(base, v, "bin"));
  }
  return candidates.find(
    (dir) =>
      fs.existsSync(path.join(dir, "initdb")) &&
      fs.existsSync(path.join(dir, "pg_ctl")) &&
      fs.existsSync(path.join(dir, "postgres")),
  );
}

/** tmpfs when there is one: CREATE DATABASE per test copies a few MB each time. */
function pickScratchBase(): string {
  try {
    fs.accessSync("/dev/shm", fs.constants.W_OK);
    return "/dev/shm";
  } catch {
    return os.tmpdir();
  }
}

function lookUpUser(name: string): { uid: number; gid: number } | undefined {
  const result = spawnSync("id", ["-u", name], { encoding: "utf8" });
  const group = spawnSync("id", ["-g", name], { encoding: "utf8" });
  if (result.status !== 0 || group.status !== 0) return undefined;
  return { uid: Number(result.stdout.trim()), gid: Number(group.stdout.trim()) };
}

async function pickFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("could not read the picked port"));
      });
    });
  });
}

function run(runAs: string | undefined, command: string, args: string[]): void {
  const [file, argv] = runAs ? ["runuser", ["-u", runAs, "--", command, ...args]] : [command, args];
  // cwd: the postgres user may not be able to enter ours.
  const result = spawnSync(file, argv, { encoding: "utf8", timeout: 60_000, cwd: os.tmpdir() });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim();
    throw new Error(
      `${path.basename(command)} failed (${result.error?.message ?? `exit ${result.status}`}):\n${output}`,
    );
  }
}

function stopCluster(): void {
  if (!cluster) return;
  const { root, dataDir, pgCtl, runAs } = cluster;
  cluster = undefined;
  const [file, argv] = runAs
    ? ["runuser", ["-u", runAs, "--", pgCtl, "-D", dataDir, "-m", "immediate", "stop"]]
    : [pgCtl, ["-D", dataDir, "-m", "immediate", "stop"]];
  spawnSync(file, argv, { stdio: "ignore", timeout: 30_000, cwd: os.tmpdir() });
  fs.rmSync(root, { recursive: true, force: true });
}

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
  const binDir = findBinDir();
  if (!binDir) {
    skip(project, "no initdb/pg_ctl/postgres on PATH or under /usr/lib/postgresql/*/bin");
    return;
  }
  const isRoot = process.getuid?.() === 0;
  const owner = isRoot ? lookUpUser("postgres") : undefined;
  if (isRoot && !owner) {
    skip(project, "running as root and there is no `postgres` OS user to run the server as");
    return;
  }

  const root = fs.mkdtempSync(path.join(pickScratchBase(), "peergate-test-pg-"));
  const dataDir = path.join(root, "data");
  const runAs = owner ? "postgres" : undefined;
  if (owner) fs.chownSync(root, owner.uid, owner.gid);
  const pgCtl = path.join(binDir, "pg_ctl");
  cluster = { root, dataDir, pgCtl, runAs };
  // If the run is killed before teardown, do not leave a server behind.
  process.once("exit", stopCluster);

  try {
    const started = performance.now();
    run(runAs, path.join(binDir, "initdb"), [
      "-D",
      dataDir,
      "-A",
      "trust",
      "-U",
      "postgres",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]);
    const port = await pickFreePort();
    // Durability is irrelevant for a throwaway cluster; speed is not.
    const serverOptions = [
      `-p ${port}`,
      `-k ${root}`,
      "-h 127.0.0.1",
      "-c fsync=off",
      "-c synchronous_commit=off",
      "-c full_page_writes=off",
      "-c max_connections=300",
      "-c timezone=UTC",
    ].join(" ");
    run(runAs, pgCtl, [
      "-D",
      dataDir,
      "-o",
      serverOptions,
      "-l",
      path.join(root, "log"),
      "-w",
      "start",
    ]);
    const ms = Math.round(performance.now() - started);
    console.log(`  test PostgreSQL (${binDir}) on 127.0.0.1:${port}, started in ${ms} ms`);
    project.provide("postgresAdminUrl", `postgres://postgres@127.0.0.1:${port}/postgres`);
  } catch (error) {
    const log = path.join(root, "log");
    const tail = fs.existsSync(log) ? `\n${fs.readFileSync(log, "utf8").slice(-2_000)}` : "";
    stopCluster();
    throw new Error(`could not start the test PostgreSQL: ${(error as Error).message}${tail}`);
  }
}

export async function teardown(): Promise<void> {
  stopCluster();
  process.removeListener("exit", stopCluster);
}
