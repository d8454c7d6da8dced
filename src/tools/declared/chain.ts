// The command line of a `chain` tool: plain words joined by `|`, `;`, `&&` and `||`, nothing
// else. The one bash reader (src/shell/scan.ts) reads the words after quote removal
// and reports every expansion, redirection and structure; anything beyond plain words and those
// four operators is a typed refusal naming the construct, never a shell fallback. The operators
// between pipelines are read from the same tree-sitter grammar's tree here (the flat scan does
// not keep them), and the two readings must agree command for command or the text is refused.
import type { Node } from "web-tree-sitter";
import { type Risk, raiseRisk } from "../../shell/floor.ts";
import { type ArgvRisk, assessArgvRisk } from "../../shell/risk.ts";
import { readBashTree, scanShell } from "../../shell/scan.ts";
import type { ExpansionKind, ShellStructure } from "../../shell/syntax.ts";

export type ChainOperator = ";" | "&&" | "||";

/** One pipeline of the chain and how it joins the one before (the first has none). */
export type ChainItem = {
  readonly op: ChainOperator | undefined;
  /** Each stage's argv, program first, words after quote removal. */
  readonly stages: readonly (readonly [string, ...string[]])[];
};

/** Why a command line is not a chain: a stable construct name and a sentence for the model. */
export class ChainSyntaxError extends Error {
  readonly construct: string;
  constructor(construct: string, message: string) {
    super(message);
    this.construct = construct;
    this.name = "ChainSyntaxError";
  }
}

const structureNames: Partial<Record<ShellStructure, [string, string]>> = {
  background: ["background", "a background job (&)"],
  group: ["grouping", "grouping or a subshell ( ) { }"],
  compound: ["compound", "a compound command (if, for, while, case, [[ ]], !)"],
  function: ["function", "a function definition"],
  comment: ["comment", "a comment"],
  heredoc: ["heredoc", "a here-document"],
  assignment: ["assignment", "a NAME=value assignment"],
};

const expansionNames: Record<ExpansionKind, [string, string]> = {
  parameter: ["variable", "a variable expansion ($NAME)"],
  command: ["substitution", "command substitution ($() or backticks)"],
  process: ["process-substitution", "process substitution (<() or >())"],
  arithmetic: ["arithmetic", "arithmetic expansion"],
  tilde: ["tilde", "tilde expansion (~)"],
  glob: ["glob", "a glob pattern (* ? [ ]); quote it to pass it literally"],
  brace: ["brace", "brace expansion ({a,b})"],
};

/** Words bash would read as something other than a program found on PATH. */
const shellOnly = new Set([
  "alias",
  "unalias",
  "function",
  "eval",
  "source",
  ".",
  "exec",
  "builtin",
  "command",
  "enable",
  "set",
  "export",
  "declare",
  "typeset",
  "local",
  "readonly",
  "trap",
  "shopt",
]);

function refuse(construct: string, what: string): never {
  throw new ChainSyntaxError(
    construct,
    `The command uses ${what}, which a chain does not allow: only plain words joined by |, ;, && and || (no shell runs it). Nothing was run.`,
  );
}

/**
 * The skeleton in source order: each command and the operator before it. The grammar nests
 * `a | b && c` as a pipeline holding a list, which is not how bash groups it, so the tree's
 * shape is not used: once every other construct is refused, the commands and the operators
 * between them, in source order, are the whole meaning (`|` binds tighter than `&&`, `||` and
 * `;`, which apply left to right).
 */
