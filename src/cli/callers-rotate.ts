// `peergate callers rotate <name>`: issue a new credential, printed once; the old ones die now or
// after --grace.
import { callAdmin } from "./admin-client.ts";
import { nameOf } from "./callers-options.ts";
import { printCredential } from "./callers-output.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenOption } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const callersRotateCommand: Command = {
  words: ["callers", "rotate"],
  summary: "issue a new credential; the old one dies now or after --grace",
  help: [
    "<name> [--grace SECONDS] [--operator-token-file F] [--json]",
    "",
    "Issues a new credential; the old ones die now, or after --grace seconds. The new credential",
    "carries the caller's authority, so for a caller above the floor (a tier above public, allow",
    "entries or budgets above the defaults) it needs the operator token as well as the admin",
    "token: PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { grace: { type: "string" }, json: { type: "boolean" }, ...operatorTokenOption },
  async run(args, cli) {
    const grace = args.values.grace === undefined ? 0 : Number(args.values.grace);
    if (!Number.isInteger(grace) || grace < 0)
      throw new UsageError(
        `--grace ${JSON.stringify(args.values.grace)}: expected whole seconds ≥ 0`,
      );
    const result = await callAdmin(cli, "rotateCredential", {
      params: { name: nameOf(args) },
      body: { graceSeconds: grace },
      headers: await operatorHeaders(args, cli),
    });
    if (args.values.json) cli.io.out(toTerminalJson(result));
    else {
      cli.io.out(
        grace === 0
          ? "old credentials revoked now"
          : `old credentials work until ${result.oldCredentialsExpireAt}`,
      );
      printCredential(cli, result.credential);
    }
    return exitCodes.ok;
  },
};
