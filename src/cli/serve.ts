// `peergate serve`: start the server and run until SIGINT/SIGTERM, then stop gracefully.
import { flushCompileCache } from "node:module";
import { loadConfig } from "../config.ts";
import { createLogger } from "../log.ts";
import type { Command } from "./command.ts";
import { recordServerUrl } from "./server-url.ts";
import { notifyServiceManager } from "./service-manager.ts";

export const serveCommand: Command = {
  words: ["serve"],
  summary: "run the peergate server (what `npm start` runs)",
  help: `[options]

Starts the HTTP server with the embedded database in <data dir>/pg, or the PostgreSQL server
named by DATABASE_URL, applying pending migrations first. Stops gracefully on SIGINT/SIGTERM.
Configuration comes from the environment (see README.md): PEERGATE_HOST, PEERGATE_PORT,
PEERGATE_DATA_DIR, DATABASE_URL, PEERGATE_POLICIES_DIR, PEERGATE_LOG_LEVEL.
Logs are JSON lines on standard output. After start, the checks of \`peergate doctor\` run once
and each problem they find is logged as a warning (one tiny model call included).

Files are created owner-only (umask 077). A data directory that group or others can reach is
made 0700 at start, and logged. With the embedded database the server listens on a control
socket, <data dir>/control.sock (0600), so \`peergate operator-token create\` works while it runs;
it is never reachable over HTTP. Do not give the server PEERGATE_OPERATOR_TOKEN: it never needs
it, and what a server holds a tool may come to read.

The URL it listens on is written to <data dir>/server-url while it runs, so the CLI on the same
machine finds it on any port without PEERGATE_URL. Under systemd (NOTIFY_SOCKET set, a unit of
Type=notify) it reports READY=1 once it listens and STOPPING=1 when it begins to stop.`,
  async run(_args, cli) {
    const config = loadConfig(cli.env, cli.cwd);
    const logger = createLogger({ level: config.logLevel, write: cli.io.out });
    if (cli.env.PEERGATE_OPERATOR_TOKEN) {
      logger.warn(
        "PEERGATE_OPERATOR_TOKEN is set in the server's environment: the server never needs it, and a process it starts may read it; keep it with the operator's CLI only",
        {},
      );
    }
    // The first line at once: loading the server's modules is the first slow step.
    logger.info("starting: loading the server", { pid: process.pid });
    const [{ startServer }, { logDoctorFindings }] = await Promise.all([
      import("../server.ts"),
      import("../services/doctor.ts"),
    ]);
    const server = await startServer(config, logger, cli.env);
    const forgetUrl = await recordServerUrl(config.dataDir, server.url);
    // What was compiled to get here, written to Node's compile cache now rather than at exit
    // (src/main.ts): the next start reads it even if this process never exits cleanly.
    flushCompileCache();
    await notifyServiceManager(
      cli.env,
      { state: "ready", status: `listening on ${server.url}` },
      logger,
    );
    // What `peergate doctor` would say, as warnings: an unpriced model, a model that does not
    // answer, a missing operator token, a secret key that cannot open the sealed secrets.
    const checked = logDoctorFindings({
      config,
      database: server.database,
      logger,
      modelTimeoutMs: 10_000,
    });
    await new Promise<void>((resolve) => {
      if (cli.signal.aborted) resolve();
      cli.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    await notifyServiceManager(cli.env, { state: "stopping", status: "stopping" }, logger);
    await checked;
    await forgetUrl();
    await server.stop();
    return 0;
  },
};
