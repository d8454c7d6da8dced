// Untrusted strings (allow entries, names a model sent, values from a policy file) end up in
// terminals, logs and model-facing messages. Quoting them as JSON with every character outside
// printable ASCII escaped keeps zero-width, right-to-left and control characters visible instead
// of letting them rearrange or hide what an operator reads.

/** JSON text for any value; never throws (YAML aliases can make a value contain itself). */
function stringifyValue(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return "(a value that contains itself)";
  }
}

/** JSON-quotes a value, escapes everything outside printable ASCII, and cuts it at `maxLength`. */
export function quoteUntrusted(value: unknown, maxLength = 128): string {
  const raw = typeof value === "string" ? value : stringifyValue(value);
  const cut = raw.length > maxLength ? `${raw.slice(0, maxLength)}…` : raw;
  const quoted = typeof value === "string" || raw.length > maxLength ? JSON.stringify(cut) : cut;
  return quoted.replace(/[^\x20-\x7e]/gu, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}
