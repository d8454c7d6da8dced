// Command keys read by the one bash reader: the pure rules (policy/command-key.ts) with the
// reader bound in, for the approval path, the CLI's `ceiling --command` and the bench.
import { type CommandKeyResult, keyOfArgv, keyOfScript } from "../../policy/command-key.ts";
import { scanShell } from "./shell-scan.ts";

/** The allowlist key of shell text, or no key with the reason. */
export function commandKey(script: string): CommandKeyResult {
  return keyOfScript(script, scanShell);
}

/** The allowlist key of an argv (`[program, ...args]`), or no key with the reason. */
export function argvKey(argv: readonly string[]): CommandKeyResult {
  return keyOfArgv(argv, scanShell);
}
