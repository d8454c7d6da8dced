// Deciding whether bytes are text a model should read, and naming what they are when not.
import { createHash } from "node:crypto";
import { TextDecoder } from "node:util";

const magic: readonly (readonly [string, readonly number[]])[] = [
  ["PNG image", [0x89, 0x50, 0x4e, 0x47]],
  ["JPEG image", [0xff, 0xd8, 0xff]],
  ["GIF image", [0x47, 0x49, 0x46, 0x38]],
  ["PDF document", [0x25, 0x50, 0x44, 0x46]],
  ["ZIP archive", [0x50, 0x4b, 0x03, 0x04]],
  ["gzip archive", [0x1f, 0x8b]],
  ["ELF executable", [0x7f, 0x45, 0x4c, 0x46]],
  ["WebAssembly module", [0x00, 0x61, 0x73, 0x6d]],
  ["SQLite database", [0x53, 0x51, 0x4c, 0x69, 0x74, 0x65]],
];

/** How many leading bytes decide binary or text. */
export const sniffBytes = 8192;

/** True when the bytes hold a NUL or are not UTF-8 (a character cut at the end is fine). */
export function isBinary(sample: Uint8Array): boolean {
  if (sample.includes(0)) return true;
  try {
    // Streaming mode tolerates an incomplete sequence at the very end (the sample boundary may
    // cut a character) but not an invalid byte anywhere.
    new TextDecoder("utf-8", { fatal: true }).decode(sample, { stream: true });
    return false;
  } catch {
    return true;
  }
}

/** A short human description of binary bytes: "PNG image" or "binary data". */
export function describeBinary(sample: Uint8Array): string {
  for (const [name, bytes] of magic) {
    if (bytes.every((b, i) => sample[i] === b)) return name;
  }
  return "binary data";
}

export function hashText(text: string | Uint8Array): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Cuts a string to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function cutUtf8(text: string, maxBytes: number): { text: string; cut: boolean } {
  if (Buffer.byteLength(text) <= maxBytes) return { text, cut: false };
  const bytes = Buffer.from(text).subarray(0, maxBytes);
  // A lenient decode replaces a split trailing character; drop the replacement.
  return { text: bytes.toString("utf8").replace(/\uFFFD$/u, ""), cut: true };
}
