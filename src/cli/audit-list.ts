// `peergate audit`: read the audit trail through the admin API, a page at a time.
import { requestAdmin } from "./admin-client.ts";
import { type Command, exitCodes } from "./command.ts";
import { printListing, queryFromOptions } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

type Event = {
  /** Null while not chained yet. */
  seq: number | null;
  createdAt: string;
  actor: string;
  kind: string;
  subject: string | null;
  data: unknown;
};

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
    "  --subject S   only events about this subject, e.g. caller:<id> or run:<id>",
    "  --json        print {events, next} as JSON",
  ].join("\n"),
  options: {
    after: { type: "string" },
    limit: { type: "string" },
    kind: { type: "string" },
    subject: { type: "string" },
    json: { type: "boolean" },
  },
  async run(args, ctx) {
    const query = queryFromOptions(args.values, ["after", "limit", "kind", "subject"]);
    const result = await requestAdmin<{
      events: Event[];
      next: number | null;
    }>(ctx, "GET", `/audit?${query}`);
    printListing(ctx.io.out, {
      json: args.values.json === true,
      value: result,
      headers: ["SEQ", "TIME", "ACTOR", "KIND", "SUBJECT", "DATA"],
      rows: result.events.map((e) => [
        e.seq === null ? "-" : String(e.seq),
        e.createdAt,
        e.actor,
        e.kind,
        e.subject ?? "-",
        cut(toTerminalJson(e.data), 160),
      ]),
      empty: "no audit events match",
    });
    if (!args.values.json && result.next !== null)
      ctx.io.out(`\nmore: peergate audit --after ${result.next}`);
    return exitCodes.ok;
  },
};
