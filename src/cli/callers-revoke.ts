// `peergate callers revoke <name>`: revoke a caller at once, everywhere.
import { callAdmin } from "./admin-client.ts";
import { nameOf } from "./callers-options.ts";
import { type Command, exitCodes } from "./command.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

export const callersRevokeCommand: Command = {
  words: ["callers", "revoke"],
  summary: "revoke a caller at once, everywhere",
  help: [
    "<name> [--reason TEXT] [--json]",
    "",
    "Sets the tier to none, kills every credential, stops the caller's runs in flight and",
    "rejects its parked runs, on every instance sharing the database.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { reason: { type: "string" }, json: { type: "boolean" } },
  async run(args, cli) {
    const result = await callAdmin(cli, "revokeCaller", {
      params: { name: nameOf(args) },
      body: typeof args.values.reason === "string" ? { reason: args.values.reason } : {},
    });
    if (args.values.json) cli.io.out(toTerminalJson(result));
    else
      cli.io.out(
        `revoked ${escapeForTerminal(result.caller.name)}: ${result.credentialsRevoked} credential(s) killed, ${result.waitingRunsRevoked} waiting run(s) ended, ${result.workingRunsStopped} working run(s) stopping`,
      );
    return exitCodes.ok;
  },
};
