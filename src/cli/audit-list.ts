// `peergate audit`: read the audit trail through the admin API, a page at a time.
import { isUuid, runStatuses } from "../domain/run.ts";
import { callAdmin, createAdminClient } from "./admin-client.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { printListing, queryFromOptions } from "./format-table.ts";
import { escapeForTerminal } from "./terminal-text.ts";

/** Every kind of event peergate writes (test/cli/runs-and-audit.test.ts keeps this complete). */
export const auditKinds: readonly string[] = [
  "admin-token.created",
  "admin-token.rotated",
  "operator-token.created",
  "auth.failed",
  "caller.created",
  "caller.updated",
  "caller.revoked",
  "caller.restored",
  "caller.rotated",
  "caller.deleted",
  "retention.pruned",
  "webhook.accepted",
  "webhook.ignored",
  "webhook.refused",
  "tool.called",
  "tool.refused",
  "tool.declined",
  "tool.stage",
  "run.started",
  "run.parked",
  "run.approved",
  "run.call-rejected",
  "run.cancel-requested",
  "run.answer-refused",
  "run.notified",
  "run.input-answered",
  "caller.push-hosts.changed",
  "push.config.set",
  "push.config.deleted",
  "push.delivered",
  "push.failed",
  ...runStatuses.map((status) => `run.${status}`),
].filter((kind, i, all) => all.indexOf(kind) === i);

/** The shell words that repeat this listing's filters (for the "more" hint). */
const shellWord = (text: string) =>
  /^[A-Za-z0-9_.:@=,/-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;

const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

export const auditListCommand: Command = {
  words: ["audit"],
  summary: "list audit events (see also: audit verify)",
  help: [
    "[--after SEQ] [--limit N] [--kind K] [--subject S] [--json]",
    "",
    "Prints audit events in order, oldest first, from the running server's admin API.",
    "",
    "Options:",
    "  --after SEQ   events after this sequence number (default 0)",
    "  --limit N     at most N events (default 100, at most 1000)",
    "  --kind K      only events of this kind, e.g. caller.revoked or auth.failed",
    "  --subject S   only events about this subject: caller:<name or id>, run:<id>, credential:<id>",
    "  --json        print {events, next} as JSON",
  ].join("\n"),
  options: {
    after: { type: "string" },
    limit: { type: "string" },
    kind: { type: "string" },
    subject: { type: "string" },
    json: { type: "boolean" },
  },
  async run(args, cli) {
    const client = await createAdminClient(cli);
    const kind = typeof args.values.kind === "string" ? args.values.kind : undefined;
    if (kind !== undefined && !auditKinds.includes(kind)) {
      throw new UsageError(
        `--kind ${JSON.stringify(kind)}: not a kind of audit event; one of ${auditKinds.join(", ")}`,
      );
    }
    // Events name a caller by id; an operator knows its name.
    let subject = typeof args.values.subject === "string" ? args.values.subject : undefined;
    const callerName = subject?.startsWith("caller:") ? subject.slice("caller:".length) : undefined;
    if (callerName !== undefined && !isUuid(callerName)) {
      const { caller } = await callAdmin(
        cli,
        "getCaller",
        { params: { name: callerName } },
        client,
      );
      subject = `caller:${caller.id}`;
    }
    const query = queryFromOptions({ ...args.values, subject }, [
      "after",
      "limit",
      "kind",
      "subject",
    ]);
    const result = await callAdmin(cli, "listAudit", { query: Object.fromEntries(query) }, client);
    printListing(cli.io.out, {
      json: args.values.json === true,
      value: result,
      headers: ["SEQ", "TIME", "ACTOR", "KIND", "SUBJECT", "DATA"],
      rows: result.events.map((e) => [
        e.seq === null ? "-" : String(e.seq),
        e.createdAt,
        e.actor,
        e.kind,
        e.subject ?? "-",
        // Plain JSON: the table escapes each cell for the terminal once.
        cut(JSON.stringify(e.data) ?? "null", 160),
      ]),
      empty: "no audit events match",
    });
    if (!args.values.json && result.next !== null) {
      const again = ["limit", "kind", "subject"].flatMap((key) => {
        const value = args.values[key];
        return typeof value === "string" ? [`--${key} ${shellWord(value)}`] : [];
      });
      cli.io.out(
        `\nmore: ${escapeForTerminal(["peergate audit", ...again, `--after ${result.next}`].join(" "))}`,
      );
    }
    return exitCodes.ok;
  },
};
