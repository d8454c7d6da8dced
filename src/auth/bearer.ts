// Reading a bearer credential from an Authorization header. The scheme is case-insensitive
// (RFC 7235 §2.1); everything else is strict: one scheme, one space, one token of the token68
// alphabet. A doubled header arrives joined with ", " and so fails as malformed.

export type BearerResult =
  | { ok: true; token: string }
  | { ok: false; reason: "missing" | "empty" | "not-bearer" | "malformed" };

const token68 = /^[A-Za-z0-9\-._~+/]+=*$/;

export function readBearer(header: string | null | undefined): BearerResult {
  if (header === null || header === undefined) return { ok: false, reason: "missing" };
  if (header.trim() === "") return { ok: false, reason: "empty" };
  const space = header.indexOf(" ");
  if (space < 0) return { ok: false, reason: "malformed" };
  const scheme = header.slice(0, space);
  const token = header.slice(space + 1);
  if (scheme.toLowerCase() !== "bearer") return { ok: false, reason: "not-bearer" };
  if (token.length === 0 || token.length > 8192 || !token68.test(token)) {
    return { ok: false, reason: "malformed" };
  }
  return { ok: true, token };
}
