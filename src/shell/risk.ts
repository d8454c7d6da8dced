// The risk floor applied to shell text and to argvs, with the bash reader bound in: the walk
// reads every script a command runs and the pure rules (floor.ts, argv-floor.ts) judge each.
// Synchronous: the reader's grammar was loaded when scan.ts was imported.
import { type ArgvRisk, type FloorArgvOptions, floorArgv, floorScript } from "./argv-floor.ts";
import type { Risk, ShellRiskFloor } from "./floor.ts";
import { scanShell } from "./scan.ts";
import { findCodeRun } from "./walk.ts";

export type { ArgvRisk, FloorArgvOptions } from "./argv-floor.ts";
export type { ShellRiskFloor } from "./floor.ts";

/** The floor for `script` (and every script it runs) against the `declared` level. Never throws. */
export function assessShellRisk(script: string, declared: Risk): ShellRiskFloor {
  const floor = floorScript(script, declared, scanShell);
  return { level: floor.risk, reasons: floor.reasons };
}

/**
 * The floor for one argv (`[program, ...args]`) of execute_command, a declared command tool or a
 * chain stage: every script it runs has the shell floor applied, code it runs that cannot be read
 * is high-risk. `risk` is never below `declared`. For a declared `fixed` tool pass
 * `{ fixedArgs: 1 + args.length }`, so code the operator wrote is not judged as the model's.
 * Never throws.
 */
export function assessArgvRisk(
  argv: readonly string[],
  declared: Risk,
  options: FloorArgvOptions = {},
): ArgvRisk {
  return floorArgv(argv, declared, scanShell, options);
}

/** The first place an argv runs code (walk.ts's findCodeRun, with the reader bound in). */
export function findArgvCodeRun(argv: readonly string[]): string | undefined {
  return findCodeRun(argv, scanShell);
}
