// The walk over everything one command runs: the command, then each command, script and code
// runs.ts finds in it, recursively, with every script read by the same bash reader. The floor,
// the denylist and the chain check all walk the same way, so what one of them reads the others
// read. A walk too deep to follow, a script too long to read, and a command named by an
// expansion are reported as code it cannot read. Pure: the reader is passed in.
import { maxScriptChars } from "./floor.ts";
import { isShellOrInterpreter, isShellProgram, programName } from "./programs.ts";
import { literal, type Run, readAssignment, readRuns, type Word, wrappers } from "./runs.ts";
import type { ReadShell, ShellScan } from "./syntax.ts";

export type OpaqueRun = Extract<Run, { kind: "opaque" }>;

export type CodeVisitor = {
  /** Every argv the walk reaches, the first one included; `depth` 0 is the first. */
  readonly command?: (words: readonly Word[], via: string, depth: number) => void;
  /** Every bash script the walk reads (`via` says whose: `sh -c`, `eval`, empty for the first). */
  readonly script?: (scan: ShellScan, text: string, via: string, depth: number) => void;
  /** Code the walk cannot read, and why. */
  readonly opaque: (run: OpaqueRun, depth: number) => void;
};

/** How many programs-inside-programs the walk follows before it gives up (and says so). */
export const maxNesting = 8;

function tooDeep(via: string): OpaqueRun {
  return { kind: "opaque", via, reason: "nests commands too deeply to read", inline: false };
}

function walkRun(run: Run, read: ReadShell, visitor: CodeVisitor, depth: number): void {
  if (depth > maxNesting) {
    visitor.opaque(tooDeep(run.via), depth);
    return;
  }
  if (run.kind === "opaque") {
    visitor.opaque(run, depth);
    return;
  }
  if (run.kind === "script") {
    walkScript(run.text, read, visitor, depth, run.via);
    return;
  }
  const first = run.words[0] as Word;
  if (first.expansions.length > 0) {
    visitor.opaque(
      {
        kind: "opaque",
        via: run.via,
        reason: `runs a command whose name is built from an expansion (${first.text.slice(0, 60)})`,
        inline: false,
      },
      depth,
    );
    return;
  }
  walkArgv(run.words, read, visitor, depth, run.via);
}

/** Walks one argv (words after quote removal) and everything it runs. */
export function walkArgv(
  words: readonly Word[],
  read: ReadShell,
  visitor: CodeVisitor,
  depth = 0,
  via = "",
): void {
  visitor.command?.(words, via, depth);
  for (const run of readRuns(words)) walkRun(run, read, visitor, depth + 1);
}

/** Walks one bash script: every command in it, and everything each runs. */
export function walkScript(
  text: string,
  read: ReadShell,
  visitor: CodeVisitor,
  depth = 0,
  via = "",
): void {
  if (text.length > maxScriptChars) {
    visitor.opaque(
      {
        kind: "opaque",
        via: via === "" ? "the script" : `${via} script`,
        reason: `is longer than ${maxScriptChars} characters, too long to read`,
        inline: false,
      },
      depth,
    );
    return;
  }
  const scan = read(text);
  visitor.script?.(scan, text, via, depth);
  for (const command of scan.commands) {
    for (const assignment of command.assignments) {
      for (const run of readAssignment(assignment, "the assignment")) {
        walkRun(run, read, visitor, depth + 1);
      }
    }
    const first = command.words[0];
    // A command named by an expansion is the floor's own rule (floor.ts); its words are unknown.
    if (command.keyword !== undefined || first === undefined || first.expansions.length > 0) {
      continue;
    }
    walkArgv(command.words, read, visitor, depth, via);
  }
}

/** Walks an argv of literal strings (execute_command's, a chain stage's). */
export function walkLiteralArgv(argv: readonly string[], read: ReadShell, visitor: CodeVisitor) {
  walkArgv(argv.map(literal), read, visitor);
}

const maxWrapperDepth = 8;

/**
 * Why an argv whose later arguments someone else appends could run code of their choosing: a
 * wrapper with no program after it (`env`, `xargs`, `sudo`), or a shell or interpreter whose
 * code (`-c script`, `-e code`, a script file) is not already in the argv. Undefined when the
 * code is fixed: appended arguments can then only be the code's own arguments.
 */
export function describeCodeRunner(argv: readonly string[], depth = 0): string | undefined {
  const first = argv[0];
  if (first === undefined || depth > maxWrapperDepth) return undefined;
  const name = programName(first);
  const runs = readRuns(argv.map(literal));
  if (runs.some((r) => r.kind === "script" || (r.kind === "opaque" && r.inline))) return undefined;
  const inner = runs.find((r) => r.kind === "command");
  if (inner !== undefined && inner.kind === "command") {
    return describeCodeRunner(
      inner.words.map((w) => w.text),
      depth + 1,
    );
  }
  if (Object.hasOwn(wrappers, name)) {
    return name === "busybox" || name === "toybox"
      ? `${name} runs whichever program its first argument names`
      : `${name} runs whichever program its arguments name`;
  }
  if (!isShellOrInterpreter(name)) return undefined;
  if (!runs.some((r) => r.kind === "opaque")) return undefined; // a script file
  return isShellProgram(name)
    ? `${name} is a shell and runs any script its arguments give it (-c …)`
    : `${name} is an interpreter and runs any code its arguments give it (-c, -e …)`;
}

/**
 * The first place an argv runs code (a shell's script, an interpreter's code, a command run
 * through a shell), as a phrase for a refusal; undefined when it runs plain programs only.
 */
export function findCodeRun(argv: readonly string[], read: ReadShell): string | undefined {
  let found: string | undefined;
  walkLiteralArgv(argv, read, {
    command: (words, via, depth) => {
      const name = programName(words[0]?.text ?? "");
      if (found === undefined && depth > 0 && isShellOrInterpreter(name)) {
        found = `${via} runs ${name}`;
      }
    },
    script: (_scan, _text, via, depth) => {
      if (found === undefined && depth > 0) found = `${via} runs shell text`;
    },
    opaque: (run) => {
      found ??= `${run.via}: ${run.reason}`;
    },
  });
  if (found === undefined && isShellOrInterpreter(programName(argv[0] ?? ""))) {
    found = `${programName(argv[0] ?? "")} is a shell or an interpreter`;
  }
  return found;
}
