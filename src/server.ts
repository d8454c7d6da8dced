// Composition root of the server: config → policies → data dir secrets → database → migrations →
// services → app → listen, and the graceful stop in reverse. `peergate serve` (and so `npm start`)
// runs this. Nothing below this file reads the environment or the data directory's secret files.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import path from "node:path";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { resolvePublicUrl } from "./a2a/agent-card.ts";
import { deriveCardSigningKey } from "./a2a/card-signing.ts";
import { createPushEgress } from "./a2a/push-targets.ts";
import { startPushWorker } from "./a2a/push-worker.ts";
import { createA2aService } from "./a2a/service.ts";
import { createJwksCache } from "./auth/jwt.ts";
import { createRateLimiter } from "./auth/rate-limit.ts";
import { generateSecretKeyText, parseSecretKey } from "./auth/sealed-secrets.ts";
import type { Config } from "./config.ts";
import type { Database } from "./db/client.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { openNotifications } from "./db/notifications.ts";
import {
  describeDatabase,
  openConfiguredDatabase,
  resolveDatabaseOptions,
} from "./db/open-configured.ts";
import { ConfigError } from "./errors.ts";
import { createApp } from "./http/app.ts";
import { readSourceAddress } from "./http/request-info.ts";
import { a2aRoutes } from "./http/routes/a2a.ts";
import { throttleAuth } from "./http/throttle.ts";
import { loadPolicies } from "./load-policies.ts";
import type { Logger } from "./log.ts";
import { createMetrics } from "./metrics.ts";
import { createCeilingCache } from "./policy/ceiling-cache.ts";
import { loadPriceTable } from "./runs/prices.ts";
import { resolveModel } from "./runs/resolve-model.ts";
import { prepareSandbox } from "./sandbox/prepare-sandbox.ts";
import { createRedactor, databaseUrlSecrets } from "./sandbox/redact.ts";
import {
  adminTokenFile,
  createSecretFile,
  ensureDataDir,
  readSecretFile,
  secretKeyFile,
} from "./secret-files.ts";
import { ensureAdminToken } from "./services/admin-credentials.ts";
import { type AuthDeps, authenticatePeer } from "./services/authenticate-caller.ts";
import { openCallerDirectory } from "./services/caller-directory.ts";
import { checkReadiness } from "./services/check-readiness.ts";
import type { ServiceContext } from "./services/context.ts";
import { createAuthFailureLog } from "./services/record-auth-failures.ts";
import { createRunEngine } from "./services/runs/engine.ts";
import { createToolRuntime } from "./tools/runtime.ts";
import { isSecretName } from "./tools/scrub-environment.ts";

export type RunningServer = {
  url: string;
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
};

async function loadSecretKey(config: Config, logger: Logger) {
  if (config.secretKey) {
    const key = parseSecretKey(config.secretKey);
    if (!key)
      throw new ConfigError([
        {
          field: "PEERGATE_SECRET_KEY",
          message: "PEERGATE_SECRET_KEY=(value hidden): not a 32-byte key",
        },
      ]);
    return key;
  }
  const text =
    (await readSecretFile(config.dataDir, secretKeyFile)) ??
    (await createSecretFile(config.dataDir, secretKeyFile, generateSecretKeyText()));
  const key = parseSecretKey(text);
  if (!key) {
    throw new ConfigError([
      {
        field: secretKeyFile,
        message: `${config.dataDir}/${secretKeyFile}: not a 32-byte key; remove it to have a new one generated (GitHub webhook callers must then be rotated)`,
      },
    ]);
  }
  if (config.databaseUrl) {
    logger.warn(
      "PEERGATE_SECRET_KEY is not set: instances sharing this database must share one key, or GitHub signatures will fail on the others",
      { keyId: key.id },
    );
  }
  return key;
}

