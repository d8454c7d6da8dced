// A quote-aware scanner for bash source: it splits a script into simple commands (words after
// quote removal, leading assignments, redirections, pipeline position) and records every
// expansion and substitution it meets, including those nested in double quotes, `${…}` and other
// substitutions. It is what the denylist and the risk floor read; sh-syntax (mvdan/sh, see
// shell-risk.ts) is the authority on whether the text parses at all.
//
// It deliberately errs one way: anything it cannot place precisely is reported as an expansion
// or a problem, which only ever makes a script look riskier. It never runs or expands anything.

export type ExpansionKind =
  | "parameter"
  | "command"
  | "process"
  | "arithmetic"
  | "tilde"
  | "glob"
  | "brace";

export type ShellWord = {
  /** After quote removal; expansions are kept as their source text (`$HOME`, `$(id)`). */
  readonly text: string;
  /** Every expansion in the word, quoted or not. */
  readonly expansions: readonly ExpansionKind[];
};

export type ShellRedirect = {
  /** `>`, `>>`, `<`, `>&`, `<&`, `&>`, `&>>`, `>|`, `<>`, `<<`, `<<-`, `<<<`. */
  readonly op: string;
  /** The descriptor number written before the operator, if any. */
  readonly fd: string | undefined;
  readonly target: ShellWord | undefined;
};

export type SimpleCommand = {
  /** Command word first, then its arguments. Empty for a bare redirection or assignment. */
  readonly words: readonly ShellWord[];
  readonly assignments: readonly ShellWord[];
  readonly redirects: readonly ShellRedirect[];
  /** Commands joined by `|` share a pipeline number; `stage` is the position in it. */
  readonly pipeline: number;
  readonly stage: number;
  /** Inside a command or process substitution. */
  readonly nested: "command" | "process" | undefined;
  /** A clause keyword whose words are not a command (`for`, `case`, `select`, `[[`, `((`, `function`). */
  readonly keyword: string | undefined;
};

export type ShellScan = {
  readonly commands: readonly SimpleCommand[];
  /** Unterminated quotes or substitutions, excessive nesting: the text is not a complete script. */
  readonly problems: readonly string[];
  /** Every expansion kind met anywhere in the script. */
  readonly expansions: ReadonlySet<ExpansionKind>;
};

const maxDepth = 32;

const prefixKeywords = new Set([
  "!",
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "time",
  "{",
  "}",
  "esac",
  "coproc",
]);
const clauseKeywords = new Set(["for", "select", "case", "function"]);

const metaChars = new Set([" ", "\t", "\n", ";", "&", "|", "<", ">", "(", ")"]);

type MutableWord = { text: string; expansions: ExpansionKind[]; quoted: boolean };
type MutableCommand = {
  words: ShellWord[];
  assignments: ShellWord[];
  redirects: ShellRedirect[];
  keyword: string | undefined;
};

type State = {
  readonly src: string;
  i: number;
  depth: number;
  readonly commands: SimpleCommand[];
  readonly problems: string[];
  readonly expansions: Set<ExpansionKind>;
  pipelines: number;
  /** Here-document delimiters waiting for the end of the line. */
  heredocs: { delimiter: string; stripTabs: boolean }[];
};

