import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { eq, sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { appendAuditEvent, verifyAuditChain } from "../../src/db/audit.ts";
import { openDatabase } from "../../src/db/client.ts";
import { acquireDataDirLock } from "../../src/db/data-dir-lock.ts";
import { migrateDatabase, migrationStatus } from "../../src/db/migrate.ts";
import type { PgliteThread } from "../../src/db/pglite-thread.ts";
import { callers } from "../../src/db/schema.ts";
import { UnavailableError } from "../../src/errors.ts";
import { asUnavailableError } from "../../src/services/db-errors.ts";

let root: string;
let dataDir: string;
let lockPath: string;

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "peergate-pglite-"));
  dataDir = path.join(root, "nested", "pg");
  lockPath = `${dataDir}.lock`;
});

afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Tries openDatabase on `dir` in a separate Node process; exit 3 and the error if refused. */
function openFromAnotherProcess(dir: string) {
  const client = pathToFileURL(path.resolve(import.meta.dirname, "../../src/db/client.ts")).href;
  const script = `
    const { openDatabase } = await import(${JSON.stringify(client)});
    try {
      const db = await openDatabase({ kind: "pglite", dataDir: ${JSON.stringify(dir)} });
      await db.close();
    } catch (error) {
      console.log(error.code, error.message);
      process.exit(3);
    }`;
  return spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 20_000,
  });
}

/** The pid of a process that has exited (and so cannot hold a lock). */
function deadPid(): number {
  const child = spawnSync("true");
  return child.pid ?? 999_999;
}

describe("PGlite data directory", () => {
  it("creates the directory, and keeps data across close and reopen", async () => {
    const first = await openDatabase({ kind: "pglite", dataDir });
    expect(fs.existsSync(dataDir)).toBe(true);
    expect(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid).toBe(process.pid);
    // A second open while the first is live is refused, and the first keeps working.
    const again = openDatabase({ kind: "pglite", dataDir });
    await expect(again).rejects.toBeInstanceOf(UnavailableError);
    await expect(again).rejects.toThrow(/already open in this process/);
    // …and so is one from another process, naming this one.
    const other = openFromAnotherProcess(dataDir);
    expect(other.status).toBe(3);
    expect(other.stdout).toContain("unavailable");
    expect(other.stdout).toContain(`pid ${process.pid}`);
    await migrateDatabase(first);
    await first.db.insert(callers).values({ name: "persisted", kind: "peer", tier: "public" });
    await appendAuditEvent(first.db, { actor: "admin", kind: "caller.created", data: {} });
    await first.close();
    expect(fs.existsSync(lockPath)).toBe(false);

    const second = await openDatabase({ kind: "pglite", dataDir });
    try {
      expect((await migrationStatus(second)).pending).toEqual([]);
      const [row] = await second.db.select().from(callers).where(eq(callers.name, "persisted"));
      expect(row?.tier).toBe("public");
      expect(await verifyAuditChain(second.db)).toMatchObject({ ok: true, count: 1 });
    } finally {
      await second.close();
    }
  });

  it("fails closed when its worker thread dies, and still gives the directory back on close", async () => {
    const database = await openDatabase({ kind: "pglite", dataDir });
    const thread = (database.db as unknown as { $client: PgliteThread }).$client;
    const pending = database.db.execute(sql`select pg_sleep(60)`);
    await thread.terminate();
    await expect(pending).rejects.toSatisfy((error) => asUnavailableError(error) !== undefined);
    await expect(database.ping()).rejects.toBeInstanceOf(UnavailableError);
    await database.close();
    expect(fs.existsSync(lockPath)).toBe(false);
    // The cluster is intact for the next open.
    const again = await openDatabase({ kind: "pglite", dataDir });
    await again.ping();
    await again.close();
  });

  it("refuses a directory locked by another live process, naming its pid", async () => {
    const holder = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      fs.mkdirSync(path.dirname(dataDir), { recursive: true });
      fs.writeFileSync(lockPath, JSON.stringify({ pid: holder.pid, token: "x", createdAt: "" }));
      const opening = openDatabase({ kind: "pglite", dataDir });
      await expect(opening).rejects.toBeInstanceOf(UnavailableError);
      await expect(opening).rejects.toThrow(new RegExp(`pid ${holder.pid}`));
      // The other process's lock is left alone.
      expect(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid).toBe(holder.pid);
    } finally {
      holder.kill("SIGKILL");
    }
  });
});

// The lock itself, without paying for a PGlite start each time.
describe("data directory lock", () => {
  beforeEach(() => fs.mkdirSync(path.dirname(dataDir), { recursive: true }));

  it("takes over a stale lock left by a process that is gone, and cleans up after itself", () => {
    fs.writeFileSync(lockPath, JSON.stringify({ pid: deadPid(), token: "old", createdAt: "" }));
    const lock = acquireDataDirLock(dataDir);
    expect(JSON.parse(fs.readFileSync(lockPath, "utf8")).pid).toBe(process.pid);
    lock.release();
    lock.release();
    expect(fs.readdirSync(path.dirname(dataDir))).toEqual([]);
  });

  it("takes over a lock file it cannot parse (a torn write)", () => {
    fs.writeFileSync(lockPath, "{");
    acquireDataDirLock(dataDir).release();
  });

  it("is refused twice in one process until released", () => {
    const lock = acquireDataDirLock(dataDir);
    expect(() => acquireDataDirLock(dataDir)).toThrow(/already open in this process/);
    lock.release();
    acquireDataDirLock(dataDir).release();
  });

  it("does not remove a lock that another process has taken since", () => {
    const lock = acquireDataDirLock(dataDir);
    fs.writeFileSync(lockPath, JSON.stringify({ pid: 1, token: "theirs", createdAt: "" }));
    lock.release();
    expect(JSON.parse(fs.readFileSync(lockPath, "utf8")).token).toBe("theirs");
  });
});
