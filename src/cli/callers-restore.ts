// `peergate callers restore <name>`: bring a revoked caller back with a new credential, printed
// once.
import { type AdminRequestBody, callAdmin } from "./admin-client.ts";
import { nameOf } from "./callers-options.ts";
import { describeCaller, printCredential } from "./callers-output.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenOption } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const callersRestoreCommand: Command = {
  words: ["callers", "restore"],
  summary: "bring a revoked caller back with a new credential",
  help: [
    "<name> --tier T [--allow a,b] [--operator-token-file F] [--json]",
    "",
    "Sets the tier and issues a new credential (old ones stay dead). The caller comes back with",
    "the allow list given here and no command allowlist: what it was allowed before it was",
    "revoked is not brought back. A restore always widens, so it needs the operator token as",
    "well as the admin token: PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: {
    tier: { type: "string" },
    allow: { type: "string", multiple: true },
    json: { type: "boolean" },
    ...operatorTokenOption,
  },
  async run(args, cli) {
    if (typeof args.values.tier !== "string")
      throw new UsageError("--tier is required: public, internal or private");
    const result = await callAdmin(cli, "restoreCaller", {
      params: { name: nameOf(args) },
      body: {
        tier: args.values.tier,
        allow: (Array.isArray(args.values.allow) ? args.values.allow : [])
          .flatMap((a) => String(a).split(","))
          .map((a) => a.trim())
          .filter((a) => a !== ""),
      } as AdminRequestBody<"restoreCaller">,
      headers: await operatorHeaders(args, cli),
    });
    if (args.values.json) cli.io.out(toTerminalJson(result));
    else {
      cli.io.out(`restored ${describeCaller(result.caller)}`);
      printCredential(cli, result.credential);
    }
    return exitCodes.ok;
  },
};
