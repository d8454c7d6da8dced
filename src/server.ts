// Composition root of the server: config → database → migrations → app → listen, and the
// graceful stop in reverse. `peergate serve` (and so `npm start`) runs this.
import path from "node:path";
import { serve } from "@hono/node-server";
import type { Config } from "./config.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { createApp } from "./http/app.ts";
import type { Logger } from "./log.ts";
import { createMetrics } from "./metrics.ts";
import { checkReadiness } from "./services/check-readiness.ts";

export type RunningServer = {
  url: string;
  database: Database;
  /** Stops accepting, waits for in-flight work (cancelling it past the timeout), closes the DB. */
  stop(): Promise<void>;
};

export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const database = await openDatabase(
    config.databaseUrl
      ? { kind: "postgres", url: config.databaseUrl }
      : { kind: "pglite", dataDir: path.join(config.dataDir, "pg") },
  );
  try {
    const { applied } = await migrateDatabase(database);
    logger.info("database ready", { kind: database.kind, migrationsApplied: applied });
  } catch (error) {
    await database.close();
    throw error;
  }

  const metrics = createMetrics();
  const app = createApp({
    logger,
    metrics,
    checkReadiness: () => checkReadiness({ database }),
  });

  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.hono.fetch, hostname: config.host, port: config.port }, () =>
      resolve(s),
    );
    s.once("error", reject);
  }).catch(async (error: unknown) => {
    await database.close();
    throw error;
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  logger.info("listening", { url });

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info("shutting down", { inflight: app.inflight.count });
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      if ("closeIdleConnections" in server) server.closeIdleConnections();
      const drained = await Promise.race([
        app.inflight.drained().then(() => true),
        new Promise<false>((resolve) =>
          setTimeout(resolve, config.shutdownTimeoutMs, false).unref(),
        ),
      ]);
      if (!drained) {
        logger.warn("shutdown timeout: cancelling in-flight requests", {
          inflight: app.inflight.count,
        });
      }
      if ("closeAllConnections" in server) server.closeAllConnections();
      await closed;
      await database.close();
      logger.info("stopped");
    })();
    return stopping;
  };
  return { url, database, stop };
}
