// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are shell source, not templates
// The invariant behind command allowlists: a script with any shell hazard never has a key, so no
// entry can approve it, wherever the hazard sits in the command. Plain commands always key to
// their first word, plus the second when it is not a flag.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { commandKey } from "../../src/shell/keys.ts";

const plainWord = fc.stringMatching(/^[a-z][a-z0-9._/-]{0,8}$/);
const flag = fc.stringMatching(/^--?[a-z][a-z0-9-]{0,6}$/);
const argument = fc.oneof(plainWord, flag);
// A program's name, never one of bash's reserved words: `if` or `done` alone is not a command (it
// has no key, rightly), and a generated one made this property fail by chance (seed -283590829).
const reservedWords = new Set(
  "if then else elif fi case esac for select while until do done in function time coproc".split(
    " ",
  ),
);
const program = plainWord.filter((word) => !reservedWords.has(word));
const plainCommand = fc.tuple(program, fc.array(argument, { maxLength: 5 }));

/** Each hazard, as a function from a plain command's words to shell text that contains it. */
const hazards: readonly [string, (words: string[], at: number) => string][] = [
  ["control operator ;", (w, at) => insertAfter(w, at, "; rm -rf x")],
  ["control operator &&", (w, at) => insertAfter(w, at, "&& rm -rf x")],
  ["control operator ||", (w, at) => insertAfter(w, at, "|| rm -rf x")],
  ["newline", (w, at) => insertAfter(w, at, "\nrm -rf x")],
  ["pipe", (w, at) => insertAfter(w, at, "| sh")],
  ["pipe |&", (w, at) => insertAfter(w, at, "|& sh")],
  ["background", (w, at) => insertAfter(w, at, "& rm x")],
  ["command substitution", (w, at) => insertWord(w, at, "$(rm x)")],
  ["backticks", (w, at) => insertWord(w, at, "`rm x`")],
  ["substitution in double quotes", (w, at) => insertWord(w, at, '"a$(rm x)b"')],
  ["process substitution", (w, at) => insertWord(w, at, "<(rm x)")],
  ["output process substitution", (w, at) => insertWord(w, at, ">(rm x)")],
  ["parameter expansion", (w, at) => insertWord(w, at, "$HOME")],
  ["braced parameter", (w, at) => insertWord(w, at, "${X:-y}")],
  ["quoted parameter", (w, at) => insertWord(w, at, '"$X"')],
  ["arithmetic", (w, at) => insertWord(w, at, "$((1+2))")],
  ["brace expansion", (w, at) => insertWord(w, at, "{a,b}")],
  ["redirection >", (w, at) => insertWord(w, at, "> out")],
  ["redirection >>", (w, at) => insertWord(w, at, ">> ~/.bashrc")],
  ["redirection <", (w, at) => insertWord(w, at, "< in")],
  ["redirection 2>", (w, at) => insertWord(w, at, "2>/dev/null")],
  ["duplication", (w, at) => insertWord(w, at, "2>&1")],
  ["herestring", (w, at) => insertWord(w, at, "<<< x")],
  ["heredoc", (w) => `${w.join(" ")} <<EOF\nx\nEOF`],
  ["comment", (w, at) => insertAfter(w, at, "# note")],
  ["subshell", (w) => `(${w.join(" ")})`],
  ["brace group", (w) => `{ ${w.join(" ")}; }`],
  ["negation", (w) => `! ${w.join(" ")}`],
  ["if", (w) => `if true; then ${w.join(" ")}; fi`],
  ["leading assignment", (w) => `X=1 ${w.join(" ")}`],
  ["env assignment", (w) => `env X=1 ${w.join(" ")}`],
  ["unterminated single quote", (w, at) => insertWord(w, at, "'abc")],
  ["unterminated double quote", (w, at) => insertWord(w, at, '"abc')],
  ["unterminated substitution", (w, at) => insertWord(w, at, "$(abc")],
  ["control character", (w, at) => insertWord(w, at, "a\u0007b")],
  ["zero-width space", (w, at) => insertWord(w, at, "a\u200bb")],
];

function insertWord(words: string[], at: number, hazard: string): string {
  const i = at % (words.length + 1);
  // In the program's place the hazard would be the program; keep it as an argument or suffix.
  return [...words.slice(0, Math.max(1, i)), hazard, ...words.slice(Math.max(1, i))].join(" ");
}

function insertAfter(words: string[], at: number, hazard: string): string {
  const i = Math.max(1, at % (words.length + 1));
  return [...words.slice(0, i), hazard, ...words.slice(i)].join(" ");
}

describe("commandKey properties", () => {
  it("a script with any hazard never has a key", () => {
    fc.assert(
      fc.property(
        plainCommand,
        fc.constantFrom(...hazards),
        fc.nat(),
        ([program, args], [, makeHazard], at) => {
          const script = makeHazard([program, ...args], at);
          const result = commandKey(script);
          expect(result.key, JSON.stringify(script)).toBeUndefined();
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a plain command keys to its program and the next word when that is not a flag", () => {
    fc.assert(
      fc.property(plainCommand, ([program, args]) => {
        const result = commandKey([program, ...args].join(" "));
        const next = args[0];
        const expected = next === undefined || next.startsWith("-") ? [program] : [program, next];
        expect(result.key?.words).toEqual(expected);
      }),
      { numRuns: 1000 },
    );
  });
});
