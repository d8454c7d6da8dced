// The server: the core (src/core.ts) with HTTP in front of it, and gRPC beside HTTP when
// PEERGATE_GRPC_PORT is set. `startServer` opens the core, which asks for the ports once its
// database is ready, puts the app (and the gRPC service) in place, and stops in reverse: stop
// accepting on both, drain in-flight requests and calls, close the core. Past the drain timeout
// the runs are stopped first (each ends `interrupted`), so a request waiting on one — a blocking
// SendMessage, a stream — is answered with its task's state instead of cut off with no reply;
// open streams that follow a waiting task end; then whatever is left is cancelled. `peergate
// serve` (and so `npm start`) runs this. Nothing below this file and src/core.ts
// reads the environment or the data directory's secret files.
import { readFileSync } from "node:fs";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { createGrpcListener } from "./a2a/grpc-listener.ts";
import type { Config } from "./config.ts";
import { type Core, type CoreOptions, type Listening, openCore } from "./core.ts";
import type { Database } from "./db/client.ts";
import { createApp } from "./http/app.ts";
import { consoleRoutes } from "./http/console/routes.ts";
import { authenticateA2aCaller, requireA2aCaller } from "./http/middleware/a2a-auth.ts";
import { defaultMaxBodyBytes } from "./http/middleware/limit-body.ts";
import { a2aRoutes } from "./http/routes/a2a.ts";
import type { Logger } from "./log.ts";
import { createEventLoopLag, createMetrics, type EventLoopLag } from "./metrics.ts";
import { checkReadiness } from "./services/check-readiness.ts";
import type { ServiceContext } from "./services/context.ts";

export type RunningServer = {
  url: string;
  /** `host:port` of the gRPC binding as bound, when PEERGATE_GRPC_PORT is set. */
  grpcAddress: string | undefined;
  database: Database;
  services: ServiceContext;
  /** The app being served (its `routes` are what the security suite checks for coverage). */
  hono: Hono;
  /** Stops accepting, waits for in-flight work (cancelling it past the timeout), closes the DB. */
  stop(): Promise<void>;
};

/**
 * How long a client may take to send a request. Without explicit limits Node waits 60 s for
 * headers and 300 s for the whole request, and looks only every 30 s: a client trickling a body
 * (slowloris) holds a connection, and the handler waiting for that body, for minutes. The clock
 * stops once the request has arrived, so long SSE responses are not affected. 30 s still lets
 * GitHub deliver its largest (25 MB) payloads.
 */
export type ClientTimeouts = {
  /** Until the request's headers have arrived. */
  readonly headersMs: number;
  /** Until the whole request, body included, has arrived (answered 408 past it). */
  readonly requestMs: number;
  /** How often connections are checked against the two limits above. */
  readonly checkIntervalMs: number;
};

export const defaultClientTimeouts: ClientTimeouts = {
  headersMs: 10_000,
  requestMs: 30_000,
  checkIntervalMs: 1_000,
};

/** Failed authentications allowed per source address (and per claimed caller name). */
export const defaultAuthThrottle = { maxFailures: 20, windowMs: 60_000 } as const;

/** What tests may change about a server; `peergate serve` uses the defaults. */
export type StartServerOptions = {
  readonly authThrottle?: { readonly maxFailures: number; readonly windowMs: number };
  readonly clientTimeouts?: ClientTimeouts;
  /** The run engine's heartbeat period (CoreOptions.runHeartbeatMs). */
  readonly runHeartbeatMs?: number;
  /** What the instance hears of notifications (CoreOptions.wrapNotifications). */
  readonly wrapNotifications?: CoreOptions["wrapNotifications"];
};

type HttpServer = ReturnType<typeof serve>;
type FetchHandler = (request: Request, env: unknown) => Response | Promise<Response>;

const starting: FetchHandler = () =>
  new Response(JSON.stringify({ status: "starting" }), {
    status: 503,
    headers: { "content-type": "application/json", "retry-after": "1" },
  });

/** The HTTP port: bound on `listen()`, answering 503 "starting" until `serve` puts the app in. */
function createListener(config: Config, timeouts: ClientTimeouts) {
  let handle = starting;
  let server: HttpServer | undefined;
  // Closed once, whether by a failed start-up or by stop().
  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    return closed;
  };
  return {
    get server() {
      return server;
    },
    close,
    serve(app: FetchHandler) {
      handle = app;
    },
    async listen(): Promise<Listening> {
      server = await new Promise<HttpServer>((resolve, reject) => {
        const s = serve(
          {
            fetch: (request, env) => handle(request, env),
            hostname: config.host,
            port: config.port,
            serverOptions: {
              headersTimeout: timeouts.headersMs,
              requestTimeout: timeouts.requestMs,
              connectionsCheckingInterval: timeouts.checkIntervalMs,
            },
          },
          () => resolve(s),
        );
        s.once("error", reject);
      });
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : config.port;
      const host = config.host.includes(":") ? `[${config.host}]` : config.host;
      return { url: `http://${host}:${port}`, close };
    },
  };
}

/** The version in package.json, for peergate_build_info. */
function packageVersion(): string {
  try {
    const text = readFileSync(new URL("../package.json", import.meta.url), "utf8");
    return String((JSON.parse(text) as { version?: unknown }).version ?? "unknown");
  } catch {
    return "unknown";
  }
}

