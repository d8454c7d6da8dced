// Redaction by value: every occurrence of a secret peergate holds is replaced in tool output
// before the model (and so a caller) sees it, whatever name it came under and whatever printed
// it. Values shorter than `minLength` are ignored: redacting "1" or "true" would garble ordinary
// output and protect nothing. Output cut at a cap may end in the first part of a secret; that
// tail is redacted too.
//
// The server's redactor also replaces anything shaped like a credential peergate generates (kind
// prefix `pg_`, `pgw_`, `pgh_`, `pgo_` … and 43 base64url characters, src/auth/secrets.ts),
// whether or not this process holds its value: an operator token created by another instance, a
// webhook secret issued after start, a peer's token, all stored only as hashes or sealed. A
// random 43-character base64url string holds an upper-case letter but for odds of about 1e-10,
// and lower-case identifiers such as `pg_stat_statements_…` never do, so only that shape counts.

export const redactedMarker = "[redacted]";

export type Redactor = {
  /** Text with every known secret replaced; `cut` when the text was truncated at its end. */
  redact(text: string, options?: { cut?: boolean }): string;
  /** Number of distinct secrets it knows (for logs; never the secrets). */
  readonly size: number;
};

const minLength = 8;
const minTailLength = 4;

/** A credential peergate generated: its kind prefix, then 43 base64url characters. */
const credentialShape = /pg[a-z]?_[A-Za-z0-9_-]{43}/g;
/** The first part of one, where output was cut. */
const credentialTail = /pg[a-z]?_[A-Za-z0-9_-]{4,42}$/;
const hasUpper = /[A-Z]/;

function redactCredentialShapes(text: string, cut: boolean): string {
  let out = text.includes("_")
    ? text.replace(credentialShape, (found) =>
        hasUpper.test(found.slice(found.indexOf("_"))) ? redactedMarker : found,
      )
    : text;
  if (cut) {
    const tail = credentialTail.exec(out);
    if (tail) out = `${out.slice(0, tail.index)}${redactedMarker}`;
  }
  return out;
}

export function createRedactor(
  secrets: readonly (string | undefined)[],
  options: {
    /** Also replace everything shaped like a credential peergate generates (the server's). */
    readonly credentialShapes?: boolean;
  } = {},
): Redactor {
  const shapes = options.credentialShapes === true;
  const byValue = createValueRedactor(secrets);
  if (!shapes) return byValue;
  return {
    // The shape counts as one more secret: a redactor with it is never empty.
    size: byValue.size + 1,
    redact(text, redactOptions = {}) {
      return redactCredentialShapes(
        byValue.redact(text, redactOptions),
        redactOptions.cut === true,
      );
    },
  };
}

function createValueRedactor(secrets: readonly (string | undefined)[]): Redactor {
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
