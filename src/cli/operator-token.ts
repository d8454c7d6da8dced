// `peergate operator-token create`: the second credential that granting actions need (approving a
// parked run, widening a caller). It is deliberately not available over the admin API — anyone
// holding the admin token could otherwise mint one. With PostgreSQL it is written to the database
// directly. With the embedded database, which admits one process, it goes through the running
// server's control socket in the data directory (src/control/), or to the database directly when
// no server runs. Either way it needs access to the data directory or the database.
//
// Every verb that may send the operator token imports this file for its option and header: what
// creating one needs (the database, the services, the control socket) is loaded only when
// `operator-token create` runs.
import { readFile } from "node:fs/promises";
import { loadConfig } from "../config.ts";
import { operatorTokenHeader } from "../domain/caller.ts";
import { ConflictError } from "../errors.ts";
import { type CliContext, type Command, exitCodes, type ParsedArgs } from "./command.ts";
import { toTerminalJson } from "./terminal-text.ts";

/** The option every verb that may need the operator token takes. */
export const operatorTokenOption = { "operator-token-file": { type: "string" } } as const;

export const operatorTokenHelp = [
  "  --operator-token-file F  the operator token, read from F (default: PEERGATE_OPERATOR_TOKEN)",
];

/** The operator token from --operator-token-file or PEERGATE_OPERATOR_TOKEN, if given. */
export async function readOperatorToken(
  args: ParsedArgs,
  cli: CliContext,
): Promise<string | undefined> {
  const file = args.values["operator-token-file"];
  if (typeof file === "string") return (await readFile(file, "utf8")).trim();
  return cli.env.PEERGATE_OPERATOR_TOKEN || undefined;
}

/** The request header carrying the operator token, when there is one. */
export async function operatorHeaders(
  args: ParsedArgs,
  cli: CliContext,
): Promise<Record<string, string>> {
  const token = await readOperatorToken(args, cli);
  return token ? { [operatorTokenHeader.toLowerCase()]: token } : {};
}

class OperatorTokenExistsError extends Error {
  readonly code = "operator-token-exists";
}

async function createDirectly(
  cli: CliContext,
  force: boolean,
  actor: `cli:${string}`,
): Promise<{ token: string; replaced: boolean }> {
  const config = loadConfig(cli.env, cli.cwd);
  const [
    { migrateDatabase },
    { openConfiguredDatabase },
    { createOperatorToken, hasOperatorToken },
  ] = await Promise.all([
    import("../db/migrate.ts"),
    import("../db/open-configured.ts"),
    import("../services/admin-credentials.ts"),
  ]);
  const database = await openConfiguredDatabase(config);
  try {
    await migrateDatabase(database);
    const replaced = await hasOperatorToken(database.db);
    const token = await createOperatorToken({
      services: { db: database.db, now: () => new Date() },
      actor,
      replace: force,
    });
    return { token, replaced };
  } catch (error) {
    if (error instanceof ConflictError) throw new OperatorTokenExistsError(error.message);
    throw error;
  } finally {
    await database.close();
  }
}

export const operatorTokenCreateCommand: Command = {
  words: ["operator-token", "create"],
  summary:
    "create the operator token (approvals and widening callers need it with the admin token)",
  help: [
    "[--force] [--json]",
    "",
    "Prints a new operator token once and stores only its hash. Approving a parked run, and every",
    "change that widens what a caller may do (a higher tier, new allow entries, a milder approval",
    "policy, larger or removed budgets, a restore, a new caller with a tier above public, allow",
    "entries or budgets above the defaults, a new credential for such a caller) need it in the",
    `${operatorTokenHeader} header as well as the admin token; the CLI sends it from`,
    "PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
    "",
    "It is never offered over HTTP. With PostgreSQL (DATABASE_URL) it is written to the database.",
    "With the embedded database it goes through the running server's control socket",
    "(<data dir>/control.sock, owner-only), or to the database itself when no server runs.",
    "",
    "Options:",
    "  --force  replace an existing operator token: the old one stops working at once",
    "  --json   print {operatorToken, replaced} as JSON",
  ].join("\n"),
  options: { force: { type: "boolean" }, json: { type: "boolean" } },
  async run(args, cli) {
    const config = loadConfig(cli.env, cli.cwd);
    const force = args.values.force === true;
    const user = (cli.env.USER ?? "operator").replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64);
    let created: { token: string; replaced: boolean } | undefined;
    try {
      if (!config.databaseUrl) {
        const { requestControl } = await import("../control/request-control.ts");
        const answer = await requestControl(config.dataDir, {
          verb: "operator-token.create",
          force,
          user,
        });
        if (answer?.ok === false) {
          if (answer.code === "exists") throw new OperatorTokenExistsError(answer.message);
          throw new Error(`the server refused: ${answer.message}`);
        }
        if (answer?.ok && answer.verb === "operator-token.create") {
          created = { token: answer.operatorToken, replaced: answer.replaced };
        }
      }
      created ??= await createDirectly(cli, force, `cli:${user}`);
    } catch (error) {
      if (!(error instanceof OperatorTokenExistsError)) throw error;
      cli.io.err(
        "peergate operator-token create: an operator token exists already. Creating a new one makes the old one stop working at once; run again with --force to do that.",
      );
      return exitCodes.failed;
    }
    if (args.values.json) {
      cli.io.out(toTerminalJson({ operatorToken: created.token, replaced: created.replaced }));
      return exitCodes.ok;
    }
    cli.io.out("Operator token (shown once; peergate keeps only its hash):");
    cli.io.out(`  ${created.token}`);
    if (created.replaced) cli.io.out("The previous operator token no longer works.");
    cli.io.out(
      `Send it as ${operatorTokenHeader} (the CLI: PEERGATE_OPERATOR_TOKEN or --operator-token-file) to approve parked runs and to widen callers. Keep it out of the server's environment.`,
    );
    return exitCodes.ok;
  },
};
