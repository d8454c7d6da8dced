// The environment a command runs with: the parent's, minus anything that looks like a secret, so
// a command that prints its environment cannot hand the operator's keys to a caller. A name is
// withheld when one of its words (split on _ - . and camelCase) is a secret word, or KEY/KEYS
// follows another word (API_KEY, OPENAI_KEY; not KEYBOARD, not KEY_FILE); every PEERGATE_*
// variable and DATABASE_URL are withheld; and SSH_* (agent sockets) is withheld always. An
// allowlist can un-hide a name that exists in the parent environment, except SSH_*.

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

/** True when the variable must not reach a command (before any allowlist). */
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
 * The parent environment without secret-looking variables. `allowlist` names (exact spelling)
 * are kept if they exist in `parent`, except SSH_* which nothing un-hides.
 */
export function scrubEnvironment(
  parent: Readonly<Record<string, string | undefined>>,
  allowlist: readonly string[] = [],
): Record<string, string> {
  const allowed = new Set(allowlist);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue;
    if (name.toUpperCase().startsWith("SSH_")) continue;
    if (isSecretName(name) && !allowed.has(name)) continue;
    env[name] = value;
  }
  return env;
}
