// Command keys read by the one bash reader: the pure rules (command-key.ts) with the
// reader bound in, for the approval path, the CLI's `ceiling --command` and the bench.
//
// One parse costs tens of microseconds; models repeat their commands, so keys of short scripts
// are kept in a small bounded map (least recently used out first). A key depends on the text
// alone, so a cached answer is the answer.
import { type CommandKeyResult, keyOfArgv, keyOfScript } from "./command-key.ts";
import { scanShell } from "./scan.ts";

const maxCachedEntries = 4096;
const maxCachedChars = 1024;
const cache = new Map<string, CommandKeyResult>();

/** The allowlist key of shell text, or no key with the reason. */
export function commandKey(script: string): CommandKeyResult {
  if (script.length > maxCachedChars) return keyOfScript(script, scanShell);
  const hit = cache.get(script);
  if (hit !== undefined) {
    cache.delete(script);
    cache.set(script, hit);
    return hit;
  }
  const result = keyOfScript(script, scanShell);
  if (cache.size >= maxCachedEntries) {
    const oldest = cache.keys().next();
    if (oldest.done !== true) cache.delete(oldest.value);
  }
  cache.set(script, result);
  return result;
}

/** The same, always parsing (for the bench and tests). */
export function commandKeyUncached(script: string): CommandKeyResult {
  return keyOfScript(script, scanShell);
}

/** The allowlist key of an argv (`[program, ...args]`), or no key with the reason. */
export function argvKey(argv: readonly string[]): CommandKeyResult {
  return keyOfArgv(argv, scanShell);
}
