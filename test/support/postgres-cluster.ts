// A throwaway PostgreSQL cluster: initdb into a fresh temp dir, pg_ctl start on a free port of
// 127.0.0.1, removed afterwards. global-setup.ts starts the one shared by the whole run; a fault
// test that must crash or freeze its server starts a private one (~1.5 s):
//
//   const cluster = await startPostgresCluster({ crashSafe: true });  // throws without PostgreSQL
//   try { …; cluster.crash(); …; cluster.start(); … } finally { cluster.remove(); }
//
// We run as root in CI and sessions, and initdb/postgres refuse root, so the cluster runs as the
// `postgres` OS user through runuser (see ../shared/notes/postgres.md).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export type PostgresInstallation = { binDir: string; runAs: string | undefined };

export type PostgresCluster = {
  /** Superuser URL of the `postgres` database. */
  adminUrl: string;
  port: number;
  /** `pg_ctl stop -m immediate`: what a crash looks like to clients. */
  crash(): void;
  /** Starts it again on the same port, after `crash()`. */
  start(): void;
  /** SIGSTOP the postmaster and every backend: a hung server that accepts but never answers. */
  pause(): void;
  resume(): void;
  /** Stops it (if running) and removes its directory. Idempotent. */
  remove(): void;
};

/** Where PostgreSQL is and whom to run it as, or why it cannot run here. */
export function findPostgres(): PostgresInstallation | { unavailable: string } {
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
  const binDir = candidates.find((dir) =>
    ["initdb", "pg_ctl", "postgres"].every((f) => fs.existsSync(path.join(dir, f))),
  );
  if (!binDir) {
    return { unavailable: "no initdb/pg_ctl/postgres on PATH or under /usr/lib/postgresql/*/bin" };
  }
  if (process.getuid?.() !== 0) return { binDir, runAs: undefined };
  if (spawnSync("id", ["-u", "postgres"]).status !== 0) {
    return { unavailable: "running as root and there is no `postgres` OS user to run it as" };
  }
  return { binDir, runAs: "postgres" };
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

export async function pickFreePort(): Promise<number> {
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

function readPostmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(
      fs.readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0],
    );
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Creates and starts a cluster. Throws if PostgreSQL is unavailable or will not start. */
export async function startPostgresCluster(
  options: {
    installation?: PostgresInstallation | { unavailable: string };
    /**
     * Keep synchronous_commit on, so a committed transaction survives `crash()`. Off by default:
     * faster, and the shared cluster is never crashed. (fsync stays off: the OS keeps the files.)
     */
    crashSafe?: boolean;
  } = {},
): Promise<PostgresCluster> {
  const installation = options.installation ?? findPostgres();
  if ("unavailable" in installation) throw new Error(`no PostgreSQL: ${installation.unavailable}`);
  const { binDir, runAs } = installation;
  const root = fs.mkdtempSync(path.join(pickScratchBase(), "peergate-test-pg-"));
  const dataDir = path.join(root, "data");
  const log = path.join(root, "log");
  if (runAs) {
    const uid = Number(spawnSync("id", ["-u", runAs], { encoding: "utf8" }).stdout.trim());
    const gid = Number(spawnSync("id", ["-g", runAs], { encoding: "utf8" }).stdout.trim());
    fs.chownSync(root, uid, gid);
  }
  const pgCtl = path.join(binDir, "pg_ctl");
  let port = 0;
  let running = false;
  let removed = false;
  let paused: number[] = [];

  const signalAll = (signal: NodeJS.Signals): number[] => {
    const postmaster = readPostmasterPid(dataDir);
    if (!postmaster) return [];
    const children = spawnSync("ps", ["-o", "pid=", "--ppid", String(postmaster)], {
      encoding: "utf8",
    })
      .stdout.split("\n")
      .map((l) => Number(l.trim()))
      .filter((n) => n > 0);
    const pids = [postmaster, ...children];
    for (const pid of pids) {
      try {
        process.kill(pid, signal);
      } catch {
        // Already gone.
      }
    }
    return pids;
  };

  const cluster: PostgresCluster = {
    get adminUrl() {
      return `postgres://postgres@127.0.0.1:${port}/postgres`;
    },
    get port() {
      return port;
    },
    start() {
      // Durability is irrelevant for a throwaway cluster; speed is not.
      const serverOptions = [
        `-p ${port}`,
        `-k ${root}`,
        "-h 127.0.0.1",
        "-c fsync=off",
        `-c synchronous_commit=${options.crashSafe ? "on" : "off"}`,
        "-c full_page_writes=off",
        "-c max_connections=300",
        "-c timezone=UTC",
      ].join(" ");
      run(runAs, pgCtl, ["-D", dataDir, "-o", serverOptions, "-l", log, "-w", "start"]);
      running = true;
    },
    crash() {
      if (paused.length) cluster.resume();
      run(runAs, pgCtl, ["-D", dataDir, "-m", "immediate", "stop"]);
      running = false;
    },
    pause() {
      paused = signalAll("SIGSTOP");
    },
    resume() {
      for (const pid of paused) {
        try {
          process.kill(pid, "SIGCONT");
        } catch {
          // Already gone.
        }
      }
      paused = [];
    },
    remove() {
      if (removed) return;
      removed = true;
      process.removeListener("exit", cluster.remove);
      if (paused.length) cluster.resume();
      if (running) {
        const [file, argv] = runAs
          ? ["runuser", ["-u", runAs, "--", pgCtl, "-D", dataDir, "-m", "immediate", "stop"]]
          : [pgCtl, ["-D", dataDir, "-m", "immediate", "stop"]];
        spawnSync(file, argv, { stdio: "ignore", timeout: 30_000, cwd: os.tmpdir() });
        running = false;
      }
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
  // If the process ends before remove(), do not leave a server behind.
  process.once("exit", cluster.remove);

  try {
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
    port = await pickFreePort();
    cluster.start();
    return cluster;
  } catch (error) {
    const tail = fs.existsSync(log) ? `\n${fs.readFileSync(log, "utf8").slice(-2_000)}` : "";
    cluster.remove();
    throw new Error(`could not start a test PostgreSQL: ${(error as Error).message}${tail}`);
  }
}
