// Where an interpreter takes inline code from its arguments: every option form, attached
// (`python3 '-cimport os'`, `perl -le'…'`) or separate (`node -e …`, `--eval=…`), in a group of
// short options (`perl -lne …`, `node -pe …`). Inline code is in a language the bash reader
// cannot read, so it is reported as such (runs.ts's `opaque`); a script file is not in the
// command and is not read; no script and no code means the program reads code from its input.
// Pure.
import { programName } from "./programs.ts";
import type { Run, Word } from "./run-parts.ts";

type Lang = {
  /** Short options whose value (attached, or else the next word) is code. */
  readonly code: string;
  /** Short options that take a value: attached, or else the next word. */
  readonly value: string;
  /** Short options whose value can only be attached, and what of the rest they take. */
  readonly attached?: Readonly<Record<string, RegExp>>;
  /** Short options after which a module, not code, runs (`python -m`): stop reading. */
  readonly stop?: string;
  /** Long options whose value is code (`--eval code`, `--eval=code`). */
  readonly longCode?: readonly string[];
  /** Long options that take the next word as a value. */
  readonly longValue?: readonly string[];
};

const python: Lang = { code: "c", value: "WXQ", stop: "m", longValue: ["--check-hash-based-pycs"] };
// -M/-m write `use Module …;` and -F a split pattern into the program: code too.
const rest = /^.*$/s;
const octal = /^[0-7]*/;
const perl: Lang = {
  code: "eEMmF",
  value: "",
  attached: {
    i: rest,
    I: rest,
    l: octal,
    "0": /^(x[0-9a-fA-F]+|[0-7]*)/,
    d: rest,
    D: rest,
    C: /^[0-9]*/,
    x: rest,
    V: rest,
  },
};
const ruby: Lang = {
  code: "e",
  value: "rIEC",
  attached: { F: rest, x: rest, T: /^[0-9]*/, W: /^[0-9:a-z]*/, K: /^./, "0": octal, l: /^/ },
};
const node: Lang = {
  code: "ep",
  value: "r",
  longCode: ["--eval", "--print"],
  longValue: ["--require", "--import", "--loader", "--experimental-loader", "--env-file"],
};
const php: Lang = { code: "rBRE", value: "cdfzFtS" };
const lua: Lang = { code: "e", value: "l" };
const julia: Lang = { code: "eE", value: "LJCpt", longCode: ["--eval", "--print"] };
const plain: Lang = { code: "e", value: "" };

const languages: [RegExp, Lang][] = [
  [/^(python[0-9.]*|pypy[0-9.]*)$/, python],
  [/^perl[0-9.]*$/, perl],
  [/^(ruby[0-9.]*|jruby|truffleruby)$/, ruby],
  [/^(node|nodejs|bun)$/, node],
  [/^php[0-9.]*$/, php],
  [/^(lua[0-9.]*|luajit)$/, lua],
  [/^julia$/, julia],
  [/^(osascript|Rscript|R|racket|dc)$/, plain],
  [/^guile$/, { code: "c", value: "lexLCs" }],
  [/^sbcl$/, { code: "", value: "", longCode: ["--eval"], longValue: ["--load", "--script"] }],
  [/^(tclsh[0-9.]*|wish|irb|jshell)$/, { code: "", value: "" }],
];

const versionOrHelp = /^(-V|-v|--version|-version|-h|--help|-help|-\?)$/;

function inline(name: string, flag: string): Run {
  return {
    kind: "opaque",
    via: `${name} ${flag}`,
    reason: "runs inline code, which the floor cannot read",
    inline: true,
  };
}

function fromInput(name: string): Run {
  return {
    kind: "opaque",
    via: name,
    reason: "reads its code from standard input or its next argument, which is not in the command",
    inline: false,
  };
}

function readOptions(name: string, args: readonly Word[], lang: Lang): Run[] {
  for (let i = 0; i < args.length; i++) {
    const text = (args[i] as Word).text;
    if (versionOrHelp.test(text)) return [];
    if (text === "--") return args[i + 1] === undefined ? [fromInput(name)] : [];
    if (text === "-") return [fromInput(name)];
    if (text.startsWith("--")) {
      const eq = text.indexOf("=");
      const option = eq === -1 ? text : text.slice(0, eq);
      if (lang.longCode?.includes(option)) {
        return eq === -1 && args[i + 1] === undefined ? [fromInput(name)] : [inline(name, option)];
      }
      if (eq === -1 && lang.longValue?.includes(option)) i++;
      continue;
    }
    if (text.startsWith("-") && text.length > 1) {
      for (let k = 1; k < text.length; k++) {
        const letter = text[k] as string;
        const rest = text.slice(k + 1);
        const takes = lang.attached?.[letter];
        if (lang.code.includes(letter)) {
          if (rest === "" && args[i + 1] === undefined) return [fromInput(name)];
          return [inline(name, text.slice(0, k + 1))];
        }
        if (lang.stop?.includes(letter)) return [];
        if (lang.value.includes(letter)) {
          if (rest === "") i++;
          break;
        }
        if (takes !== undefined) k += takes.exec(rest)?.[0].length ?? 0;
      }
      continue;
    }
    return []; // a script file: its text is not in the command
  }
  return [fromInput(name)];
}

/** awk's program: the first operand, or `-e`/`--source` text; `-f file` names a file. */
function readAwk(name: string, args: readonly Word[]): Run[] {
  for (let i = 0; i < args.length; i++) {
    const text = (args[i] as Word).text;
    if (versionOrHelp.test(text)) return [];
    if (/^(-f|--file)(=|$)/.test(text) || /^-f./.test(text)) return [];
    if (/^(-e|--source)(=|$)/.test(text) || /^-e./.test(text)) return [inline(name, "-e")];
    if (/^-[vF]$/.test(text) || /^--(assign|field-separator)$/.test(text)) {
      i++;
      continue;
    }
    if (text === "--")
      return args[i + 1] === undefined ? [fromInput(name)] : [inline(name, "(program)")];
    if (text.startsWith("-") && text !== "-") continue;
    return [inline(name, "(program)")];
  }
  return [fromInput(name)];
}

/** PowerShell: `-c`, `-Command`, `-ec`, `-EncodedCommand` and their prefixes, any case. */
function readPowerShell(name: string, args: readonly Word[]): Run[] {
  for (const arg of args) {
    const text = arg.text.toLowerCase();
    if (versionOrHelp.test(arg.text)) return [];
    if (
      /^-(c|co|com|comm|comma|comman|command|e|ec|en|enc|enco|encod|encode|encoded|encodedc.*)$/.test(
        text,
      )
    ) {
      return [inline(name, arg.text)];
    }
    if (/^-(f|fi|fil|file)$/.test(text) || !text.startsWith("-")) return [];
  }
  return [fromInput(name)];
}

/** Everything an interpreter's argv runs: inline code, its input, or nothing (a script file). */
export function readInterpreter(program: string, args: readonly Word[]): Run[] {
  const name = programName(program);
  if (/awk$/.test(name)) return readAwk(name, args);
  if (/^(pwsh|powershell)(\.exe)?$/i.test(name)) return readPowerShell(name, args);
  if (name === "deno") {
    const sub = args[0]?.text;
    if (sub === "eval") return [inline(name, "eval")];
    if (sub === "repl" && args.some((a) => a.text.startsWith("--eval")))
      return [inline(name, "repl --eval")];
    return sub === undefined || sub === "repl" ? [fromInput(name)] : [];
  }
  const lang = languages.find(([pattern]) => pattern.test(name))?.[1] ?? plain;
  return readOptions(name, args, lang);
}
