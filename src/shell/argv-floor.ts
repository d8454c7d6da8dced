// The risk floor for an argv (execute_command, a declared command tool): when the program, after
// any wrappers, is a shell given a script (`sh -c`, `bash -lc`, `env -i bash -c`, `busybox sh -c`,
// `env -S`), the shell floor applies to that script; when it is an interpreter given inline code
// (`python3 -c`, `node -e`, `perl -e`, `ruby -e`, `awk 'prog'`), the code is text the floor cannot
// read, and uncertainty is high-risk. Commands inside the script that hand a script on again
// (`sh -c "bash -c '…'"`) are read the same way, a few levels deep. Pure: the reader is passed in.

import type { Risk } from "./floor.ts";
import { floorShellScan, maxScriptChars, raiseRisk } from "./floor.ts";
import { describeCodeRunner, findInlineScript } from "./programs.ts";
import type { ReadShell } from "./syntax.ts";

export type ArgvRisk = {
  /** The declared level, raised to `high-risk` when any reason was found; never lower. */
  readonly risk: Risk;
  /** Why; empty when the floor does not apply. */
  readonly reasons: readonly string[];
};

const maxNesting = 4;

export type FloorArgvOptions = {
  /**
   * How many leading elements of `argv` the operator fixed (a declared `fixed` tool: program and
   * `args`). When those already fix the code (describeCodeRunner), interpreter code there is the
   * operator's and passes; a fixed shell script still gets the floor (`sh -c '$1'` runs the
   * model's first argument as a command).
   */
  readonly fixedArgs?: number;
};

/** The floor for one argv against its declared level. Never throws. */
export function floorArgv(
  argv: readonly string[],
  declared: Risk,
  read: ReadShell,
  options: FloorArgvOptions = {},
): ArgvRisk {
  const reasons: string[] = [];
  const fixed = options.fixedArgs ?? 0;
  const operatorCode = fixed > 0 && describeCodeRunner(argv.slice(0, fixed)) === undefined;
  collect(argv, read, reasons, 0, operatorCode);
  return {
    risk: reasons.length > 0 ? raiseRisk(declared, "high-risk") : declared,
    reasons: [...new Set(reasons)],
  };
}

function collect(
  argv: readonly string[],
  read: ReadShell,
  reasons: string[],
  depth: number,
  operatorCode = false,
): void {
  const inline = findInlineScript(argv);
  if (inline === undefined) return;
  const where = `${inline.program} ${inline.flag}`;
  if (depth >= maxNesting) {
    reasons.push(`${where}: scripts nested too deeply to analyse`);
    return;
  }
  if (inline.kind === "interpreter") {
    if (operatorCode) return;
    reasons.push(`${where} runs inline code, which the shell floor cannot read`);
    return;
  }
  if (inline.script.length > maxScriptChars) {
    reasons.push(`${where} script longer than ${maxScriptChars} characters, too long to analyse`);
    return;
  }
  const scan = read(inline.script);
  for (const reason of floorShellScan(scan, "read-only").reasons) {
    reasons.push(`${where} script: ${reason}`);
  }
  for (const command of scan.commands) {
    if (command.keyword !== undefined || command.words.some((w) => w.expansions.length > 0)) {
      continue;
    }
    collect(
      command.words.map((w) => w.text),
      read,
      reasons,
      depth + 1,
    );
  }
}
