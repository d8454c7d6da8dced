// `peergate callers show <name>`: one caller in full (no secrets).
import { callAdmin } from "./admin-client.ts";
import { nameOf } from "./callers-options.ts";
import { describeCaller } from "./callers-output.ts";
import { type Command, exitCodes } from "./command.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const callersShowCommand: Command = {
  words: ["callers", "show"],
  summary: "show one caller",
  help: "<name> [--json]",
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const result = await callAdmin(cli, "getCaller", { params: { name: nameOf(args) } });
    cli.io.out(args.values.json ? toTerminalJson(result) : describeCaller(result.caller));
    return exitCodes.ok;
  },
};
