// Secrets the server keeps in its data directory when the environment does not provide them:
// the admin token (so the CLI on this machine can read it) and the key that seals GitHub webhook
// secrets. Files are created with mode 0600 in a 0700 directory, written atomically with O_EXCL
// so two starts cannot both create one, and never overwritten except by a rotation that read
// the value it replaces (replaceSecretFile).
//
// A data directory that group or others can reach (made by hand, by an older version, or by a
// restore that kept modes) is fixed to 0700 rather than refused: peergate owns it, nothing it
// holds is meant for another user, and refusing would stop a working install at its next start
// over a fix it can make itself. The caller logs the fix, since the secrets may have been read.
import { chmod, lstat, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { ConfigError } from "./errors.ts";

export const adminTokenFile = "admin-token";
export const secretKeyFile = "secret-key";

/** What ensureDataDir had to fix: the modes it found (octal text), by path. */
export type DataDirFixes = { path: string; was: string; now: string }[];

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, "0");

/**
 * Creates the data directory (0700) or makes an existing one owner-only, and the secret files in
 * it (0600). Returns what it changed, for the caller to log; refuses a path that is not a
 * directory, or one this user does not own (it could not make that private).
 */
export async function ensureDataDir(dataDir: string): Promise<DataDirFixes> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
    // A file where the directory should be: refused below, with its name.
    if (error.code !== "EEXIST") throw error;
  });
  const fixes: DataDirFixes = [];
  const dir = await lstat(dataDir);
  if (!dir.isDirectory()) {
    throw new ConfigError([
      { field: "PEERGATE_DATA_DIR", message: `PEERGATE_DATA_DIR=${dataDir}: not a directory` },
    ]);
  }
  const uid = process.getuid?.();
  if (uid !== undefined && dir.uid !== uid) {
    throw new ConfigError([
      {
        field: "PEERGATE_DATA_DIR",
        message: `PEERGATE_DATA_DIR=${dataDir} belongs to another user (uid ${dir.uid}); peergate keeps its secrets there and must own it`,
      },
    ]);
  }
  if ((dir.mode & 0o077) !== 0) {
    await chmod(dataDir, 0o700);
    fixes.push({ path: dataDir, was: octal(dir.mode), now: "0700" });
  }
  for (const name of [adminTokenFile, secretKeyFile]) {
    const file = path.join(dataDir, name);
    const stat = await lstat(file).catch(() => undefined);
    if (stat?.isFile() && (stat.mode & 0o077) !== 0) {
      await chmod(file, 0o600);
      fixes.push({ path: file, was: octal(stat.mode), now: "0600" });
    }
  }
  return fixes;
}

export async function readSecretFile(dataDir: string, name: string): Promise<string | undefined> {
  try {
    return (await readFile(path.join(dataDir, name), "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Writes `value` to a new file; if the file already exists, returns what it holds instead. */
export async function createSecretFile(
  dataDir: string,
  name: string,
  value: string,
): Promise<string> {
  const file = path.join(dataDir, name);
  try {
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: "wx" });
    return value;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return (await readFile(file, "utf8")).trim();
  }
}

/**
 * Replaces the value in `name` with `value`, only while it still holds `expected` (a rotation
 * updates the file it read the old token from, never one that another instance put a different
 * token in). Written to a temporary file and renamed, so a reader sees the old value or the new,
 * never half of one. Returns whether the file was replaced.
 */
export async function replaceSecretFile(
  dataDir: string,
  name: string,
  expected: string,
  value: string,
): Promise<boolean> {
  if ((await readSecretFile(dataDir, name)) !== expected) return false;
  const file = path.join(dataDir, name);
  const temporary = `${file}.${process.pid}.new`;
  await writeFile(temporary, `${value}\n`, { mode: 0o600, flag: "w" });
  await rename(temporary, file);
  return true;
}
