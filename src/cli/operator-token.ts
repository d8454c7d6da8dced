// `peergate operator-token create`: the second credential that granting actions need. It is
// deliberately not available over the admin API — anyone holding the admin token could otherwise
// mint one — so it writes to the database directly: with PostgreSQL at any time, with the
// embedded database only while the server is stopped (the CLI says so if it is running).
import { loadConfig } from "../config.ts";
import { migrateDatabase } from "../db/migrate.ts";
import { openConfiguredDatabase } from "../db/open-configured.ts";
import { createOperatorToken } from "../services/admin-credentials.ts";
import { type Command, exitCodes } from "./command.ts";

export const operatorTokenCreateCommand: Command = {
  words: ["operator-token", "create"],
  summary: "create the operator token (needed, with the admin token, to approve parked runs)",
  help: [
    "[--json]",
    "",
    "Prints a new operator token once and stores only its hash; any previous operator token",
    "stops working. Approving a parked run over HTTP needs this token in the",
    "X-Peergate-Operator-Token header as well as the admin token.",
    "Works directly on the database: with the embedded database, stop the server first.",
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, ctx) {
    const config = loadConfig(ctx.env, ctx.cwd);
    const database = await openConfiguredDatabase(config);
    try {
      await migrateDatabase(database);
      const token = await createOperatorToken({
        ctx: { db: database.db, now: () => new Date() },
        actor: `cli:${ctx.env.USER ?? "operator"}`,
      });
      if (args.values.json) ctx.io.out(JSON.stringify({ operatorToken: token }));
      else {
        ctx.io.out("Operator token (shown once; peergate keeps only its hash):");
        ctx.io.out(`  ${token}`);
        ctx.io.out("Send it as X-Peergate-Operator-Token when approving a parked run.");
      }
      return exitCodes.ok;
    } finally {
      await database.close();
    }
  },
};
