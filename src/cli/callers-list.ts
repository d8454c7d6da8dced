// `peergate callers list`: one line per caller; `--json` prints exactly what the API returned.
import { quoteUntrusted } from "../policy/quote.ts";
import { callAdmin } from "./admin-client.ts";
import { type Command, exitCodes } from "./command.ts";
import { printListing } from "./format-table.ts";

export const callersListCommand: Command = {
  words: ["callers", "list"],
  summary: "list callers",
  help: "[--json]\n\nOne line per caller: name, kind, tier, state, allow list, active credentials.",
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const { callers } = await callAdmin(cli, "listCallers");
    printListing(cli.io.out, {
      json: args.values.json === true,
      value: { callers },
      headers: ["NAME", "KIND", "TIER", "STATE", "ALLOW", "CREDENTIALS"],
      rows: callers.map((c) => [
        c.name,
        c.kind,
        c.tier,
        c.revoked ? "revoked" : "active",
        c.allow.length ? c.allow.map((a) => quoteUntrusted(a)).join(",") : "-",
        c.credentials
          .filter((k) => k.active)
          .map((k) => k.prefix)
          .join(",") || "-",
      ]),
      empty: "no callers yet; add one with `peergate callers add <name> --kind peer`",
    });
    return exitCodes.ok;
  },
};
