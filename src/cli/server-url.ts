// Where the CLI finds a running server it was not told about: `peergate serve` writes the URL it
// listens on to `<data dir>/server-url` (owner-only) and removes it at stop, so `peergate callers
// …` in another terminal reaches a server started on another port without PEERGATE_URL. An
// explicit PEERGATE_URL or PEERGATE_PORT wins over the file.
import { readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";

export const serverUrlFile = "server-url";

/** The URL a local client should use: a wildcard listener is reached on loopback. */
export function localUrl(listening: string): string {
  const url = new URL(listening);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  if (url.hostname === "[::]") url.hostname = "[::1]";
  return url.origin;
}

/** Records where this server listens; the returned function removes the record if still ours. */
export async function recordServerUrl(
  dataDir: string,
  listening: string,
): Promise<() => Promise<void>> {
  const file = path.join(dataDir, serverUrlFile);
  const url = localUrl(listening);
  await writeFile(file, `${url}\n`, { mode: 0o600 });
  return async () => {
    // Another instance on the same data directory may have written its own URL since.
    if ((await readServerUrl(dataDir)) === url) await rm(file, { force: true });
  };
}

export async function readServerUrl(dataDir: string): Promise<string | undefined> {
  try {
    const text = (await readFile(path.join(dataDir, serverUrlFile), "utf8")).trim();
    return /^https?:\/\/[^\s/]+$/.test(text) ? text : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}
