// `peergate migrate-data`: moves everything peergate keeps between the embedded database and
// PostgreSQL, in either direction (src/services/migrate-data.ts says how and what it refuses).
// A dry run unless --apply: it checks both sides and counts what would be copied.
import path from "node:path";
import { ConfigError } from "../errors.ts";
import { type MigrateDataResult, migrateData, parseDataStore } from "../services/migrate-data.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const migrateDataCommand: Command = {
  words: ["migrate-data"],
  summary: "copy everything (callers, credentials' hashes, runs, tasks, audit) to another database",
  help: [
    "--from <data dir | postgres URL> --to <postgres URL | data dir> [--apply] [--json]",
    "",
    "Copies every table peergate keeps from one database to another: callers with their",
    "credentials' hashes (old tokens keep working; nothing is re-issued), grants, push hosts,",
    "JWT trust, runs, tool calls, tasks and their events, push configs and deliveries, webhook",
    "and JWT id claims, revocations, and the audit trail with its checkpoints, so `peergate",
    "audit verify` passes on the target. Ids, timestamps and sequences are kept.",
    "",
    "A data directory is what PEERGATE_DATA_DIR names (the embedded database is its pg/).",
    "Refused, with the fix named, unless: the source is not served (stop the server: the",
    "embedded database's lock, or a PostgreSQL instance heartbeat younger than 30 s, says it",
    "is); both databases carry this peergate's migrations (`peergate migrate` against the",
    "target first); the target is empty. The copy is one transaction on the target: a failure",
    "leaves it empty. Unchained audit events of the source are chained there first.",
    "The target's server needs the same secret key (PEERGATE_SECRET_KEY or <data dir>/secret-key)",
    'and admin token as the source\'s: docs/operating.md, "Moving to PostgreSQL".',
    "",
    "Options:",
    "  --from X   the database to copy from: a data directory or postgres://…",
    "  --to Y     the empty, migrated database to copy into",
    "  --apply    copy (without it: check both sides and count, change nothing)",
    "  --json     print {apply, from, to, migrations, tables: [{table, source, target}], …}",
  ].join("\n"),
  options: {
    from: { type: "string" },
    to: { type: "string" },
    apply: { type: "boolean" },
    json: { type: "boolean" },
  },
  async run(args, cli) {
    const fromText = args.values.from;
    const toText = args.values.to;
    if (typeof fromText !== "string" || fromText === "") throw new UsageError("--from is required");
    if (typeof toText !== "string" || toText === "") throw new UsageError("--to is required");
    const resolve = (text: string) => {
      const store = parseDataStore(text);
      return store.kind === "pglite"
        ? { kind: "pglite" as const, dataDir: path.resolve(cli.cwd, store.dataDir) }
        : store;
    };
    const json = args.values.json === true;
    // Progress goes beside the answer: to stderr when stdout carries the JSON.
    const progress = (line: string) => (json ? cli.io.err(line) : cli.io.out(line));
    let result: MigrateDataResult;
    try {
      result = await migrateData({
        from: resolve(fromText),
        to: resolve(toText),
        apply: args.values.apply === true,
        onProgress: progress,
      });
    } catch (error) {
      if (json && error instanceof ConfigError) {
        cli.io.out(toTerminalJson({ ok: false, refused: error.problems }));
        return exitCodes.failed;
      }
      throw error;
    }
    if (json) {
      cli.io.out(toTerminalJson({ ok: true, ...result }));
      return exitCodes.ok;
    }
    cli.io.out(`from ${result.from}`);
    cli.io.out(`to   ${result.to}`);
    cli.io.out(`both carry all ${result.migrations} migrations; the target is empty`);
    cli.io.out(
      formatTable(
        result.apply ? ["TABLE", "SOURCE", "TARGET"] : ["TABLE", "ROWS TO COPY"],
        result.tables.map((t) =>
          result.apply
            ? [t.table, String(t.source), String(t.target ?? "-")]
            : [t.table, String(t.source)],
        ),
      ),
    );
    if (!result.apply) {
      if (result.unchainedAudit > 0) {
        cli.io.out(
          `${result.unchainedAudit} audit events are not chained yet: --apply chains them on the source first`,
        );
      }
      cli.io.out("dry run: nothing copied (--apply copies)");
    } else {
      cli.io.out(
        "copied; every table's count matches. Next: point the server at the target (same secret key and admin token), then `peergate audit verify`",
      );
    }
    return exitCodes.ok;
  },
};
