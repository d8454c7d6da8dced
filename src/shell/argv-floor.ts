// The risk floor for an argv (execute_command, a declared command tool, a chain stage) and for a
// script: the walk (walk.ts) reaches every script the command runs — a shell's `-c` script behind
// any option, a wrapper's command, `find -exec`, `xargs`, `watch`, `flock -c`, `su -c`, `ssh`'s
// remote command, git settings that hold a command, `eval` and `trap` strings — and the floor
// (floor.ts) applies to each. Code the walk cannot read (an interpreter's inline code, a shell
// language that is not bash, a value only known when it runs, a walk too deep or too long) is a
// reason of its own: uncertainty is high-risk. Pure: the reader is passed in.
import { floorShellScan, type Risk, raiseRisk } from "./floor.ts";
import { literal, readRuns } from "./runs.ts";
import type { ReadShell } from "./syntax.ts";
import { type CodeVisitor, describeCodeRunner, walkArgv, walkScript } from "./walk.ts";

export type ArgvRisk = {
  /** The declared level, raised to `high-risk` when any reason was found; never lower. */
  readonly risk: Risk;
  /** Why; empty when the floor does not apply. */
  readonly reasons: readonly string[];
};

export type FloorArgvOptions = {
  /**
   * How many leading elements of `argv` the operator fixed (a declared `fixed` tool: program and
   * `args`). Inline interpreter code written there is the operator's and passes when those
   * elements already fix the code (describeCodeRunner); a fixed shell script still gets the
   * floor (`sh -c '$1'` runs the model's first argument as a command).
   */
  readonly fixedArgs?: number;
};

function collector(reasons: Set<string>, skip: ReadonlySet<string>): CodeVisitor {
  return {
    script: (scan, _text, via) => {
      for (const reason of floorShellScan(scan, "read-only").reasons) {
        reasons.add(via === "" ? reason : `${via} script: ${reason}`);
      }
    },
    opaque: (run) => {
      const reason = `${run.via}: ${run.reason}`;
      if (!skip.has(reason)) reasons.add(reason);
    },
  };
}

function result(declared: Risk, reasons: Set<string>): ArgvRisk {
  return {
    risk: reasons.size > 0 ? raiseRisk(declared, "high-risk") : declared,
    reasons: [...reasons],
  };
}

/** The floor for one argv against its declared level. Never throws. */
export function floorArgv(
  argv: readonly string[],
  declared: Risk,
  read: ReadShell,
  options: FloorArgvOptions = {},
): ArgvRisk {
  const fixed = options.fixedArgs ?? 0;
  const skip = new Set<string>();
  if (fixed > 0 && describeCodeRunner(argv.slice(0, fixed)) === undefined) {
    // The operator's own inline code, as the fixed prefix alone runs it.
    for (const run of readRuns(argv.slice(0, fixed).map(literal))) {
      if (run.kind === "opaque" && run.inline) skip.add(`${run.via}: ${run.reason}`);
    }
  }
  const reasons = new Set<string>();
  walkArgv(argv.map(literal), read, collector(reasons, skip));
  return result(declared, reasons);
}

/** The floor for shell text (and everything it runs) against its declared level. */
export function floorScript(script: string, declared: Risk, read: ReadShell): ArgvRisk {
  const reasons = new Set<string>();
  walkScript(script, read, collector(reasons, new Set()));
  return result(declared, reasons);
}
