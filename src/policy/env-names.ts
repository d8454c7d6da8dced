// Which environment variable names an operator may pass to a process by listing them in
// `envAllowlist`. Pure, so the policy schema refuses a bad name at load with the file and field.
// Never SSH_* (an agent socket is a key the process could use), never peergate's own settings,
// DATABASE_URL or the model providers' key variables: those are the server's authority.

const forbiddenExact = new Set([
  "DATABASE_URL",
  "OPENAI_API_KEY",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "AZURE_API_KEY",
  "GOOGLE_GENERATIVE_AI_API_KEY",
]);

const namePattern = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Why `name` cannot be allowlisted, or undefined when it can. */
export function refuseEnvName(name: string): string | undefined {
  if (!namePattern.test(name)) return "not a variable name (letters, digits and _)";
  const upper = name.toUpperCase();
  if (upper.startsWith("SSH_")) return "SSH_* variables are never passed to a process";
  if (upper.startsWith("PEERGATE_")) return "peergate's own settings are never passed";
  if (forbiddenExact.has(upper)) return `${upper} is one of peergate's own credentials`;
  return undefined;
}
