// Files and modes (DESIGN §9): the data directory and its secrets are owner-only even when they
// were not; the embedded database's files are owner-only after open and after close; and the
// `peergate` process runs with umask 077, so what it creates is owner-only from the start.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterEach, beforeEach, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { makeOwnerOnly, openConfiguredDatabase } from "../../src/db/open-configured.ts";
import { createLogger } from "../../src/log.ts";
import { ensureDataDir } from "../../src/secret-files.ts";
import { startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { mainScript } from "../support/serve-process.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "pg-modes-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const mode = (p: string) => fs.lstatSync(p).mode & 0o777;

/** Every entry under `root` (itself included) that group or others can use. */
function reachable(root: string): string[] {
  const found: string[] = [];
  const visit = (entry: string) => {
    const stat = fs.lstatSync(entry);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) found.push(`${entry} ${(stat.mode & 0o777).toString(8)}`);
    if (stat.isDirectory()) for (const name of fs.readdirSync(entry)) visit(path.join(entry, name));
  };
  visit(root);
  return found;
}

it("fixes a data directory and secret files that group or others can reach, and says so", async () => {
  const data = path.join(dir, "data");
  fs.mkdirSync(data, { mode: 0o755 });
  fs.chmodSync(data, 0o777);
  fs.writeFileSync(path.join(data, "admin-token"), "x\n");
  fs.chmodSync(path.join(data, "admin-token"), 0o644);
  const fixes = await ensureDataDir(data);
  expect(fixes).toEqual([
    { path: data, was: "0777", now: "0700" },
    { path: path.join(data, "admin-token"), was: "0644", now: "0600" },
  ]);
  expect(mode(data)).toBe(0o700);
  expect(mode(path.join(data, "admin-token"))).toBe(0o600);
  expect(await ensureDataDir(data)).toEqual([]);
  // A new one is created owner-only.
  const fresh = path.join(dir, "fresh", "data");
  expect(await ensureDataDir(fresh)).toEqual([]);
  expect(mode(fresh)).toBe(0o700);
});

it("refuses a data directory path that is not a directory", async () => {
  fs.writeFileSync(path.join(dir, "file"), "");
  await expect(ensureDataDir(path.join(dir, "file"))).rejects.toThrow(/not a directory/);
});

it("keeps the embedded database's files owner-only, after open and after close", async () => {
  const data = path.join(dir, "data");
  const database = await openConfiguredDatabase({ dataDir: data, databaseUrl: undefined });
  try {
    // PGlite unpacks its cluster with mode 0666; none of it may stay that way.
    expect(reachable(path.join(data, "pg"))).toEqual([]);
    // Files PGlite creates while it runs follow the umask (022 here); closing fixes them too.
    await database.db.execute(sql`create table t (x int)`);
  } finally {
    await database.close();
  }
  expect(reachable(path.join(data, "pg"))).toEqual([]);
});

it("makeOwnerOnly leaves owner bits and symbolic links alone", () => {
  const root = path.join(dir, "tree");
  fs.mkdirSync(path.join(root, "sub"), { recursive: true });
  fs.writeFileSync(path.join(root, "sub", "f"), "");
  fs.chmodSync(path.join(root, "sub", "f"), 0o764);
  fs.chmodSync(path.join(root, "sub"), 0o775);
  const outside = path.join(dir, "outside");
  fs.writeFileSync(outside, "");
  fs.chmodSync(outside, 0o644);
  fs.symlinkSync(outside, path.join(root, "link"));
  expect(makeOwnerOnly(root)).toBe(3);
  expect(mode(path.join(root, "sub", "f"))).toBe(0o700);
  expect(mode(path.join(root, "sub"))).toBe(0o700);
  expect(mode(outside)).toBe(0o644);
});

it("the server fixes a reachable data directory at start and logs it", async () => {
  const data = path.join(dir, "data");
  fs.mkdirSync(data);
  fs.chmodSync(data, 0o755);
  const lines: string[] = [];
  const env = {
    PEERGATE_DATA_DIR: data,
    PEERGATE_POLICIES_DIR: repoPoliciesDir,
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
  };
  const server = await startServer(
    loadConfig(env, dir),
    createLogger({ level: "warn", write: (line) => lines.push(line) }),
  );
  try {
    expect(mode(data)).toBe(0o700);
    const warned = lines.map((l) => JSON.parse(l)).find((l) => /owner-only/.test(l.msg));
    expect(warned).toMatchObject({ path: data, was: "0755", now: "0700" });
    // (The default workspace, which tools write to, is not the data directory's to judge.)
    for (const entry of ["pg", "admin-token", "secret-key", "control.sock"]) {
      expect(reachable(path.join(data, entry)), entry).toEqual([]);
    }
  } finally {
    await server.stop();
  }
  expect(reachable(path.join(data, "pg"))).toEqual([]);
});

it("the peergate command runs with umask 077: what it creates is owner-only", () => {
  const data = path.join(dir, "made-by-cli");
  const result = spawnSync(process.execPath, [mainScript, "migrate"], {
    env: { PATH: process.env.PATH ?? "", PEERGATE_DATA_DIR: data },
    encoding: "utf8",
    timeout: 120_000,
  });
  expect(result.status, result.stderr).toBe(0);
  // Created by a plain mkdir (no mode given): owner-only only because of the umask.
  expect(mode(data)).toBe(0o700);
  expect(reachable(data)).toEqual([]);
});
