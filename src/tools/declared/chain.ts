// The command line of a `chain` tool: plain words joined by `|`, `;`, `&&` and `||`, nothing
// else. The one bash reader (src/tools/shell/shell-scan.ts) reads the words after quote removal
// and reports every expansion, redirection and structure; anything beyond plain words and those
// four operators is a typed refusal naming the construct, never a shell fallback. The operators
// between pipelines are read from the same tree-sitter grammar's tree here (the flat scan does
// not keep them), and the two readings must agree command for command or the text is refused.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { Language, type Node, Parser } from "web-tree-sitter";
import type { ExpansionKind, ShellStructure } from "../../policy/shell-syntax.ts";
import { scanShell } from "../shell/shell-scan.ts";

const require = createRequire(import.meta.url);
await Parser.init({ locateFile: (name: string) => require.resolve(`web-tree-sitter/${name}`) });
const bash = await Language.load(
  await readFile(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm")),
);
const parser = new Parser();
parser.setLanguage(bash);

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

/** The skeleton: how many commands each pipeline has and the operator before it. */
function readSkeleton(source: string): { op: ChainOperator | undefined; size: number }[] {
  const tree = parser.parse(source);
  if (tree === null) refuse("unparsable", "text that does not parse");
  try {
    const out: { op: ChainOperator | undefined; size: number }[] = [];
    let pending: ChainOperator | undefined;
    const visit = (node: Node): void => {
      switch (node.type) {
        case "program":
        case "list":
          for (const child of node.children) {
            if (child === null) continue;
            if (child.type === ";" || child.type === "&&" || child.type === "||") {
              pending = child.type;
            } else visit(child);
          }
          return;
        case "pipeline": {
          let size = 0;
          for (const child of node.namedChildren) {
            if (child === null) continue;
            if (child.type !== "command") refuse("compound", "a compound command in a pipeline");
            size++;
          }
          out.push({ op: out.length === 0 ? undefined : (pending ?? ";"), size });
          pending = undefined;
          return;
        }
        case "command":
          out.push({ op: out.length === 0 ? undefined : (pending ?? ";"), size: 1 });
          pending = undefined;
          return;
        default:
          refuse("compound", `a ${node.type.replace(/_/g, " ")}`);
      }
    };
    visit(tree.rootNode);
    return out;
  } finally {
    tree.delete();
  }
}

/** Reads a chain; throws ChainSyntaxError for anything that is not plain words and operators. */
export function parseChain(source: string): ChainItem[] {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f]/.test(source)) {
    refuse("control", "a newline or a control character");
  }
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
  const skeleton = readSkeleton(source);
  const total = skeleton.reduce((n, item) => n + item.size, 0);
  if (total !== scan.commands.length || skeleton.length === 0) {
    refuse("unparsable", "a shape the chain reader does not understand");
  }
  const items: ChainItem[] = [];
  let next = 0;
  for (const { op, size } of skeleton) {
    const stages = scan.commands.slice(next, next + size).map((c) => {
      const words = c.words.map((w) => w.text);
      return words as unknown as readonly [string, ...string[]];
    });
    const pipeline = scan.commands[next]?.pipeline;
    if (scan.commands.slice(next, next + size).some((c) => c.pipeline !== pipeline)) {
      refuse("unparsable", "a shape the chain reader does not understand");
    }
    next += size;
    items.push({ op, stages });
  }
  return items;
}
