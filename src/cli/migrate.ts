// `peergate migrate`: applies pending migrations to the configured database and says which.
import { loadConfig } from "../config.ts";
import { migrateDatabase } from "../db/migrate.ts";
import {
  describeDatabase,
  openConfiguredDatabase,
  resolveDatabaseOptions,
} from "../db/open-configured.ts";
import { type Command, exitCodes } from "./command.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const migrateCommand: Command = {
  words: ["migrate"],
  summary: "apply pending database migrations",
  help: [
    "[--json]",
    "",
    "Applies the migrations in drizzle/ that the configured database does not have yet:",
    "DATABASE_URL if set, otherwise the embedded database in $PEERGATE_DATA_DIR/pg.",
    "Safe to run while other instances start: migrations are applied one instance at a time.",
    "The embedded database can be open in one process only; stop the server first.",
    "",
    "Options:",
    '  --json  print {"applied": n, "migrations": [...], "database": "..."}',
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const config = loadConfig(cli.env, cli.cwd);
    const options = resolveDatabaseOptions(config);
    const where = describeDatabase(options);
    const database = await openConfiguredDatabase(config);
    try {
      const result = await migrateDatabase(database);
      if (args.values.json) {
        cli.io.out(toTerminalJson({ ...result, database: where }));
      } else if (result.applied === 0) {
        cli.io.out(`${where}: up to date, no migrations to apply`);
      } else {
        const noun = result.applied === 1 ? "migration" : "migrations";
        cli.io.out(`${where}: applied ${result.applied} ${noun}`);
        for (const name of result.migrations) cli.io.out(`  ${name}`);
      }
      return exitCodes.ok;
    } finally {
      await database.close();
    }
  },
};
