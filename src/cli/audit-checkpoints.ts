// `peergate audit checkpoints`: the signed checkpoints over pruned prefixes of the audit chain,
// with the public key that checks them, to keep somewhere else (src/db/audit-prune.ts).
import { callAdmin } from "./admin-client.ts";
import { type Command, exitCodes } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const auditCheckpointsCommand: Command = {
  words: ["audit", "checkpoints"],
  summary: "list the signed checkpoints over pruned prefixes of the audit chain",
  help: [
    "[--json]",
    "",
    "Before a prune deletes the oldest audit events, it records a checkpoint: the last pruned",
    "event's seq and hash (the chain's head over what was pruned), how many, and when, signed",
    "(Ed25519) with a key derived from the server's secret key. `audit verify` checks the",
    "retained events against it. --json prints each with the exact text signed and the public",
    "key (a JWK), so a copy kept elsewhere can be checked without the server.",
    "",
    "  --json  print {checkpoints: [{seq, hash, count, createdAt, keyId, signature, signedText}], publicKey}",
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const result = await callAdmin(cli, "listAuditCheckpoints");
    if (args.values.json) {
      cli.io.out(toTerminalJson(result));
      return exitCodes.ok;
    }
    if (result.checkpoints.length === 0) {
      cli.io.out("no checkpoints: the audit chain was never pruned");
      return exitCodes.ok;
    }
    cli.io.out(
      formatTable(
        ["seq", "events", "created", "hash"],
        result.checkpoints.map((c) => [String(c.seq), String(c.count), c.createdAt, c.hash]),
      ),
    );
    return exitCodes.ok;
  },
};
