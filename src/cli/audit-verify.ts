// `peergate audit verify`: walks the audit hash chain and reports the first broken link.
import { loadConfig } from "../config.ts";
import { verifyAuditChain } from "../db/audit.ts";
import { openDatabase } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import { describeDatabase, resolveDatabaseOptions } from "../db/open-configured.ts";
import { type Command, exitCodes } from "./command.ts";

export const auditVerifyCommand: Command = {
  words: ["audit", "verify"],
  summary: "check the audit trail's hash chain for edits and gaps",
  help: [
    "[--json]",
    "",
    "Walks every audit event in order and checks that each one's hash matches its content and",
    "the hash of the event before it. Exits 0 when the chain is intact, 1 naming the first",
    "broken event otherwise (edited, deleted, reordered or inserted).",
    "The embedded database can be open in one process only; stop the server first.",
    "",
    "Options:",
    '  --json  print the result as JSON: {"ok": true, "count", "lastHash"} or',
    '          {"ok": false, "seq", "reason", "problem"}',
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, ctx) {
    const config = loadConfig(ctx.env, ctx.cwd);
    const options = resolveDatabaseOptions(config);
    const database = await openDatabase(options);
    try {
      const status = await migrationStatus(database);
      if (status.pending.length > 0) {
        ctx.io.err(
          `peergate audit verify: ${describeDatabase(options)} is not migrated ` +
            `(${status.pending.length} pending); run \`peergate migrate\` first`,
        );
        return exitCodes.failed;
      }
      const result = await verifyAuditChain(database.db);
      if (args.values.json) {
        ctx.io.out(JSON.stringify(result));
      } else if (result.ok) {
        ctx.io.out(`audit chain intact: ${result.count} events (last hash ${result.lastHash})`);
      } else {
        ctx.io.err(`audit chain BROKEN at event ${result.seq}: ${result.problem}`);
      }
      return result.ok ? exitCodes.ok : exitCodes.failed;
    } finally {
      await database.close();
    }
  },
};
