// Shell text as plain data: what the one bash reader (src/shell/scan.ts, tree-sitter's
// bash grammar) hands to the pure rules — the risk floor, the denylist and the command keys. Types
// only; nothing here parses.

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
  /** Some of the word was quoted or escaped. */
  readonly quoted: boolean;
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
  /** The function whose body holds the command, if any (`f() { f | f & }`). */
  readonly function: string | undefined;
  /**
   * Set when the entry is not a command the shell runs by name: the redirections of a compound
   * statement (`for … done > log`) carry the statement's kind here, and `words` is empty.
   */
  readonly keyword: string | undefined;
};

/** Shape beyond one plain command; any of these means the text is more than one plain command. */
export type ShellStructure =
  | "list"
  | "pipeline"
  | "background"
  | "group"
  | "compound"
  | "function"
  | "comment"
  | "heredoc"
  | "assignment";

/**
 * Text bash evaluates beyond plain expansion: an arithmetic context (`$((…))`, `$[…]`, `((…))`,
 * a `for ((…))` header, a `[[ … -eq … ]]` comparison, a `${x:offset:length}`), an array subscript
 * (`${a[i]}`, `a[i]=`, `[[ -v a[i] ]]`), a prompt expansion (`${x@P}`) or an indirect expansion
 * (`${!x}`). In arithmetic, bash reads a variable's value as an expression and expands a
 * subscript in it, command substitution included, so a name there is code the text does not show.
 */
export type EvaluatedText = {
  readonly kind: "arithmetic" | "subscript" | "prompt" | "indirect";
  readonly text: string;
};

export type ShellScan = {
  readonly commands: readonly SimpleCommand[];
  /** Unterminated quotes or substitutions, text that does not parse, excessive nesting. */
  readonly problems: readonly string[];
  /** Every expansion kind met anywhere in the script. */
  readonly expansions: ReadonlySet<ExpansionKind>;
  /** Every structure met anywhere in the script. */
  readonly structure: ReadonlySet<ShellStructure>;
  /** Every place bash evaluates text as an expression, a name or a prompt. */
  readonly evaluated: readonly EvaluatedText[];
};

/** A reader of shell text: the pure rules receive it, so they never load a parser themselves. */
export type ReadShell = (script: string) => ShellScan;
