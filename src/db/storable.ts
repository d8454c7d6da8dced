// Text PostgreSQL stores exactly as given: no NUL (text and jsonb refuse U+0000) and no lone
// UTF-16 surrogate (the driver would store U+FFFD instead). Much of what peergate stores is
// someone else's text — an A2A message, a webhook payload, a model's tool call, a tool's output,
// a name a client sent — so it passes through here on the way in, and a NUL becomes U+FFFD
// rather than failing the write (which answered 500, or stopped a run "inside peergate" with its
// step unrecorded).

export function storableText(text: string): string {
  return text.toWellFormed().replaceAll("\u0000", "\uFFFD");
}

/** `value`, a plain JSON value, with every string and key made storable. */
export function storableJson(value: unknown): unknown {
  if (typeof value === "string") return storableText(value);
  if (Array.isArray(value)) return value.map(storableJson);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [storableText(k), storableJson(v)]),
    );
  }
  return value;
}

/** Any value as jsonb will hold it (after JSON serialisation), made storable. */
export function toStorableJson<T>(value: T): T {
  if (value === undefined || value === null) return value;
  return storableJson(JSON.parse(JSON.stringify(value))) as T;
}

/**
 * A JSON value serialised once as jsonb will hold it: what `toStorableJson` gives, as its text. A
 * prebuilt statement (src/db/prebuilt.ts) sends the text as it is, where a value would be
 * serialised again by its column's encoder.
 */
export class StoredJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/**
 * `value` as `toStorableJson` stores it, serialised once. JSON.stringify writes a NUL and a lone
 * surrogate as a `\u` escape, so text without one is storable as it is; only text with one takes
 * the walk (null and undefined stay themselves: SQL NULL, or the column left out).
 */
export function storedJson(value: unknown): StoredJson | null | undefined {
  if (value === undefined || value === null) return value;
  const text = JSON.stringify(value);
  if (text === undefined) return undefined;
  return new StoredJson(
    text.includes("\\u") ? JSON.stringify(storableJson(JSON.parse(text))) : text,
  );
}