function createServerApp(
  core: Core,
  logger: Logger,
  config: Config,
  env: Readonly<Record<string, string | undefined>>,
  eventLoopLag: EventLoopLag,
) {
  const { services, limiter, engine, auth, a2a } = core;
  return createApp({
    logger,
    metrics: createMetrics({
      db: core.database.db,
      events: core.events,
      build: { version: packageVersion(), node: process.version },
      token: env.PEERGATE_METRICS_TOKEN,
      host: config.host,
      modelCalls: core.modelCalls,
      runStarts: engine.starts,
      eventLoopLag,
    }),
    checkReadiness: () =>
      checkReadiness({
        database: core.database,
        sandbox: core.sandboxStatus,
        eventLoop: () => eventLoopLag.read(),
      }),
    admin: {
      services,
      limiter,
      runs: engine,
      // Loaded on the first ask: the doctor's imports are no part of a server's start.
      doctor: async (query) =>
        (await import("./services/server-doctor.ts")).diagnoseServer({
          config,
          database: core.database,
          policies: services.policies,
          sandbox: core.sandboxStatus,
          query,
        }),
    },
    webhooks: { auth, limiter, runs: engine },
    mount: [
      { prefix: "/console", routes: consoleRoutes() },
      {
        prefix: "/",
        routes: a2aRoutes({ a2a, authenticate: requireA2aCaller({ auth, limiter }) }),
      },
    ],
  });
}

export async function startServer(
  config: Config,
  logger: Logger,
  /** The parent environment, which commands run by tools inherit after scrubbing. */
  env: Readonly<Record<string, string | undefined>> = {},
  options: StartServerOptions = {},
): Promise<RunningServer> {
  // Traces: the SDK is loaded only when an OTLP endpoint is configured (src/trace-export.ts).
  const traces = config.tracing
    ? await (await import("./trace-export.ts")).startTraceExport(
        config.tracing,
        logger,
        packageVersion(),
      )
    : undefined;
  const listener = createListener(config, options.clientTimeouts ?? defaultClientTimeouts);
  // The gRPC binding: the same size limit as POST /a2a's body.
  const grpc = config.grpc
    ? createGrpcListener({ ...config.grpc, maxMessageBytes: defaultMaxBodyBytes })
    : undefined;
  const core = await openCore(config, logger, env, {
    authThrottle: options.authThrottle ?? defaultAuthThrottle,
    listen: listener.listen,
    ...(grpc ? { listenGrpc: grpc.listen } : {}),
    ...(options.runHeartbeatMs === undefined ? {} : { runHeartbeatMs: options.runHeartbeatMs }),
    ...(options.wrapNotifications ? { wrapNotifications: options.wrapNotifications } : {}),
  }).catch(async (error: unknown) => {
    await traces?.shutdown(config.shutdownTimeoutMs);
    throw error;
  });
  let app: ReturnType<typeof createApp>;
  const eventLoopLag = createEventLoopLag();
  try {
    app = createServerApp(core, logger, config, env, eventLoopLag);
  } catch (error) {
    eventLoopLag.stop();
    await core.close();
    await traces?.shutdown(config.shutdownTimeoutMs);
    throw error;
  }
  listener.serve(app.hono.fetch);
  logger.info("listening", { url: core.url });
  if (grpc) {
    // The same authentication, throttle and audit as POST /a2a (src/http/middleware/a2a-auth.ts).
    const auth = { auth: core.auth, limiter: core.limiter };
    grpc.serve(
      core.a2a.grpcService(
        async (authorization, source) =>
          (await authenticateA2aCaller(auth, authorization, source)).caller,
      ),
    );
    logger.info("listening for A2A over gRPC", { address: core.grpcAddress });
  }

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info("shutting down", { inflight: app.inflight.count });
      const closed = listener.close();
      // gRPC stops taking calls now too, and cuts what is still open at the same deadline.
      const grpcDrained = grpc?.drain(config.shutdownTimeoutMs);
      const server = listener.server;
      if (server && "closeIdleConnections" in server) server.closeIdleConnections();
      const drained = await Promise.race([
        app.inflight.drained().then(() => true),
        new Promise<false>((resolve) =>
          setTimeout(resolve, config.shutdownTimeoutMs, false).unref(),
        ),
      ]);
      if (!drained) {
        logger.warn(
          "shutdown timeout: stopping runs, so the requests waiting on them are answered",
          {
            inflight: app.inflight.count,
          },
        );
        await core.engine.stop().catch((error: unknown) => {
          logger.error("stopping the runs failed", { error });
        });
        core.a2a.closeAllStreams();
        const answered = await Promise.race([
          app.inflight.drained().then(() => true),
          new Promise<false>((resolve) =>
            setTimeout(resolve, Math.min(config.shutdownTimeoutMs, 5_000), false).unref(),
          ),
        ]);
        if (!answered) {
          logger.warn("shutdown: cancelling in-flight requests", { inflight: app.inflight.count });
        }
      }
      if (server && "closeAllConnections" in server) server.closeAllConnections();
      await closed;
      await grpcDrained;
      await core.close();
      eventLoopLag.stop();
      // The spans of the drain and of the runs it stopped, exported before the process ends.
      await traces?.shutdown(config.shutdownTimeoutMs);
      logger.info("stopped");
    })();
    return stopping;
  };
  return {
    url: core.url,
    grpcAddress: core.grpcAddress,
    database: core.database,
    services: core.services,
    hono: app.hono,
    stop,
  };
}