const redirectPattern = /^(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(<<<|<<-|<<|<>|<&|>>|>&|>\||&>>|&>|<|>)/;

function note(st: State, word: MutableWord, kind: ExpansionKind): void {
  if (!word.expansions.includes(kind)) word.expansions.push(kind);
  st.expansions.add(kind);
}

function problem(st: State, message: string): void {
  if (!st.problems.includes(message)) st.problems.push(message);
}

/** Scans a script. Never throws; problems are reported in the result. */
export function scanShell(source: string): ShellScan {
  return scanAtDepth(source, 0);
}

function scanAtDepth(source: string, depth: number): ShellScan {
  const st: State = {
    src: source,
    i: 0,
    depth,
    commands: [],
    problems: [],
    expansions: new Set(),
    pipelines: 0,
    heredocs: [],
  };
  parseList(st, undefined, undefined);
  return { commands: st.commands, problems: st.problems, expansions: st.expansions };
}

/** Parses commands until the end, or until `closer` (`)`) which is left for the caller. */
function parseList(st: State, closer: ")" | undefined, nested: SimpleCommand["nested"]): void {
  if (++st.depth > maxDepth) {
    problem(st, "nested too deeply to analyse");
    st.i = st.src.length;
    st.depth--;
    return;
  }
  let pipeline = st.pipelines++;
  let stage = 0;
  let current: MutableCommand = { words: [], assignments: [], redirects: [], keyword: undefined };

  const flush = () => {
    const c = current;
    if (c.words.length > 0 || c.assignments.length > 0 || c.redirects.length > 0) {
      st.commands.push({ ...c, pipeline, stage, nested });
    }
    current = { words: [], assignments: [], redirects: [], keyword: undefined };
  };
  const newPipeline = () => {
    flush();
    pipeline = st.pipelines++;
    stage = 0;
  };

  const src = st.src;
  while (st.i < src.length) {
    const c = src[st.i] as string;
    const rest = src.slice(st.i, st.i + 4);
    if (c === " " || c === "\t") {
      st.i++;
      continue;
    }
    if (c === "\\" && src[st.i + 1] === "\n") {
      st.i += 2;
      continue;
    }
    if (c === "#") {
      while (st.i < src.length && src[st.i] !== "\n") st.i++;
      continue;
    }
    if (c === "\n") {
      st.i++;
      newPipeline();
      skipHeredocBodies(st);
      continue;
    }
    if (c === ")") {
      if (closer === ")") {
        flush();
        st.depth--;
        return;
      }
      st.i++; // a `case` pattern's `)`, or stray: a separator
      newPipeline();
      continue;
    }
    if (rest.startsWith("&&") || rest.startsWith("||")) {
      st.i += 2;
      newPipeline();
      continue;
    }
    if (rest.startsWith("|&") || c === "|") {
      st.i += rest.startsWith("|&") ? 2 : 1;
      flush();
      stage++;
      continue;
    }
    if (c === ";" || (c === "&" && !rest.startsWith("&>"))) {
      st.i++;
      newPipeline();
      continue;
    }
    if ((c === "<" || c === ">") && src[st.i + 1] === "(") {
      // Process substitution as a whole word.
      readWordInto(st, current);
      continue;
    }
    const redirect = redirectPattern.exec(src.slice(st.i, st.i + 80));
    if (redirect !== null && (redirect[1] === undefined || isWordStart(st))) {
      st.i += redirect[0].length;
      const op = redirect[2] as string;
      skipBlanks(st);
      const target = atWordEnd(st) ? undefined : readWord(st);
      if (target === undefined) problem(st, `a redirection (${op}) without a target`);
      if ((op === "<<" || op === "<<-") && target !== undefined) {
        st.heredocs.push({ delimiter: target.text, stripTabs: op === "<<-" });
      }
      current.redirects.push({ op, fd: redirect[1], target: target && freeze(target) });
      continue;
    }
    if (c === "(") {
      const atStart = current.words.length === 0 && current.keyword === undefined;
      if (atStart && src[st.i + 1] === "(") {
        // Arithmetic command (( … )): no redirections inside, but substitutions count.
        const word: MutableWord = { text: "", expansions: [], quoted: false };
        st.i += 2;
        readArithmetic(st, word);
        current.keyword = "((";
        current.words.push(freeze(word));
        continue;
      }
      st.i++;
      newPipeline();
      parseList(st, ")", nested);
      if (src[st.i] === ")") st.i++;
      else problem(st, "an unterminated subshell (");
      newPipeline();
      continue;
    }
    readWordInto(st, current);
  }
  if (closer === ")") problem(st, "an unterminated command substitution or subshell");
  flush();
  st.depth--;
}

function isWordStart(st: State): boolean {
  const prev = st.src[st.i - 1];
  return prev === undefined || metaChars.has(prev);
}

function atWordEnd(st: State): boolean {
  const c = st.src[st.i];
  return c === undefined || metaChars.has(c);
}

function skipBlanks(st: State): void {
  while (st.src[st.i] === " " || st.src[st.i] === "\t") st.i++;
}

function freeze(word: MutableWord): ShellWord {
  return { text: word.text, expansions: [...word.expansions] };
}

/** After a newline: skip the bodies of pending here-documents. */
function skipHeredocBodies(st: State): void {
  while (st.heredocs.length > 0) {
    const { delimiter, stripTabs } = st.heredocs.shift() as {
      delimiter: string;
      stripTabs: boolean;
    };
    for (;;) {
      if (st.i >= st.src.length) {
        problem(st, "an unterminated here-document");
        return;
      }
      const end = st.src.indexOf("\n", st.i);
      const line = st.src.slice(st.i, end === -1 ? st.src.length : end);
      st.i = end === -1 ? st.src.length : end + 1;
      if ((stripTabs ? line.replace(/^\t+/, "") : line) === delimiter) break;
    }
  }
}

function readWordInto(st: State, current: MutableCommand): void {
  const word = readWord(st);
  const atStart =
    current.words.length === 0 && current.keyword === undefined && word.expansions.length === 0;
  if (atStart && !word.quoted && prefixKeywords.has(word.text)) return;
  if (atStart && !word.quoted && clauseKeywords.has(word.text)) {
    current.keyword = word.text;
    current.words.push(freeze(word));
    return;
  }
  if (atStart && !word.quoted && word.text === "[[") {
    current.keyword = "[[";
    current.words.push(freeze(word));
    readConditional(st, current);
    return;
  }
  if (
    current.words.length === 0 &&
    current.keyword === undefined &&
    /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(word.text)
  ) {
    current.assignments.push(freeze(word));
    return;
  }
  current.words.push(freeze(word));
}

/** `[[ … ]]`: `<`, `>`, `(`, `)`, `&&`, `||` are operators of the test, not the shell. */
function readConditional(st: State, current: MutableCommand): void {
  const src = st.src;
  for (;;) {
    skipBlanks(st);
    if (st.i >= src.length) {
      problem(st, "an unterminated [[ test");
      return;
    }
    if (
      src.startsWith("]]", st.i) &&
      (st.i + 2 >= src.length || metaChars.has(src[st.i + 2] as string))
    ) {
      st.i += 2;
      current.words.push({ text: "]]", expansions: [] });
      return;
    }
    const c = src[st.i] as string;
    if (c === "\n" || c === "\\") {
      st.i += c === "\\" ? 2 : 1;
      continue;
    }
    if ("<>()".includes(c) || src.startsWith("&&", st.i) || src.startsWith("||", st.i)) {
      const op =
        src.startsWith("&&", st.i) || src.startsWith("||", st.i) ? src.slice(st.i, st.i + 2) : c;
      st.i += op.length;
      current.words.push({ text: op, expansions: [] });
      continue;
    }
    current.words.push(freeze(readWord(st)));
  }
}

/** Reads one word from the current position up to an unquoted metacharacter. */
function readWord(st: State): MutableWord {
  const src = st.src;
  const word: MutableWord = { text: "", expansions: [], quoted: false };
  const start = st.i;
  while (st.i < src.length) {
    const c = src[st.i] as string;
    if ((c === "<" || c === ">") && src[st.i + 1] === "(") {
      st.i += 2;
      const mark = st.i;
      note(st, word, "process");
      parseList(st, ")", "process");
      word.text += `${c}(${src.slice(mark, st.i)})`;
      if (src[st.i] === ")") st.i++;
      else problem(st, "an unterminated process substitution");
      continue;
    }
    if (metaChars.has(c)) {
      // `a=(1 2)`: an array assignment's parentheses belong to the word.
      if (c === "(" && /^[A-Za-z_][A-Za-z0-9_]*\+?=$/.test(word.text)) {
        const mark = st.i;
        skipBalanced(st, word);
        word.text += src.slice(mark, st.i);
        continue;
      }
      break;
    }
    if (c === "\\") {
      if (src[st.i + 1] === "\n") {
        st.i += 2;
        continue;
      }
      word.text += src[st.i + 1] ?? "";
      word.quoted = true;
      st.i += 2;
      continue;
    }
    if (c === "'") {
      word.quoted = true;
      const end = src.indexOf("'", st.i + 1);
      if (end === -1) {
        problem(st, "an unterminated single quote");
        word.text += src.slice(st.i + 1);
        st.i = src.length;
        break;
      }
      word.text += src.slice(st.i + 1, end);
      st.i = end + 1;
      continue;
    }
    if (c === '"') {
      word.quoted = true;
      st.i++;
      readDoubleQuoted(st, word);
      continue;
    }
    if (c === "$") {
      readDollar(st, word, false);
      continue;
    }
    if (c === "`") {
      readBackticks(st, word);
      continue;
    }
    if (c === "~" && st.i === start) note(st, word, "tilde");
    if (c === "*" || c === "?" || (c === "[" && closesBracket(src, st.i))) note(st, word, "glob");
    if (c === "{" && hasBraceExpansion(src, st.i)) note(st, word, "brace");
    word.text += c;
    st.i++;
  }
  return word;
}

/** A `]` later in the same word: `[ab]` is a glob, the `[` and `[[` commands are not. */
function closesBracket(src: string, at: number): boolean {
  for (let j = at + 1; j < src.length; j++) {
    const c = src[j] as string;
    if (metaChars.has(c)) return false;
    if (c === "]") return true;
  }
  return false;
}

/** `{a,b}` or `{1..3}` from this `{` on, before the word ends. */
function hasBraceExpansion(src: string, at: number): boolean {
  let depth = 0;
  for (let j = at; j < src.length; j++) {
    const c = src[j] as string;
    if (metaChars.has(c) || c === "'" || c === '"') return false;
    if (c === "{") depth++;
    else if (c === "}") {
      depth--;
      if (depth === 0) return false;
    } else if (depth === 1 && (c === "," || src.startsWith("..", j))) return true;
  }
  return false;
}

function readDoubleQuoted(st: State, word: MutableWord): void {
  const src = st.src;
  while (st.i < src.length) {
    const c = src[st.i] as string;
    if (c === '"') {
      st.i++;
      return;
    }
    if (c === "\\") {
      const next = src[st.i + 1] ?? "";
      if ('$`"\\\n'.includes(next) && next !== "") {
        if (next !== "\n") word.text += next;
      } else word.text += `\\${next}`;
      st.i += 2;
      continue;
    }
    if (c === "$") {
      readDollar(st, word, true);
      continue;
    }
    if (c === "`") {
      readBackticks(st, word);
      continue;
    }
    word.text += c;
    st.i++;
  }
  problem(st, "an unterminated double quote");
}

function readDollar(st: State, word: MutableWord, inDoubleQuotes: boolean): void {
  const src = st.src;
  const next = src[st.i + 1];
  if (next === "(") {
    if (src[st.i + 2] === "(") {
      const mark = st.i;
      st.i += 3;
      readArithmetic(st, word);
      word.text += src.slice(mark, st.i);
      return;
    }
    const mark = st.i;
    st.i += 2;
    note(st, word, "command");
    parseList(st, ")", "command");
    if (src[st.i] === ")") st.i++;
    else problem(st, "an unterminated command substitution $(");
    word.text += src.slice(mark, st.i);
    return;
  }
  if (next === "{") {
    const mark = st.i;
    st.i += 2;
    note(st, word, "parameter");
    let depth = 1;
    while (st.i < src.length && depth > 0) {
      const c = src[st.i] as string;
      if (c === "\\") st.i += 2;
      else if (c === "'" && !inDoubleQuotes) {
        const end = src.indexOf("'", st.i + 1);
        st.i = end === -1 ? src.length : end + 1;
      } else if (c === '"') {
        st.i++;
        readDoubleQuoted(st, { text: "", expansions: word.expansions, quoted: true });
      } else if (c === "$") readDollar(st, word, inDoubleQuotes);
      else if (c === "`") readBackticks(st, word);
      else {
        if (c === "{") depth++;
        if (c === "}") depth--;
        st.i++;
      }
    }
    if (depth > 0) problem(st, "an unterminated parameter expansion ${");
    word.text += src.slice(mark, st.i);
    return;
  }
  if (!inDoubleQuotes && (next === "'" || next === '"')) {
    // $'…' (ANSI-C quoting) and $"…" (locale quoting).
    word.quoted = true;
    st.i += 2;
    if (next === '"') {
      readDoubleQuoted(st, word);
      return;
    }
    while (st.i < src.length && src[st.i] !== "'") {
      if (src[st.i] === "\\") {
        word.text += src.slice(st.i, st.i + 2);
        st.i += 2;
      } else word.text += src[st.i++];
    }
    if (st.i >= src.length) problem(st, "an unterminated $' quote");
    else st.i++;
    return;
  }
  const name = /^\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])/.exec(src.slice(st.i, st.i + 256));
  if (name !== null) {
    note(st, word, "parameter");
    word.text += name[0];
    st.i += name[0].length;
    return;
  }
  word.text += "$";
  st.i++;
}