export async function startServer(
  config: Config,
  logger: Logger,
  /** The parent environment, which commands run by tools inherit after scrubbing. */
  env: Readonly<Record<string, string | undefined>> = {},
  options: StartServerOptions = {},
): Promise<RunningServer> {
  const policies = await loadPolicies(config.policiesDir);
  await ensureDataDir(config.dataDir);
  const secretKey = await loadSecretKey(config, logger);
  const databaseOptions = resolveDatabaseOptions(config);
  const database = await openConfiguredDatabase(config);
  const cleanups: (() => Promise<void>)[] = [() => database.close()];
  const cleanUp = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
  };
  try {
    const { applied } = await migrateDatabase(database);
    logger.info("database ready", {
      database: describeDatabase(databaseOptions),
      migrationsApplied: applied,
    });

    // Listen before the services exist, so the default public URL can name the port actually bound
    // (PEERGATE_PORT=0); until the app is in place every request gets 503 "starting".
    let handle: (request: Request, env: unknown) => Response | Promise<Response> = () =>
      new Response(JSON.stringify({ status: "starting" }), {
        status: 503,
        headers: { "content-type": "application/json", "retry-after": "1" },
      });
    const timeouts = options.clientTimeouts ?? defaultClientTimeouts;
    const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
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
    const url = `http://${host}:${port}`;
    // Closed once, whether by a failed start-up or by stop().
    let serverClosed: Promise<void> | undefined;
    const closeServer = () => {
      serverClosed ??= new Promise<void>((resolve) => server.close(() => resolve()));
      return serverClosed;
    };
    cleanups.push(closeServer);

    // One LISTEN hub for the instance: the caller directory and the run engine share it.
    const notifications = await openNotifications({ database, logger });
    cleanups.push(() => notifications.close());
    const directory = await openCallerDirectory({ database, logger, notifications });
    cleanups.push(() => directory.close());
    // Written before the database closes: every failure's summary reaches the trail.
    const authFailures = createAuthFailureLog({
      db: database.db,
      logger,
      windowMs: (options.authThrottle ?? defaultAuthThrottle).windowMs,
    });
    cleanups.push(() => authFailures.close());
    const services: ServiceContext = {
      database,
      db: database.db,
      now: () => new Date(),
      logger,
      policies,
      ceilings: createCeilingCache(),
      secretKey,
      publicUrl: config.publicUrl ?? url,
      callerChanged: (event) => directory.forget(event.callerId),
      authFailures,
    };

    const admin = await ensureAdminToken({ ctx: services, configured: config.adminToken });
    if (admin.generated) {
      const stored = await createSecretFile(config.dataDir, adminTokenFile, admin.generated);
      if (stored !== admin.generated) {
        throw new ConfigError([
          {
            field: adminTokenFile,
            message: `${config.dataDir}/${adminTokenFile} exists but holds no admin token this database knows; remove it and restart`,
          },
        ]);
      }
      logger.info("admin token generated", { file: `${config.dataDir}/${adminTokenFile}` });
    } else if (
      admin.source === "stored" &&
      !(await readSecretFile(config.dataDir, adminTokenFile))
    ) {
      logger.warn("the admin token is not known on this machine: set PEERGATE_ADMIN_TOKEN", {});
    }

    const limiter = createRateLimiter(options.authThrottle ?? defaultAuthThrottle);
    const auth: AuthDeps = { ctx: services, directory, jwks: createJwksCache() };

    const resolvedModel = resolveModel({
      modelId: config.model ?? policies.agent.model,
      baseUrl: config.modelBaseUrl,
      apiKey: config.modelApiKey,
    });
    if (resolvedModel.ok) logger.info("model", { model: resolvedModel.id });
    else
      logger.warn("runs will fail until a model is configured", { problem: resolvedModel.message });

    const sandbox = await prepareSandbox({
      kind: config.sandbox,
      policies,
      logger,
      dataDir: config.dataDir,
    });
    // Every secret this process holds, replaced by value in process output.
    const redactor = createRedactor([
      config.modelApiKey,
      config.adminToken,
      admin.generated,
      config.secretKey,
      await readSecretFile(config.dataDir, adminTokenFile),
      await readSecretFile(config.dataDir, secretKeyFile),
      ...databaseUrlSecrets(config.databaseUrl),
      ...Object.entries(env).flatMap(([name, value]) => (isSecretName(name) ? [value] : [])),
    ]);
    const tools = await createToolRuntime({
      policies,
      workspace: config.workspace,
      dataDir: config.dataDir,
      env,
      envAllowlist: policies.agent.envAllowlist ?? [],
      sandbox: sandbox.backend,
      redactor,
      logger,
    });
    cleanups.push(() => tools.close());
    const engine = await createRunEngine({
      database,
      policies,
      ceilings: services.ceilings,
      tools,
      model: resolvedModel,
      instanceId: `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`,
      logger,
      // The runtime's resolved root (realpath): tools refuse a call made for any other root.
      workspace: tools.workspace ?? config.workspace,
      notifications,
      subscribeCallerEvents: (listener) => directory.onCallerEvent(listener),
      priceTable: await loadPriceTable(path.join(config.policiesDir, "models.yaml")),
    });
    const cardSigningKey = await deriveCardSigningKey(secretKey.bytes);
    const pushEgress = createPushEgress({ allowAddresses: config.push.allowAddresses });
    const a2a = createA2aService({
      database,
      policies,
      publicUrl: services.publicUrl,
      runs: engine,
      logger,
      // Derived from the secret key, so instances sharing it sign the card alike.
      cardSigningKey,
      push: { secretKey, egress: pushEgress },
    });
    // Reverse order at stop: the engine stops its runs first, then the A2A streams close.
    cleanups.push(() => a2a.close());
    const pushWorker = startPushWorker({
      database,
      secretKey,
      egress: pushEgress,
      signing: {
        key: cardSigningKey,
        issuer: services.publicUrl,
        jwksUrl: resolvePublicUrl(services.publicUrl, "/.well-known/jwks.json"),
      },
      notifications,
      logger,
      leaseMs: config.push.leaseMs,
      retryBaseMs: config.push.retryBaseMs,
    });
    cleanups.push(() => pushWorker.stop());
    cleanups.push(() => engine.stop());
    engine.onRunSettled((run) => {
      a2a
        .settleRun(run)
        .catch((error: unknown) =>
          logger.error("could not settle an A2A task", { runId: run.runId, error }),
        );
    });
    directory.onCallerEvent((event) => {
      if (event.change === "revoked") a2a.closeCallerStreams(event.callerId);
    });

    const metrics = createMetrics();
    const app = createApp({
      logger,
      metrics,
      checkReadiness: () => checkReadiness({ database, sandbox: sandbox.status }),
      admin: { services, limiter, runs: engine },
      webhooks: { auth, limiter, runs: engine },
      mount: [
        {
          prefix: "/",
          routes: a2aRoutes({
            a2a,
            authenticate: async (c) => {
              const source = readSourceAddress(c);
              const authenticated = await throttleAuth(limiter, [`source:${source}`], () =>
                authenticatePeer(auth, c.req.header("authorization"), { surface: "a2a", source }),
              );
              return authenticated.caller;
            },
          }),
        },
      ],
    });

    handle = app.hono.fetch;
    logger.info("listening", { url });

    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        logger.info("shutting down", { inflight: app.inflight.count });
        const closed = closeServer();
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
        await cleanUp();
        logger.info("stopped");
      })();
      return stopping;
    };
    return { url, database, services, hono: app.hono, stop };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}
