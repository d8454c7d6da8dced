// `peergate serve` refuses to open PostgreSQL through a postgres.js without the project's mends
// (src/db/postgres-driver.patch), as after `npm ci --ignore-scripts`; PEERGATE_ALLOW_UNMENDED_DRIVER=1
// opens it anyway and says so in the log.
//
// The seam: a throwaway copy of the project whose node_modules links every installed package
// except postgres, which is a copy with the mends undone. The real server runs from that copy
// (Node resolves `postgres` next to the code that imports it), so nothing in the server is
// replaced and the shared node_modules is never touched.
import { spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { copyUnmendedDriver, installedDriver } from "../support/unmended-driver.ts";

const repo = path.resolve(import.meta.dirname, "../..");
const skip = postgresSkipReason();

let dir: string;
let main: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "peergate-unmended-"));
  const project = path.join(dir, "project");
  for (const part of ["src", "drizzle", "package.json"]) {
    await cp(path.join(repo, part), path.join(project, part), { recursive: true });
  }
  await cp(repoPoliciesDir, path.join(dir, "policies"), { recursive: true });
  const modules = path.join(project, "node_modules");
  await mkdir(modules);
  const installed = path.dirname(installedDriver);
  for (const name of await readdir(installed)) {
    if (name === "postgres") continue;
    await symlink(path.join(installed, name), path.join(modules, name));
  }
  await copyUnmendedDriver(path.join(modules, "postgres"));
  main = path.join(project, "src/main.ts");
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Ended = { code: number | string; stdout: string; stderr: string };

/** Runs `peergate serve` from the copy until it exits, or until `until(stdout)` holds (then stops it). */
function serve(env: Record<string, string>, until?: (stdout: string) => boolean): Promise<Ended> {
  const child = spawn(process.execPath, [main, "serve"], {
    env: {
      PATH: process.env.PATH ?? "",
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_WORKSPACE: path.join(dir, "workspace"),
      PEERGATE_POLICIES_DIR: path.join(dir, "policies"),
      PEERGATE_PORT: "0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let stopping = false;
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    // Once: a second signal tells the server not to wait for a graceful stop.
    if (!stopping && until?.(stdout)) {
      stopping = true;
      child.kill("SIGTERM");
    }
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) =>
    child.once("exit", (code, signal) =>
      resolve({ code: code ?? signal ?? "unknown", stdout, stderr }),
    ),
  );
}

describe("peergate serve on a postgres driver without the mends", () => {
  it("refuses to start when DATABASE_URL names PostgreSQL, before connecting, naming each missing mend", async () => {
    // Nothing listens on port 9 of loopback: had the server tried to connect, it would say so.
    const ended = await serve({ DATABASE_URL: "postgres://peergate@127.0.0.1:9/peergate" });
    expect(ended.code).toBe(1);
    expect(ended.stderr).toContain("peergate cannot start: the postgres driver is not mended");
    expect(ended.stderr).toContain("src/query.js: mend 3c");
    expect(ended.stderr).toContain("PEERGATE_ALLOW_UNMENDED_DRIVER=1");
    expect(ended.stdout).not.toContain('"listening"');
  }, 60_000);

  it.skipIf(skip !== undefined)(
    `starts with PEERGATE_ALLOW_UNMENDED_DRIVER=1, and logs a warning${skip ? ` — skipped: ${skip}` : ""}`,
    async () => {
      const db = await createPostgresTestDatabase();
      try {
        const ended = await serve(
          { DATABASE_URL: db.url, PEERGATE_ALLOW_UNMENDED_DRIVER: "1" },
          (stdout) => stdout.includes('"msg":"listening"'),
        );
        expect(ended.stdout).toContain('"msg":"listening"');
        const warning = ended.stdout
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { level?: string; msg?: string; override?: string })
          .find((record) => record.msg?.includes("without the project's mends"));
        expect(warning).toMatchObject({
          level: "warn",
          override: "PEERGATE_ALLOW_UNMENDED_DRIVER=1",
        });
        expect(ended.code).toBe(0);
      } finally {
        await db.drop();
      }
    },
    120_000,
  );
});
