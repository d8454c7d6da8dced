// The risk floor applied to shell text: reads the script once with the bash reader and hands the
// plain data to the pure floor (policy/shell-floor.ts). Synchronous: the reader's grammar was
// loaded when shell-scan.ts was imported.
import {
  floorShellScan,
  floorTooLong,
  maxScriptChars,
  type ShellRiskFloor,
} from "../../policy/shell-floor.ts";
import type { Risk } from "../../policy/tools.ts";
import { scanShell } from "./shell-scan.ts";

export type { ShellRiskFloor } from "../../policy/shell-floor.ts";

/** The floor for `script` against the `declared` level. Never throws. */
export function assessShellRisk(script: string, declared: Risk): ShellRiskFloor {
  if (script.length > maxScriptChars) return floorTooLong(declared);
  return floorShellScan(scanShell(script), declared);
}
