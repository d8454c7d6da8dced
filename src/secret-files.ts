// Secrets the server keeps in its data directory when the environment does not provide them:
// the admin token (so the CLI on this machine can read it) and the key that seals GitHub webhook
// secrets. Files are created with mode 0600 in a 0700 directory, written atomically with O_EXCL
// so two starts cannot both create one, and never overwritten.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";

export const adminTokenFile = "admin-token";
export const secretKeyFile = "secret-key";

export async function ensureDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
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
