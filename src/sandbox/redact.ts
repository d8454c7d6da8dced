// Redaction by value: every occurrence of a secret peergate holds is replaced in tool output
// before the model (and so a caller) sees it, whatever name it came under and whatever printed
// it. Values shorter than `minLength` are ignored: redacting "1" or "true" would garble ordinary
// output and protect nothing. Output cut at a cap may end in the first part of a secret; that
// tail is redacted too.

export const redactedMarker = "[redacted]";

export type Redactor = {
  /** Text with every known secret replaced; `cut` when the text was truncated at its end. */
  redact(text: string, options?: { cut?: boolean }): string;
  /** Number of distinct secrets it knows (for logs; never the secrets). */
  readonly size: number;
};

const minLength = 8;
const minTailLength = 4;

export function createRedactor(secrets: readonly (string | undefined)[]): Redactor {
  const known = [
    ...new Set(secrets.filter((s): s is string => s !== undefined && s.length >= minLength)),
  ].sort((a, b) => b.length - a.length);
  return {
    size: known.length,
    redact(text, options = {}) {
      if (known.length === 0) return text;
      let out = text;
      for (const secret of known) {
        if (out.includes(secret)) out = out.split(secret).join(redactedMarker);
      }
      if (options.cut) {
        for (const secret of known) {
          for (let n = Math.min(secret.length - 1, out.length); n >= minTailLength; n--) {
            if (out.endsWith(secret.slice(0, n))) {
              out = `${out.slice(0, out.length - n)}${redactedMarker}`;
              break;
            }
          }
        }
      }
      return out;
    },
  };
}

/** The password (and user info) of a database URL, if it has one. */
export function databaseUrlSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  try {
    const parsed = new URL(url);
    const password = decodeURIComponent(parsed.password);
    return password === "" ? [] : [password, parsed.password];
  } catch {
    return [];
  }
}
