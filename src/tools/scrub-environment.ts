// The environment a process runs with is an allowlist, never "the parent minus what looks
// secret": a minimal base (PATH, LANG, LANGUAGE, LC_*, TERM, TZ; HOME is the sandbox's, set by
// the backend) plus the names the operator listed, agent-wide or per tool, that exist in the
// parent. A listed name that is refused by src/policy/env-names.ts is dropped here too (the
// policy schema already refuses it at load; this keeps the rule for callers that skip it).
// `isSecretName` remains to find values worth redacting: a secret-looking variable that was not
// passed is still a secret peergate holds.
import { refuseEnvName } from "../policy/env-names.ts";

const baseNames = new Set(["PATH", "LANG", "LANGUAGE", "TERM", "TZ"]);

function isBaseName(name: string): boolean {
  return baseNames.has(name) || name.startsWith("LC_");
}

const secretWords = new Set([
  "SECRET",
  "SECRETS",
  "TOKEN",
  "TOKENS",
  "PASSWORD",
  "PASSWORDS",
  "PASSWD",
  "PASSPHRASE",
  "CREDENTIAL",
  "CREDENTIALS",
  "APIKEY",
  "AUTH",
  "PASS",
  "COOKIE",
  "COOKIES",
]);

/** Words of an environment variable name, upper-cased: `githubToken` → GITHUB, TOKEN. */
function splitName(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toUpperCase()
    .split(/[_\-.]+/)
    .filter((word) => word !== "");
}

/** True when the name looks like it holds a secret (used to collect values to redact). */
export function isSecretName(name: string): boolean {
  const upper = name.toUpperCase();
  if (upper.startsWith("SSH_") || upper.startsWith("PEERGATE_") || upper === "DATABASE_URL") {
    return true;
  }
  const words = splitName(name);
  return words.some(
    (word, index) => secretWords.has(word) || (index > 0 && (word === "KEY" || word === "KEYS")),
  );
}

/**
 * The base variables of `parent` plus the `allowlist` names that exist in it and may be passed.
 * Everything else, whatever its name, stays out.
 */
export function scrubEnvironment(
  parent: Readonly<Record<string, string | undefined>>,
  allowlist: readonly string[] = [],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && isBaseName(name)) env[name] = value;
  }
  for (const name of allowlist) {
    const value = parent[name];
    if (value !== undefined && refuseEnvName(name) === undefined) env[name] = value;
  }
  return env;
}
