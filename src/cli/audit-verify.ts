// `peergate audit verify`: walks the audit hash chain and reports the first broken link.
import { type Config, loadConfig } from "../config.ts";
import { verifyAuditChain } from "../db/audit.ts";
import { openDatabase } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import { describeDatabase, resolveDatabaseOptions } from "../db/open-configured.ts";
import { UnavailableError } from "../errors.ts";
import { readSecretFile, secretKeyFile } from "../secret-files.ts";
import { checkpointKeyFromSecret } from "../services/prune-tables.ts";
import { type AdminResponse, ApiError, callAdmin } from "./admin-client.ts";
import { type CliContext, type Command, exitCodes } from "./command.ts";
import { toTerminalJson } from "./terminal-text.ts";

/**
 * The key that checks audit checkpoints: derived from the server's secret key (PEERGATE_SECRET_KEY
 * or the data directory's file), never created here. Without one, a pruned chain fails closed.
 */
async function checkpointKey(config: Config) {
  return checkpointKeyFromSecret(
    config.secretKey ?? (await readSecretFile(config.dataDir, secretKeyFile)),
  );
}

/** Progress on stderr, once a second, for a walk that takes longer than that. */
function progressReporter(cli: CliContext) {
  const started = performance.now();
  let lastAt = started;
  return (verified: number, total: number) => {
    const now = performance.now();
    if (now - lastAt < 1_000) return;
    lastAt = now;
    const rate = Math.round(verified / ((now - started) / 1_000));
    cli.io.err(`verified ${verified} of ${total} events (${rate}/s)`);
  };
}

function report(result: AdminResponse<"verifyAudit">, json: boolean, cli: CliContext): number {
  if (json) {
    cli.io.out(toTerminalJson(result));
  } else if (result.ok) {
    cli.io.out(`audit chain intact: ${result.count} events (last hash ${result.lastHash})`);
    if (result.checkpoint) {
      cli.io.out(
        `events 1 to ${result.checkpoint.seq} were pruned; the rest verified from their signed checkpoint of ${result.checkpoint.createdAt}`,
      );
    }
  } else {
    cli.io.err(`audit chain BROKEN at event ${result.seq}: ${result.problem}`);
  }
  // Older servers (asked through the admin API) do not report the tail.
  const tail = result.unchained;
  if (!json && tail && tail.count > 0) {
    cli.io.out(
      `${tail.count} committed events not chained yet (oldest ${tail.oldestAgeMs} ms old): ` +
        "an older transaction is still open, or no chainer is running",
    );
  }
  return result.ok ? exitCodes.ok : exitCodes.failed;
}

export const auditVerifyCommand: Command = {
  words: ["audit", "verify"],
  summary: "check the audit trail's hash chain for edits and gaps",
  help: [
    "[--json]",
    "",
    "Walks every audit event in order and checks that each one's hash matches its content and",
    "the hash of the event before it. Exits 0 when the chain is intact, 1 naming the first",
    "broken event otherwise (edited, deleted, reordered, inserted or linked twice). Events are",
    "chained shortly after they commit; verify first chains what is committed, and reports any",
    "committed events it could not chain yet (an older transaction still open) as the unchained",
    "tail.",
    "Once the oldest events were pruned (PEERGATE_RETAIN_AUDIT_DAYS), the walk starts from the",
    "signed checkpoint over them (`peergate audit checkpoints`): the checkpoint's signature is",
    "checked with the server's secret key, and the first kept event must follow it. The walk",
    "reads the chain in batches (memory stays flat) and reports progress on stderr each second.",
    "Reads the database directly; when the embedded database is held by a running server, asks",
    "that server (PEERGATE_URL, admin token) instead.",
    "",
    "Options:",
    '  --json  print the result as JSON: {"ok": true, "count", "lastHash", "unchained",',
    '          "checkpoint"?} or',
    '          {"ok": false, "seq", "reason", "problem", "unchained"}, where unchained is',
    '          {"count", "oldestAgeMs"}',
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const config = loadConfig(cli.env, cli.cwd);
    const options = resolveDatabaseOptions(config);
    let database: Awaited<ReturnType<typeof openDatabase>>;
    try {
      database = await openDatabase(options);
    } catch (error) {
      // The embedded database is held by a running server: ask that server instead.
      if (!(error instanceof UnavailableError) || options.kind !== "pglite") throw error;
      const result = await callAdmin(cli, "verifyAudit").catch((apiError: unknown) => {
        if (apiError instanceof ApiError && apiError.status === 409) {
          return apiError.body as AdminResponse<"verifyAudit">;
        }
        throw apiError;
      });
      return report(result, args.values.json === true, cli);
    }
    try {
      const status = await migrationStatus(database);
      if (status.pending.length > 0) {
        cli.io.err(
          `peergate audit verify: ${describeDatabase(options)} is not migrated ` +
            `(${status.pending.length} pending); run \`peergate migrate\` first`,
        );
        return exitCodes.failed;
      }
      const result = await verifyAuditChain(database.db, {
        checkpointKey: await checkpointKey(config),
        onProgress: progressReporter(cli),
      });
      return report(result, args.values.json === true, cli);
    } finally {
      await database.close();
    }
  },
};
