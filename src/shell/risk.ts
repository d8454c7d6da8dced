// The risk floor applied to shell text and to argvs: reads the text once with the bash reader
// and hands the plain data to the pure rules (floor.ts, argv-floor.ts).
// Synchronous: the reader's grammar was loaded when shell-scan.ts was imported.
import { type ArgvRisk, type FloorArgvOptions, floorArgv } from "./argv-floor.ts";
import type { Risk } from "./floor.ts";
import { floorShellScan, floorTooLong, maxScriptChars, type ShellRiskFloor } from "./floor.ts";
import { scanShell } from "./scan.ts";

export type { ArgvRisk, FloorArgvOptions } from "./argv-floor.ts";
export type { ShellRiskFloor } from "./floor.ts";

/** The floor for `script` against the `declared` level. Never throws. */
export function assessShellRisk(script: string, declared: Risk): ShellRiskFloor {
  if (script.length > maxScriptChars) return floorTooLong(declared);
  return floorShellScan(scanShell(script), declared);
}

/**
 * The floor for one argv (`[program, ...args]`) of execute_command or a declared command tool:
 * a shell given a script has the shell floor applied to it, an interpreter given inline code is
 * high-risk. `risk` is never below `declared`. For a declared `fixed` tool pass
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
