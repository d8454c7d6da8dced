// Command keys for allowlists (DESIGN §10, the reference's extractCommandApprovalKey): the key of
// a command is its program plus the next word when that word is not a flag — `git diff --stat`
// keys to `git diff`, `ls -la` to `ls`, `git -C repo status` to `git` (an option's value is not a
// subcommand). An entry covers its own key and longer keys at a word boundary: `git` covers
// `git status`, `git status` covers `git status --short`, `git st` covers neither. Keys are
// compared as words, code point for code point, so a look-alike (`gіt` with a Cyrillic і,
// full-width letters, a zero-width space) never matches an entry.
//
// A command that is more than one plain command has no key and no entry approves it: control
// operators, pipes, background, substitution, any expansion of a parameter (`$X`, `${…}`),
// arithmetic or braces, any redirection, a comment, grouping, compound commands, a leading
// NAME=value (also spelt `env NAME=value …`), a here-document, text that does not parse.
//
// Wrappers are programs like any other, so they are part of the key: `sudo apt install x` keys
// to `sudo apt`, `npx jest` to `npx jest`, `nice git status` to `nice git`, `timeout 10 make` to
// `timeout 10`, `env git status` to `env git`. Approving `git` therefore never approves running
// it as another user, through a package runner, or under another wrapper; approving a wrapper
// (`timeout`) approves whatever it runs. The program is compared as written: `/usr/bin/git` is not
// `git`. A shell given a script (`sh -c 'git status'`, `bash -lc …`) keys to its script's key.
//
// Pure: the reader of shell text is passed in; keys come from the same parse as the floor.
import { programName, shellPrograms } from "./programs.ts";
import type { ReadShell, ShellScan, ShellStructure } from "./syntax.ts";

export type CommandKey = {
  /** One or two words: the program, and the next word when it is not a flag. */
  readonly words: readonly string[];
  /** The words joined by one space, for display. */
  readonly text: string;
};

export type CommandKeyResult =
  | { readonly key: CommandKey; readonly reason?: undefined }
  | { readonly key: undefined; readonly reason: string };

const structureReasons: Record<ShellStructure, string> = {
  list: "a control operator (;, &&, ||, a newline) joins more than one command",
  pipeline: "a pipe (|) joins more than one command",
  background: "a command runs in the background (&)",
  group: "grouping with ( ) or { }",
  compound: "a compound command (if, for, while, case, [[ ]], !)",
  function: "a function definition",
  comment: "a comment",
  heredoc: "a here-document",
  assignment: "a leading NAME=value assignment",
};

// C0 and C1 controls (tab and newline are the shell's own), bidi controls, zero-width characters.
const invisible =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]/u;
const keyWord = /^[\x21-\x7e]+$/;
const maxNesting = 4;

function noKey(reason: string): CommandKeyResult {
  return { key: undefined, reason };
}

function makeKey(words: readonly string[]): CommandKeyResult {
  for (const word of words) {
    if (!keyWord.test(word)) {
      return noKey(
        `${JSON.stringify(word)} has a space or a character outside printable ASCII (look-alikes never match)`,
      );
    }
  }
  return { key: { words, text: words.join(" ") } };
}

function isFlag(word: string): boolean {
  return word.startsWith("-");
}

/** The key of an argv whose words are already literal (execute_command, a parsed command). */
function keyOfWords(words: readonly string[], read: ReadShell, depth: number): CommandKeyResult {
  const program = words[0];
  if (program === undefined || program === "") return noKey("no command");
  for (const word of words) {
    if (invisible.test(word)) return noKey("an invisible or control character");
  }
  const next = words[1];
  const name = programName(program);
  if (name === "env" && next !== undefined && /^[A-Za-z_][A-Za-z0-9_]*=/.test(next)) {
    return noKey("a leading NAME=value assignment (through env)");
  }
  if (shellPrograms.has(name) && name !== "busybox" && name !== "toybox") {
    const script = shellScript(words.slice(1));
    if (script === "extra") return noKey("arguments after a shell's -c script");
    if (script !== undefined) {
      if (depth >= maxNesting) return noKey("shells nested too deeply");
      return keyOfScanAt(read(script), read, depth + 1);
    }
  }
  return makeKey(next === undefined || isFlag(next) ? [program] : [program, next]);
}

