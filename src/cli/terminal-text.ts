// Untrusted text (a model's arguments and answers, caller names, audit data, the server's error
// messages) must never reach a terminal raw: an ESC or CSI sequence can move the cursor, redraw a
// parked call's arguments before the operator approves them, set the window title (OSC) or hide
// text; bidi overrides and zero-width characters reorder or hide what is shown. Every CLI printer
// passes what it prints through one of these two functions.
//
// Escapes are visible and unambiguous enough to read: `\x1b`, `\x9b`, `\u{202e}`. Printable
// non-ASCII (accents, CJK, emoji) is kept, unlike quoteUntrusted, so a model's answer in any
// language stays readable.

/** Ranges of code points never printed raw, inclusive. */
const unsafeRanges: readonly (readonly [number, number])[] = [
  [0x00, 0x1f], // C0 controls: ESC starts CSI/OSC sequences, CR rewrites a line
  [0x7f, 0x9f], // DEL and C1 controls (0x9b is a one-byte CSI)
  [0xad, 0xad], // soft hyphen
  [0x061c, 0x061c], // Arabic letter mark
  [0x115f, 0x1160], // Hangul fillers
  [0x180e, 0x180e], // Mongolian vowel separator
  [0x200b, 0x200f], // zero-width characters, LRM, RLM
  [0x2028, 0x202e], // line/paragraph separators, bidi embeddings and overrides
  [0x2060, 0x206f], // word joiner, invisible operators, bidi isolates
  [0x3164, 0x3164], // Hangul filler
  [0xfe00, 0xfe0f], // variation selectors
  [0xfeff, 0xfeff], // BOM / zero-width no-break space
  [0xfff9, 0xfffb], // interlinear annotations
];

function isUnsafe(code: number): boolean {
  return unsafeRanges.some(([from, to]) => code >= from && code <= to);
}

function escapeChars(
  text: string,
  keep: (code: number) => boolean,
  escapeCode: (code: number) => string,
) {
  let out = "";
  for (const c of text) {
    const code = c.codePointAt(0) ?? 0;
    out += isUnsafe(code) && !keep(code) ? escapeCode(code) : c;
  }
  return out;
}

const visible = (code: number) =>
  code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;

/**
 * `text` safe to print: every control and invisible formatting character escaped. With
 * `keepNewlines`, `\n` stays a line break (for multi-line text such as a model's answer); every
 * line still starts where the printer put it, since CR and the other movers are escaped.
 */
export function escapeForTerminal(text: unknown, options: { keepNewlines?: boolean } = {}): string {
  const raw = typeof text === "string" ? text : String(text);
  const keep = options.keepNewlines ? (code: number) => code === 0x0a : () => false;
  return escapeChars(raw, keep, visible);
}

const jsonEscape = (code: number) => `\\u${code.toString(16).padStart(4, "0")}`;

/**
 * Everything a verb prints, on its way out (src/cli/run-cli.ts): the same characters escaped,
 * newlines kept, written as `\uXXXX` so that a JSON line (a log line of `serve`, `--json`
 * output) stays valid JSON with the same value: in valid JSON such characters occur only inside
 * strings, where `\uXXXX` means the character itself.
 */
export function escapeOutput(text: string): string {
  return escapeChars(text, (code) => code === 0x0a, jsonEscape);
}

/**
 * JSON for `--json` output: the same value, with the characters above written as `\uXXXX`
 * escapes, so it parses to exactly what the server sent but cannot drive a terminal either.
 */
export function toTerminalJson(value: unknown): string {
  const json = JSON.stringify(value) ?? "null";
  // Outside strings JSON has only ASCII, so every such character is inside a string.
  return escapeChars(json, () => false, jsonEscape);
}
