// PGlite is single-process: two processes opening one data directory corrupt it. A lock file
// beside the directory (`<dir>.lock`, holding the owner's pid) makes the second one fail with a
// clear message instead. A lock left by a process that is no longer running is taken over.
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { UnavailableError } from "../errors.ts";

export type DataDirLock = { path: string; release(): void };

type LockContent = { pid: number; token: string; createdAt: string };

/** Lock files this process holds, so a reused pid of ours is never mistaken for a stale lock. */
const heldByThisProcess = new Set<string>();

function readLock(lockPath: string): { raw: string; content: LockContent | undefined } | undefined {
  let raw: string;
  try {
    raw = fs.readFileSync(lockPath, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const parsed = JSON.parse(raw) as Partial<LockContent>;
    if (typeof parsed.pid === "number" && Number.isInteger(parsed.pid)) {
      return { raw, content: parsed as LockContent };
    }
  } catch {
    // A torn or foreign file: treated as stale below.
  }
  return { raw, content: undefined };
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else — alive.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function describeHolder(lockPath: string, dataDir: string, pid: number | undefined): string {
  const who =
    pid === undefined ? "another peergate process" : `another peergate process (pid ${pid})`;
  return (
    `the embedded database in ${dataDir} is in use by ${who}. ` +
    "PGlite serves one process at a time: stop that process, or set DATABASE_URL to share a " +
    `PostgreSQL server. If no such process exists, remove ${lockPath}.`
  );
}

/**
 * Takes the lock for `dataDir` or throws UnavailableError naming the process that holds it.
 * Release it after the database is closed.
 */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  const lockPath = `${dataDir.replace(/[/\\]+$/, "")}.lock`;
  const mine: LockContent = {
    pid: process.pid,
    token: randomUUID(),
    createdAt: new Date().toISOString(),
  };
  const mineRaw = JSON.stringify(mine);

  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      fs.writeFileSync(lockPath, mineRaw, { flag: "wx", mode: 0o600 });
      heldByThisProcess.add(lockPath);
      let released = false;
      return {
        path: lockPath,
        release() {
          if (released) return;
          released = true;
          heldByThisProcess.delete(lockPath);
          // Only remove it if it is still ours.
          if (readLock(lockPath)?.raw === mineRaw) fs.rmSync(lockPath, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }

    const existing = readLock(lockPath);
    if (!existing) continue; // Released between our two calls: try again.
    const holder = existing.content?.pid;
    if (holder !== undefined) {
      const ours = holder === process.pid;
      if (ours && heldByThisProcess.has(lockPath)) {
        throw new UnavailableError(
          `the embedded database in ${dataDir} is already open in this process; close it first`,
        );
      }
      if (!ours && isProcessAlive(holder)) {
        throw new UnavailableError(describeHolder(lockPath, dataDir, holder));
      }
    }

    // Stale. Move it aside atomically, then check that what we moved is what we judged stale:
    // if another process took over in between, we moved its fresh lock and must put it back.
    const aside = `${lockPath}.stale-${process.pid}-${mine.token}`;
    try {
      fs.renameSync(lockPath, aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    const moved = fs.readFileSync(aside, "utf8");
    if (moved !== existing.raw) {
      try {
        fs.linkSync(aside, lockPath);
      } catch {
        // Someone else holds a newer lock already; theirs stands.
      }
      fs.rmSync(aside, { force: true });
      throw new UnavailableError(
        describeHolder(lockPath, dataDir, readLock(lockPath)?.content?.pid),
      );
    }
    fs.rmSync(aside, { force: true });
  }
  throw new UnavailableError(`could not take the lock ${lockPath}: it keeps changing`);
}
