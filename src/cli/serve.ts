// `peergate serve`: start the server and run until SIGINT/SIGTERM, then stop gracefully.
import { loadConfig } from "../config.ts";
import { createLogger } from "../log.ts";
import { startServer } from "../server.ts";
import type { Command } from "./command.ts";

export const serveCommand: Command = {
  words: ["serve"],
  summary: "run the peergate server (what `npm start` runs)",
  help: `[options]

Starts the HTTP server with the embedded database in <data dir>/pg, or the PostgreSQL server
named by DATABASE_URL, applying pending migrations first. Stops gracefully on SIGINT/SIGTERM.
Configuration comes from the environment (see README.md): PEERGATE_HOST, PEERGATE_PORT,
PEERGATE_DATA_DIR, DATABASE_URL, PEERGATE_POLICIES_DIR, PEERGATE_LOG_LEVEL.
Logs are JSON lines on standard output.`,
  async run(_args, ctx) {
    const config = loadConfig(ctx.env, ctx.cwd);
    const logger = createLogger({ level: config.logLevel, write: ctx.io.out });
    const server = await startServer(config, logger, ctx.env);
    await new Promise<void>((resolve) => {
      if (ctx.signal.aborted) resolve();
      ctx.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    await server.stop();
    return 0;
  },
};
