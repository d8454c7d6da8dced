// The one escaper every CLI printer uses: no control sequence, bidi override or invisible
// character survives, printable text in any script does, and JSON stays JSON.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatTable } from "../../src/cli/format-table.ts";
import { escapeForTerminal, escapeOutput, toTerminalJson } from "../../src/cli/terminal-text.ts";

/** Anything a terminal would act on or hide (built from code points: lint forbids them in regexes). */
const dangerous = new RegExp(
  `[${[
    [0x00, 0x09],
    [0x0b, 0x1f],
    [0x7f, 0x9f],
    [0x200b, 0x200f],
    [0x2028, 0x202e],
    [0x2066, 0x2069],
    [0xfeff, 0xfeff],
  ]
    .map(([a, b]) => `\\u{${a?.toString(16)}}-\\u{${b?.toString(16)}}`)
    .join("")}]`,
  "u",
);

describe("escapeForTerminal", () => {
  const cases: [string, string, string][] = [
    ["CSI clear screen", "a\u001b[2Jb", "a\\x1b[2Jb"],
    ["OSC window title", "\u001b]0;pwned\u0007", "\\x1b]0;pwned\\x07"],
    [
      "OSC 8 hyperlink",
      "\u001b]8;;https://evil\u001b\\x\u001b]8;;\u001b\\",
      "\\x1b]8;;https://evil\\x1b\\x\\x1b]8;;\\x1b\\",
    ],
    ["one-byte C1 CSI", "\u009b31m", "\\x9b31m"],
    ["carriage return overwrite", "rm -rf /\rls", "rm -rf /\\x0dls"],
    ["backspace", "ab\bc", "ab\\x08c"],
    ["right-to-left override", "txt\u202egnp.exe", "txt\\u{202e}gnp.exe"],
    ["bidi isolate", "\u2066x\u2069", "\\u{2066}x\\u{2069}"],
    ["zero-width space", "read\u200bfile", "read\\u{200b}file"],
    ["line separator", "a\u2028b", "a\\u{2028}b"],
    ["newline (single-line field)", "a\nb", "a\\x0ab"],
    ["printable text in any script", "café 日本語 🙂", "café 日本語 🙂"],
  ];
  for (const [name, raw, shown] of cases) {
    it(`escapes ${name}`, () => expect(escapeForTerminal(raw)).toBe(shown));
  }

  it("keeps newlines only when asked, and nothing dangerous in any case", () => {
    expect(escapeForTerminal("a\nb\u001b", { keepNewlines: true })).toBe("a\nb\\x1b");
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        expect(escapeForTerminal(s)).not.toMatch(dangerous);
        expect(escapeForTerminal(s)).not.toContain("\n");
        expect(escapeForTerminal(s, { keepNewlines: true })).not.toMatch(dangerous);
      }),
    );
  });
});

describe("toTerminalJson", () => {
  it("is JSON for the same value, with nothing a terminal acts on", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: "binary" }), (value, s) => {
        const v = { value, s };
        const text = toTerminalJson(v);
        expect(text).not.toMatch(dangerous);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });
});

describe("formatTable", () => {
  it("escapes every cell, so no cell moves the cursor or starts a row", () => {
    const table = formatTable(["NAME", "NOTE"], [["a\u001b[1A", "x\ny\u202e"]]);
    expect(table.split("\n")).toHaveLength(2);
    expect(table).not.toMatch(dangerous);
    expect(table).toContain("a\\x1b[1A");
  });
});

it("the danger pattern itself matches what it must (the checks above are not vacuous)", () => {
  for (const c of ["\u001b", "\r", "\u009b", "\u202e", "\u200b", "\u2069", "\ufeff"]) {
    expect(c).toMatch(dangerous);
  }
  expect("a\nb").not.toMatch(dangerous);
});

it("escapeOutput keeps lines and keeps a JSON line JSON with the same value", () => {
  expect(escapeOutput("a\u001b[2J\nb")).toBe("a\\u001b[2J\nb");
  fc.assert(
    fc.property(fc.jsonValue(), fc.string({ unit: "binary" }), (value, s) => {
      const line = JSON.stringify({ value, s });
      const out = escapeOutput(line);
      expect(out).not.toMatch(dangerous);
      expect(JSON.parse(out)).toEqual(JSON.parse(line));
    }),
  );
});
