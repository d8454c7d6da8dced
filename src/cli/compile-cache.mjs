// Node's compile cache for every `peergate` command, in `<temp dir>/peergate-compile-cache-<uid>`:
// the TypeScript sources and the libraries are read from it instead of being type-stripped and
// compiled again on each run. Plain JavaScript, so that loading it costs no type stripping: the
// executable (bin/peergate.mjs) switches the cache on before src/main.ts is itself compiled.
//
// What is cached there is code this process runs, so the directory is used only while it is this
// user's own, owner-only and not a link, in a temp directory others cannot swap it out of (not
// writable by others, or sticky like /tmp). Otherwise the command runs uncached, only slower.
// NODE_DISABLE_COMPILE_CACHE turns it off; NODE_COMPILE_CACHE (Node's own) puts it elsewhere.
import { lstatSync, mkdirSync } from "node:fs";
import { constants, enableCompileCache } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * Switches the compile cache on for every module loaded from now on, when it is safe to.
 * @param {Readonly<Record<string, string | undefined>>} env the process's environment
 * @returns {boolean} whether the cache is on
 */
export function useCompileCache(env) {
  if (env.NODE_DISABLE_COMPILE_CACHE || env.NODE_COMPILE_CACHE) return false;
  const uid = process.getuid?.();
  if (uid === undefined) return false;
  try {
    const parent = tmpdir();
    const dir = path.join(parent, `peergate-compile-cache-${uid}`);
    mkdirSync(dir, { mode: 0o700, recursive: true });
    const above = lstatSync(parent);
    const own = lstatSync(dir);
    const othersMayWrite = (above.mode & 0o022) !== 0 && (above.mode & 0o1000) === 0;
    const ownedSafely =
      own.isDirectory() && own.uid === uid && (own.mode & 0o077) === 0 && !othersMayWrite;
    if (!ownedSafely) return false;
    return enableCompileCache(dir).status !== constants.compileCacheStatus.FAILED;
  } catch {
    return false;
  }
}
