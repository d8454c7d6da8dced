// `peergate prune`: what is past its retention, per table family; `--apply` deletes it. Through
// the running server's admin API, so it works while the server holds the embedded database, and
// one prune at a time across the cluster (the server's lock).
import { callAdmin } from "./admin-client.ts";
import { type Command, exitCodes } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const pruneCommand: Command = {
  words: ["prune"],
  summary: "count (or, with --apply, delete) rows past their retention, per table family",
  help: [
    "[--apply] [--operator-token-file F] [--json]",
    "",
    "Counts, per table family (runs, tasks, push-deliveries, webhook-claims, jti-claims, audit),",
    "the rows older than the family's retention (PEERGATE_RETAIN_<FAMILY>_DAYS) that a prune",
    "deletes. Nothing changes without --apply. A row that still guards something is never",
    "counted: a live or parked run, a task with a live run or a pending push, a webhook claim",
    "inside its replay window, a JWT id not long expired. The audit trail is pruned only when",
    "PEERGATE_RETAIN_AUDIT_DAYS is set, under a signed checkpoint (see `peergate audit",
    "checkpoints`). The server also prunes on its own every PEERGATE_PRUNE_INTERVAL_MINUTES.",
    "",
    "  --apply                  delete them (needs the operator token too)",
    ...operatorTokenHelp,
    "  --json                   print the server's answer as JSON",
  ].join("\n"),
  options: { apply: { type: "boolean" }, json: { type: "boolean" }, ...operatorTokenOption },
  async run(args, cli) {
    const apply = args.values.apply === true;
    const result = await callAdmin(cli, "prune", {
      body: { apply },
      headers: apply ? await operatorHeaders(args, cli) : {},
    });
    if (args.values.json) {
      cli.io.out(toTerminalJson(result));
      return exitCodes.ok;
    }
    cli.io.out(
      formatTable(
        ["family", "kept", apply ? "deleted" : "would delete", "older than"],
        result.families.map((f) => [
          f.family,
          f.days === null ? "for ever" : `${f.days} days`,
          f.days === null ? "-" : String(f.rows),
          f.cutoff ?? "-",
        ]),
      ),
    );
    if (result.checkpoint) {
      cli.io.out(`audit checkpoint written at event ${result.checkpoint.seq}`);
    }
    if (!apply) cli.io.out("dry run: nothing deleted (--apply deletes)");
    return exitCodes.ok;
  },
};