/** `-c script` as the shell's only operand; "extra" when operands follow the script. */
function shellScript(args: readonly string[]): string | "extra" | undefined {
  let sawC = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (/^-[A-Za-z]+$/.test(arg)) {
      if (arg.includes("c")) sawC = true;
      continue;
    }
    if (!sawC) return undefined;
    return i === args.length - 1 ? arg : "extra";
  }
  return undefined;
}

function keyOfScanAt(scan: ShellScan, read: ReadShell, depth: number): CommandKeyResult {
  const problem = scan.problems[0];
  if (problem !== undefined) return noKey(problem);
  for (const structure of scan.structure) return noKey(structureReasons[structure]);
  if (scan.expansions.has("command") || scan.expansions.has("process")) {
    return noKey("command or process substitution");
  }
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell syntax in a message
  if (scan.expansions.has("parameter")) return noKey("a parameter expansion ($NAME or ${…})");
  if (scan.expansions.has("arithmetic")) return noKey("arithmetic expansion");
  if (scan.expansions.has("brace")) return noKey("brace expansion");
  if (scan.commands.length !== 1) {
    return noKey(scan.commands.length === 0 ? "no command" : "more than one command");
  }
  const command = scan.commands[0];
  if (command === undefined || command.keyword !== undefined) return noKey("no plain command");
  if (command.assignments.length > 0) return noKey(structureReasons.assignment);
  if (command.redirects.length > 0) return noKey("a redirection");
  const [program, next] = command.words;
  if (program === undefined) return noKey("no command");
  if (program.expansions.length > 0) return noKey("the program is built from an expansion");
  if (next !== undefined && !isFlag(next.text) && next.expansions.length > 0) {
    return noKey("the word after the program is built from an expansion");
  }
  return keyOfWords(
    command.words.map((w) => w.text),
    read,
    depth,
  );
}

/** The key of shell text, read by `read`; undefined with the reason when it has none. */
export function keyOfScript(script: string, read: ReadShell): CommandKeyResult {
  if (invisible.test(script)) return noKey("an invisible or control character");
  return keyOfScanAt(read(script), read, 0);
}

/**
 * The key of an argv (execute_command's program and args, a chain stage): the program plus its
 * first argument when that is not a flag; a shell's `-c` script keys to the script's key.
 */
export function keyOfArgv(argv: readonly string[], read: ReadShell): CommandKeyResult {
  return keyOfWords(argv, read, 0);
}

export type AllowEntry = { readonly words: readonly string[]; readonly text: string };

/** An operator's entry (`git status`): one or two words, each printable ASCII, no hazards. */
export function parseAllowEntry(
  entry: string,
): { readonly entry: AllowEntry } | { readonly problem: string } {
  const words = entry.split(" ");
  if (entry.trim() === "" || words.some((w) => w === "")) {
    return { problem: "words separated by single spaces, e.g. git status" };
  }
  if (words.length > 2) {
    return {
      problem:
        "at most two words, the program and its subcommand (a key never has more), e.g. git status",
    };
  }
  for (const word of words) {
    if (!keyWord.test(word) || /["'`$\\;&|<>(){}*?[\]#~=]/.test(word)) {
      return {
        problem: `plain words of printable ASCII without shell syntax, not ${JSON.stringify(word)}`,
      };
    }
  }
  if (isFlag(words[1] ?? ""))
    return { problem: "a subcommand, not a flag: keys never end in a flag" };
  return { entry: { words, text: words.join(" ") } };
}

/** Whether `entry` covers `key`: the same words, or the entry's words then more. */
export function entryCoversKey(entry: AllowEntry, key: CommandKey): boolean {
  if (entry.words.length > key.words.length) return false;
  for (let i = 0; i < entry.words.length; i++) {
    if (entry.words[i] !== key.words[i]) return false;
  }
  return true;
}

export type CommandCoverage =
  | { readonly covered: true; readonly key: CommandKey; readonly entry: AllowEntry }
  | { readonly covered: false; readonly key: CommandKey | undefined; readonly reason: string };

/** Whether a command's key is covered by any entry, and why (for `peergate ceiling --command`). */
export function explainCoverage(
  result: CommandKeyResult,
  entries: readonly AllowEntry[],
): CommandCoverage {
  if (result.key === undefined) {
    return { covered: false, key: undefined, reason: `no key: ${result.reason}` };
  }
  for (const entry of entries) {
    if (entryCoversKey(entry, result.key)) return { covered: true, key: result.key, entry };
  }
  return {
    covered: false,
    key: result.key,
    reason: `no entry covers the key ${JSON.stringify(result.key.text)}`,
  };
}