/** From after `((` or `$((` to the matching `))`; substitutions inside are scanned. */
function readArithmetic(st: State, word: MutableWord): void {
  note(st, word, "arithmetic");
  const src = st.src;
  let depth = 0;
  while (st.i < src.length) {
    const c = src[st.i] as string;
    if (c === "$") {
      readDollar(st, word, true);
      continue;
    }
    if (c === "`") {
      readBackticks(st, word);
      continue;
    }
    if (c === "(") depth++;
    if (c === ")") {
      if (depth === 0 && src[st.i + 1] === ")") {
        st.i += 2;
        return;
      }
      depth--;
    }
    st.i++;
  }
  problem(st, "an unterminated arithmetic expansion");
}

/** Skips a parenthesised group (array assignment), noting expansions inside. */
function skipBalanced(st: State, word: MutableWord): void {
  const src = st.src;
  let depth = 0;
  while (st.i < src.length) {
    const c = src[st.i] as string;
    if (c === "(") depth++;
    else if (c === ")") {
      depth--;
      if (depth === 0) {
        st.i++;
        return;
      }
    } else if (c === "$") {
      readDollar(st, word, false);
      continue;
    } else if (c === "`") {
      readBackticks(st, word);
      continue;
    } else if (c === "'" || c === '"') {
      const end = src.indexOf(c, st.i + 1);
      st.i = end === -1 ? src.length : end + 1;
      continue;
    }
    st.i++;
  }
  problem(st, "an unterminated array assignment");
}

/** `…` command substitution: the inside is unescaped and scanned as a script of its own. */
function readBackticks(st: State, word: MutableWord): void {
  const src = st.src;
  note(st, word, "command");
  const mark = st.i;
  st.i++;
  let inner = "";
  while (st.i < src.length && src[st.i] !== "`") {
    if (src[st.i] === "\\" && "$`\\".includes(src[st.i + 1] ?? "")) {
      inner += src[st.i + 1];
      st.i += 2;
    } else inner += src[st.i++];
  }
  if (st.i >= src.length) {
    problem(st, "an unterminated backtick substitution");
  } else st.i++;
  word.text += src.slice(mark, st.i);
  if (st.depth >= maxDepth) {
    problem(st, "nested too deeply to analyse");
    return;
  }
  const innerScan = scanAtDepth(inner, st.depth + 1);
  const offset = st.pipelines;
  for (const command of innerScan.commands) {
    st.commands.push({ ...command, pipeline: command.pipeline + offset, nested: "command" });
  }
  st.pipelines += innerScan.commands.length + 1;
  for (const p of innerScan.problems) problem(st, p);
  for (const e of innerScan.expansions) st.expansions.add(e);
}
