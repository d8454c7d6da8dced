// `peergate admin-token rotate`: the one way to change the cluster's admin token. The server
// issues the new token (it needs the operator token too) and the CLI prints it once; when the CLI
// read the old token from this machine's data directory, it writes the new one there, so this
// machine's CLI and its next start keep working. Other instances keep their old token until the
// grace period ends, then need the new one (in PEERGATE_ADMIN_TOKEN or their own admin-token file).
import { loadConfig } from "../config.ts";
import { adminTokenFile, readSecretFile, replaceSecretFile } from "../secret-files.ts";
import { callAdmin } from "./admin-client.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const adminTokenRotateCommand: Command = {
  words: ["admin-token", "rotate"],
  summary: "issue a new admin token for the cluster; the old one stops now or after --grace",
  help: [
    "[--grace SECONDS] [--operator-token-file F] [--json]",
    "",
    "Issues a new admin token for every instance on this database and prints it once. The old one",
    "stops working now, or after --grace seconds (give the other instances and scripts time to",
    "switch). Needs the operator token as well as the admin token. When the old token came from",
    `this machine's ${adminTokenFile} file, the new one is written there.`,
    "",
    "  --grace SECONDS          how long the old token keeps working (default 0)",
    ...operatorTokenHelp,
    "  --json                   print the server's answer as JSON",
  ].join("\n"),
  options: { grace: { type: "string" }, json: { type: "boolean" }, ...operatorTokenOption },
  async run(args, cli) {
    const grace = args.values.grace === undefined ? 0 : Number(args.values.grace);
    if (!Number.isInteger(grace) || grace < 0 || grace > 30 * 86_400) {
      throw new UsageError(
        `--grace ${JSON.stringify(args.values.grace)}: expected whole seconds from 0 to 2592000 (30 days)`,
      );
    }
    const config = loadConfig(cli.env, cli.cwd);
    const fromFile =
      config.adminToken === undefined
        ? await readSecretFile(config.dataDir, adminTokenFile)
        : undefined;
    const result = await callAdmin(cli, "rotateAdminToken", {
      body: { graceSeconds: grace },
      headers: await operatorHeaders(args, cli),
    });
    const written =
      fromFile !== undefined &&
      (await replaceSecretFile(config.dataDir, adminTokenFile, fromFile, result.token));
    if (args.values.json) {
      cli.io.out(toTerminalJson({ ...result, writtenTo: written ? adminTokenFile : null }));
      return exitCodes.ok;
    }
    cli.io.out(`new admin token (shown once): ${result.token}`);
    cli.io.out(
      grace === 0
        ? "the old admin token stopped working now"
        : `the old admin token works until ${result.oldTokensExpireAt}`,
    );
    cli.io.out(
      written
        ? `written to ${config.dataDir}/${adminTokenFile}`
        : `give it to every instance and script that uses the admin token (PEERGATE_ADMIN_TOKEN, or the ${adminTokenFile} file in each data directory)`,
    );
    return exitCodes.ok;
  },
};
