// The one reader of shell text in peergate (DESIGN §10): tree-sitter's bash grammar, compiled to
// WebAssembly, turns a script into a full syntax tree, and this module flattens that tree into the
// plain data of src/shell/syntax.ts — simple commands with their words after quote removal,
// leading assignments, redirections and pipeline position, plus every expansion, structure and
// problem met anywhere, inside double quotes, `${…}` and substitutions included. The risk floor,
// the denylist and the command keys all read that data; nothing else lexes shell text.
//
// The grammar loads once, when this module is first imported (a top-level await, so start-up has
// it before any request); after that every parse is synchronous. It errs one way: a tree with an
// error or a missing token is reported as a problem, which only ever makes a script look riskier.
// One file over 500 lines on purpose: it is one recursive reading of one grammar's node types,
// and split up, the cases of a node kind would sit apart from one another.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { Language, type Node, Parser } from "web-tree-sitter";
import { collectEvaluated } from "./evaluated.ts";
import type {
  ExpansionKind,
  ShellRedirect,
  ShellScan,
  ShellStructure,
  ShellWord,
  SimpleCommand,
} from "./syntax.ts";

const require = createRequire(import.meta.url);
// The runtime's own wasm sits beside its entry point; the grammar ships as a file of its package.
await Parser.init({
  locateFile: (name: string) => require.resolve(`web-tree-sitter/${name}`),
});
const bash = await Language.load(
  await readFile(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm")),
);
const parser = new Parser();
parser.setLanguage(bash);

const maxDepth = 64;

/**
 * Parses `source` and hands the tree's root to `read`, freeing the tree after; `undefined` when the
 * parser gives up. For a reader that needs the tree's own shape (the chain's operators).
 */
export function readBashTree<T>(source: string, read: (root: Node) => T): T | undefined {
  const tree = parser.parse(source);
  if (tree === null) return undefined;
  try {
    return read(tree.rootNode);
  } finally {
    tree.delete();
  }
}

type MutableWord = { text: string; expansions: ExpansionKind[]; quoted: boolean };

type State = {
  readonly src: string;
  readonly commands: SimpleCommand[];
  readonly problems: string[];
  readonly expansions: Set<ExpansionKind>;
  readonly structure: Set<ShellStructure>;
  readonly hasError: boolean;
  pipelines: number;
};

type Place = {
  readonly nested: SimpleCommand["nested"];
  readonly pipeline: number | undefined;
  readonly stage: number;
  readonly depth: number;
  /** The function whose body this is, if any. */
  readonly fn: string | undefined;
};

/** Parses a script. Never throws; problems are reported in the result. */
export function scanShell(source: string): ShellScan {
  const tree = parser.parse(source);
  if (tree === null) {
    return {
      commands: [],
      problems: ["does not parse as bash (the parser gave up)"],
      expansions: new Set(),
      structure: new Set(),
      evaluated: [],
    };
  }
  try {
    const root = tree.rootNode;
    const st: State = {
      src: source,
      commands: [],
      problems: [],
      expansions: new Set(),
      structure: new Set(),
      hasError: root.hasError,
      pipelines: 0,
    };
    visitBody(st, root, {
      nested: undefined,
      pipeline: undefined,
      stage: 0,
      depth: 0,
      fn: undefined,
    });
    // The walk reads what it understands; an error it did not meet (a missing closing quote
    // inside a word) is still an error of the text.
    if (st.hasError && st.problems.length === 0) noteFirstError(st, root);
    return {
      commands: st.commands,
      problems: st.problems,
      expansions: st.expansions,
      structure: st.structure,
      evaluated: collectEvaluated(root),
    };
  } finally {
    tree.delete();
  }
}

function problem(st: State, message: string): void {
  if (!st.problems.includes(message)) st.problems.push(message);
}

function excerpt(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 40 ? `${line.slice(0, 40)}…` : line;
}

function noteError(st: State, node: Node): void {
  // An error that runs to the end of the text is something left open: a quote, `$(`, `{`.
  const open = node.endIndex >= st.src.trimEnd().length;
  problem(
    st,
    open
      ? `unterminated quote or construct (near ${JSON.stringify(excerpt(node.text))})`
      : `does not parse as bash (near ${JSON.stringify(excerpt(node.text))})`,
  );
}

function noteFirstError(st: State, root: Node): void {
  const cursor = root.walk();
  try {
    for (;;) {
      const node = cursor.currentNode;
      if (node.isMissing) {
        noteMissing(st, node);
        return;
      }
      if (node.type === "ERROR") {
        noteError(st, node);
        return;
      }
      if (cursor.gotoFirstChild()) continue;
      while (!cursor.gotoNextSibling()) {
        if (!cursor.gotoParent()) {
          problem(st, "does not parse as bash");
          return;
        }
      }
    }
  } finally {
    cursor.delete();
  }
}

function noteMissing(st: State, node: Node): void {
  problem(st, `unterminated quote or construct (missing ${JSON.stringify(node.type)})`);
}

const separators: Record<string, ShellStructure> = {
  ";": "list",
  "&&": "list",
  "||": "list",
  ";;": "list",
  "&": "background",
};

const compoundTypes: Record<string, ShellStructure> = {
  subshell: "group",
  compound_statement: "group",
  if_statement: "compound",
  while_statement: "compound",
  for_statement: "compound",
  c_style_for_statement: "compound",
  case_statement: "compound",
  test_command: "compound",
  negated_command: "compound",
  function_definition: "function",
};

/** A node whose children are statements: the program, a list, a group, a compound statement. */
function visitBody(st: State, node: Node, place: Place): void {
  if (place.depth > maxDepth) {
    problem(st, "nested too deeply to analyse");
    return;
  }
  let statements = 0;
  for (const child of node.children) {
    if (child === null) continue;
    if (!child.isNamed) {
      const sep = separators[child.type];
      if (sep !== undefined) st.structure.add(sep);
      if (child.isMissing) noteMissing(st, child);
      continue;
    }
    statements++;
    visitStatement(st, child, { ...place, depth: place.depth + 1 });
  }
  if (statements > 1 && node.type === "program") st.structure.add("list");
}

function visitStatement(st: State, node: Node, place: Place): void {
  if (place.depth > maxDepth) {
    problem(st, "nested too deeply to analyse");
    return;
  }
  if (st.hasError && node.isMissing) noteMissing(st, node);
  switch (node.type) {
    case "command":
    case "declaration_command":
    case "unset_command":
      visitCommand(st, node, place, []);
      return;
    case "redirected_statement":
      visitRedirected(st, node, place);
      return;
    case "pipeline": {
      st.structure.add("pipeline");
      const pipeline = st.pipelines++;
      let stage = 0;
      for (const child of node.namedChildren) {
        if (child === null) continue;
        visitStatement(st, child, { ...place, pipeline, stage: stage++, depth: place.depth + 1 });
      }
      return;
    }
    case "list":
      st.structure.add("list");
      visitBody(st, node, place);
      return;
    case "comment":
      st.structure.add("comment");
      return;
    case "variable_assignment":
    case "variable_assignments": {
      // `x=1` alone runs nothing: an entry with the assignment and no words (so `sudo=1` is not
      // read as a command named sudo).
      st.structure.add("assignment");
      const parts = node.type === "variable_assignment" ? [node] : node.namedChildren;
      const assignments: ShellWord[] = [];
      for (const part of parts) {
        if (part === null) continue;
        if (part.type === "variable_assignment") assignments.push(assignmentOf(st, part, place));
        else wordOf(st, part, place);
      }
      st.commands.push({
        words: [],
        assignments,
        redirects: [],
        pipeline: place.pipeline ?? st.pipelines++,
        stage: place.stage,
        nested: place.nested,
        function: place.fn,
        keyword: undefined,
      });
      return;
    }
    case "ERROR":
      noteError(st, node);
      visitErrorChildren(st, node, place);
      return;
    case "command_name": {
      // Only met loose inside an error, where a `{` before it is a token of its own:
      // `{cat,/etc/passwd}` is brace expansion to bash, an unclosed group to the grammar.
      const word = wordOf(st, node.namedChildren[0] ?? node, place);
      if (st.src[node.startIndex - 1] === "{" && hasBraceExpansion(`{${word.text}`)) {
        word.text = `{${word.text}`;
        note(st, word, "brace");
      }
      st.commands.push({
        words: [freeze(word)],
        assignments: [],
        redirects: [],
        pipeline: place.pipeline ?? st.pipelines++,
        stage: place.stage,
        nested: place.nested,
        function: place.fn,
        keyword: undefined,
      });
      return;
    }
    default: {
      const kind = compoundTypes[node.type];
      st.structure.add(kind ?? "compound");
      const name = node.type === "function_definition" ? node.childForFieldName("name") : null;
      visitCompound(st, node, name === null ? place : { ...place, fn: name.text });
    }
  }
}

/** Inside an error, keep reading what is recognisable: commands still count. */
function visitErrorChildren(st: State, node: Node, place: Place): void {
  for (const child of node.namedChildren) {
    if (child === null) continue;
    if (isStatement(child.type) || child.type === "command_name" || child.type === "ERROR") {
      visitStatement(st, child, { ...place, depth: place.depth + 1 });
    } else wordOf(st, child, place);
  }
}

const statementTypes = new Set([
  "command",
  "declaration_command",
  "unset_command",
  "redirected_statement",
  "pipeline",
  "list",
  "comment",
  "variable_assignment",
  "variable_assignments",
  "subshell",
  "compound_statement",
  "if_statement",
  "while_statement",
  "for_statement",
  "c_style_for_statement",
  "case_statement",
  "test_command",
  "negated_command",
  "function_definition",
]);

function isStatement(type: string): boolean {
  return statementTypes.has(type);
}

/**
 * A compound statement: statements inside are visited as commands, everything else (a `for`
 * list, a `case` word, a `[[ … ]]` operand, a loop condition's pieces) is read only for the
 * substitutions and expansions in it.
 */
function visitCompound(st: State, node: Node, place: Place): void {
  for (const child of node.children) {
    if (child === null) continue;
    if (!child.isNamed) {
      const sep = separators[child.type];
      if (sep !== undefined) st.structure.add(sep);
      if (child.isMissing) noteMissing(st, child);
      continue;
    }
    const inner = { ...place, depth: place.depth + 1 };
    if (isStatement(child.type) || child.type === "ERROR") visitStatement(st, child, inner);
    else if (
      child.type === "do_group" ||
      child.type === "else_clause" ||
      child.type === "elif_clause" ||
      child.type === "case_item"
    ) {
      visitCompound(st, child, inner);
    } else if (child.type.endsWith("_redirect")) {
      st.commands.push({
        words: [],
        assignments: [],
        redirects: [redirectOf(st, child, inner)],
        pipeline: place.pipeline ?? st.pipelines++,
        stage: place.stage,
        nested: place.nested,
        function: place.fn,
        keyword: node.type,
      });
    } else wordOf(st, child, inner);
  }
}

function visitRedirected(st: State, node: Node, place: Place): void {
  const redirects: ShellRedirect[] = [];
  let body: Node | null = null;
  for (const child of node.namedChildren) {
    if (child === null) continue;
    if (child.type.endsWith("_redirect")) redirects.push(redirectOf(st, child, place));
    else if (body === null) body = child;
    else visitStatement(st, child, { ...place, depth: place.depth + 1 });
  }
  if (body !== null && (body.type === "command" || body.type === "declaration_command")) {
    visitCommand(st, body, place, redirects);
    return;
  }
  if (body !== null) visitStatement(st, body, { ...place, depth: place.depth + 1 });
  st.commands.push({
    words: [],
    assignments: [],
    redirects,
    pipeline: place.pipeline ?? st.pipelines++,
    stage: place.stage,
    nested: place.nested,
    function: place.fn,
    keyword: body?.type ?? "redirection",
  });
}

function visitCommand(st: State, node: Node, place: Place, outer: ShellRedirect[]): void {
  const words: ShellWord[] = [];
  const assignments: ShellWord[] = [];
  const redirects: ShellRedirect[] = [];
  const addOperand = (child: Node) => {
    if (child.type === "variable_assignment" && words.length === 0) {
      assignments.push(assignmentOf(st, child, place));
    } else if (child.type === "variable_assignment") words.push(assignmentOf(st, child, place));
    else if (child.type.endsWith("_redirect")) redirects.push(redirectOf(st, child, place));
    else if (child.type === "variable_assignments") {
      for (const inner of child.namedChildren) if (inner !== null) addOperand(inner);
    } else if (child.type === "command_name") {
      const name = child.namedChildren[0];
      words.push(freeze(name ? wordOf(st, name, place) : wordOf(st, child, place)));
    } else if (child.type === "comment") st.structure.add("comment");
    else if (child.type === "ERROR") {
      noteError(st, child);
      visitErrorChildren(st, child, place);
    } else words.push(freeze(wordOf(st, child, place)));
  };
  for (const child of node.children) {
    if (child === null) continue;
    if (!child.isNamed) {
      // declaration_command and unset_command spell their keyword as a token.
      if (/^[a-z]+$/.test(child.type)) {
        words.push({ text: child.type, expansions: [], quoted: false });
      } else if (child.isMissing) noteMissing(st, child);
      continue;
    }
    addOperand(child);
  }
  st.commands.push({
    words,
    assignments,
    redirects: [...redirects, ...outer],
    pipeline: place.pipeline ?? st.pipelines++,
    stage: place.stage,
    nested: place.nested,
    function: place.fn,
    keyword: undefined,
  });
}

function redirectOf(st: State, node: Node, place: Place): ShellRedirect {
  let fd: string | undefined;
  let op = "";
  let target: ShellWord | undefined;
  if (node.type === "heredoc_redirect") {
    st.structure.add("heredoc");
    for (const child of node.children) {
      if (child === null) continue;
      if (!child.isNamed) {
        if (child.type.startsWith("<<")) op = child.type;
        continue;
      }
      if (child.type === "heredoc_start") {
        target = { text: child.text.replace(/['"\\]/g, ""), expansions: [], quoted: false };
      } else if (child.type === "file_descriptor") fd = child.text;
      else if (child.type === "heredoc_body") wordOf(st, child, place);
      else if (isStatement(child.type)) {
        // `cat <<EOF | sh`: the rest of the line after the delimiter is a pipeline of its own.
        visitStatement(st, child, { ...place, depth: place.depth + 1 });
      }
    }
    return { op: op || "<<", fd, target };
  }
  for (const child of node.children) {
    if (child === null) continue;
    if (!child.isNamed) {
      if (child.isMissing) noteMissing(st, child);
      else op += child.type;
      continue;
    }
    if (child.type === "file_descriptor") fd = child.text;
    else if (child.type === "ERROR") noteError(st, child);
    else if (target === undefined) target = freeze(wordOf(st, child, place));
    else wordOf(st, child, place);
  }
  if (node.type === "herestring_redirect" && op === "") op = "<<<";
  return { op, fd, target };
}

/** `NAME=value` with the value's quotes removed (`PS4='$(id)'` → `PS4=$(id)`). */
function assignmentOf(st: State, node: Node, place: Place): ShellWord {
  const value = node.childForFieldName("value");
  if (value === null) return freeze(wordOf(st, node, place));
  const word = wordOf(st, value, place);
  const head = st.src.slice(node.startIndex, value.startIndex);
  for (const child of node.namedChildren) {
    if (child !== null && child.id !== value.id) wordOf(st, child, place);
  }
  return { text: head + word.text, expansions: word.expansions, quoted: word.quoted };
}

function freeze(word: MutableWord): ShellWord {
  return { text: word.text, expansions: word.expansions, quoted: word.quoted };
}

function note(st: State, word: MutableWord, kind: ExpansionKind): void {
  if (!word.expansions.includes(kind)) word.expansions.push(kind);
  st.expansions.add(kind);
}

/** A word's text after quote removal; substitutions inside are visited as nested commands. */
function wordOf(st: State, node: Node, place: Place): MutableWord {
  const word: MutableWord = { text: "", expansions: [], quoted: false };
  appendWord(st, node, place, word, false);
  return word;
}

function appendWord(
  st: State,
  node: Node,
  place: Place,
  word: MutableWord,
  inQuotes: boolean,
): void {
  if (place.depth > maxDepth) {
    problem(st, "nested too deeply to analyse");
    return;
  }
  const inner = { ...place, depth: place.depth + 1 };
  switch (node.type) {
    case "word": {
      const raw = node.text;
      if (raw.includes("\\")) word.quoted = true;
      if (!inQuotes) {
        if (raw.startsWith("~") && word.text === "") note(st, word, "tilde");
        if (hasGlob(raw)) note(st, word, "glob");
        if (hasBraceExpansion(raw)) note(st, word, "brace");
      }
      word.text += raw.replace(/\\\n/g, "").replace(/\\(.)/gs, "$1");
      return;
    }
    case "raw_string":
      word.quoted = true;
      word.text += node.text.slice(1, -1);
      return;
    case "ansi_c_string":
      word.quoted = true;
      word.text += node.text.slice(2, -1);
      return;
    case "string":
    case "translated_string":
      word.quoted = true;
      appendDoubleQuoted(st, node, inner, word);
      return;
    case "concatenation":
      for (const child of node.children) {
        if (child === null) continue;
        if (child.isNamed) appendWord(st, child, inner, word, inQuotes);
        else word.text += child.text; // loose `{`, `}`, `$` tokens between parts
      }
      if (!inQuotes && hasBraceExpansion(node.text)) note(st, word, "brace");
      return;
    case "simple_expansion":
    case "expansion":
      note(st, word, "parameter");
      word.text += node.text;
      visitInside(st, node, inner, word);
      return;
    case "command_substitution":
      note(st, word, "command");
      word.text += node.text;
      visitBody(st, node, { ...inner, nested: "command", pipeline: undefined, stage: 0 });
      return;
    case "process_substitution":
      note(st, word, "process");
      word.text += node.text;
      visitBody(st, node, { ...inner, nested: "process", pipeline: undefined, stage: 0 });
      return;
    case "arithmetic_expansion":
      note(st, word, "arithmetic");
      word.text += node.text;
      visitInside(st, node, inner, word);
      return;
    case "brace_expression":
      note(st, word, "brace");
      word.text += node.text;
      return;
    case "extglob_pattern":
      note(st, word, "glob");
      word.text += node.text;
      return;
    case "number":
    case "variable_name":
    case "file_descriptor":
    case "heredoc_start":
    case "test_operator":
    case "special_variable_name":
      word.text += node.text;
      return;
    case "ERROR":
      noteError(st, node);
      word.text += node.text;
      visitInside(st, node, inner, word);
      return;
    default:
      word.text += node.text;
      visitInside(st, node, inner, word);
  }
}

/** `"…"`: literal runs between the expansions, with the double-quote escapes removed. */
function appendDoubleQuoted(st: State, node: Node, place: Place, word: MutableWord): void {
  const src = st.src;
  const open = node.type === "translated_string" ? 2 : 1;
  let at = node.startIndex + open;
  const end = node.endIndex - 1;
  const literal = (from: number, to: number) => {
    if (to > from)
      word.text += src
        .slice(from, to)
        .replace(/\\\n/g, "")
        .replace(/\\([$`"\\])/g, "$1");
  };
  for (const child of node.namedChildren) {
    if (child === null) continue;
    if (child.type === "string_content") continue;
    literal(at, child.startIndex);
    appendWord(st, child, place, word, true);
    at = child.endIndex;
  }
  literal(at, Math.max(at, end));
}

/** Reads a node's descendants only for the substitutions and expansions in them. */
function visitInside(st: State, node: Node, place: Place, word: MutableWord): void {
  for (const child of node.namedChildren) {
    if (child === null) continue;
    switch (child.type) {
      case "command_substitution":
      case "process_substitution":
      case "simple_expansion":
      case "expansion":
      case "arithmetic_expansion":
      case "string":
      case "ERROR": {
        const scratch: MutableWord = { text: "", expansions: word.expansions, quoted: true };
        appendWord(st, child, place, scratch, true);
        break;
      }
      default:
        if (child.namedChildCount > 0)
          visitInside(st, child, { ...place, depth: place.depth + 1 }, word);
    }
  }
}

/** Unquoted `*`, `?` or `[…]` in a word's source (escaped characters do not count). */
function hasGlob(raw: string): boolean {
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === "\\") i++;
    else if (c === "*" || c === "?") return true;
    else if (c === "[" && raw.indexOf("]", i + 1) !== -1) return true;
  }
  return false;
}

/** `{a,b}` or `{1..3}` in a word's source. */
function hasBraceExpansion(raw: string): boolean {
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === "\\") i++;
    else if (c === "'" || c === '"') return false;
    else if (c === "{") depth++;
    else if (c === "}") depth = Math.max(0, depth - 1);
    else if (depth > 0 && (c === "," || raw.startsWith("..", i))) return true;
  }
  return false;
}