function readSkeleton(source: string): { op: string | undefined; name: string }[] {
  const skeleton = readBashTree(source, (root) => {
    const out: { op: string | undefined; name: string }[] = [];
    let pending: string | undefined;
    const visit = (node: Node): void => {
      if (node.type === "command") {
        if (out.length > 0 && pending === undefined)
          refuse("unparsable", "two commands without an operator");
        out.push({ op: pending, name: node.childForFieldName("name")?.text ?? "" });
        pending = undefined;
        return;
      }
      if (!node.isNamed) {
        if (["|", "&&", "||", ";"].includes(node.type)) {
          if (pending !== undefined || out.length === 0)
            refuse("unparsable", "an operator without a command before it");
          pending = node.type;
          return;
        }
        refuse(
          node.type === "|&" ? "redirection" : "compound",
          `the operator ${JSON.stringify(node.type)}`,
        );
      }
      if (!["program", "list", "pipeline"].includes(node.type)) {
        refuse("compound", `a ${node.type.replace(/_/g, " ")}`);
      }
      for (const child of node.children) if (child !== null) visit(child);
    };
    visit(root);
    // A trailing `;` ends the last command; any other trailing operator is incomplete.
    if (pending !== undefined && pending !== ";") refuse("unparsable", `a trailing ${pending}`);
    return out;
  });
  if (skeleton === undefined) refuse("unparsable", "text that does not parse");
  return skeleton;
}

/** Reads a chain; throws ChainSyntaxError for anything that is not plain words and operators. */
export function parseChain(source: string): ChainItem[] {
  const scan = scanShell(source);
  if (scan.problems.length > 0)
    refuse("unparsable", `text that does not parse (${scan.problems[0]})`);
  for (const structure of scan.structure) {
    const named = structureNames[structure];
    if (named !== undefined) refuse(named[0], named[1]);
  }
  for (const expansion of scan.expansions) {
    const named = expansionNames[expansion];
    refuse(named[0], named[1]);
  }
  for (const command of scan.commands) {
    if (command.redirects.length > 0) refuse("redirection", "a redirection (<, >, >>, 2>&1 …)");
    if (command.assignments.length > 0) refuse("assignment", "a NAME=value assignment");
    if (command.nested !== undefined) refuse("substitution", "a substitution");
    if (command.function !== undefined) refuse("function", "a function definition");
    if (command.keyword !== undefined)
      refuse("compound", `a compound command (${command.keyword})`);
    const program = command.words[0]?.text;
    if (program === undefined || program === "") refuse("empty", "an empty command");
    if (shellOnly.has(program)) refuse("builtin", `the shell word ${JSON.stringify(program)}`);
    if (program.startsWith("!")) refuse("compound", "a negated command (!)");
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f]/.test(source)) {
    refuse("control", "a newline or a control character");
  }
  const skeleton = readSkeleton(source);
  if (skeleton.length !== scan.commands.length || skeleton.length === 0) {
    refuse("unparsable", "a shape the chain reader does not understand");
  }
  const items: { op: ChainOperator | undefined; stages: (readonly [string, ...string[]])[] }[] = [];
  for (const [i, { op, name }] of skeleton.entries()) {
    const words = (scan.commands[i]?.words ?? []).map((w) => w.text) as unknown as readonly [
      string,
      ...string[],
    ];
    // The two readings must name the same program at the same place.
    if (!/["'\\]/.test(name) && name !== words[0]) {
      refuse("unparsable", "a shape the chain reader does not understand");
    }
    const current = items[items.length - 1];
    if (op === "|" && current !== undefined) current.stages.push(words);
    else items.push({ op: op as ChainOperator | undefined, stages: [words] });
  }
  return items;
}

/**
 * The risk floor of a chain call as a whole, for the call's decision: every stage's reasons, as
 * written (each stage read like an execute_command argv). A chain that does not parse has none
 * here; the tool refuses it before anything runs.
 */
export function floorChainCommand(command: string, declared: Risk): ArgvRisk {
  let items: ChainItem[];
  try {
    items = parseChain(command);
  } catch {
    return { risk: declared, reasons: [] };
  }
  const reasons = new Set<string>();
  for (const item of items) {
    for (const stage of item.stages) {
      for (const reason of assessArgvRisk(stage, "read-only").reasons) {
        reasons.add(`stage ${stage[0]}: ${reason}`);
      }
    }
  }
  return reasons.size === 0
    ? { risk: declared, reasons: [] }
    : { risk: raiseRisk(declared, "high-risk"), reasons: [...reasons] };
}
