// Everything one peergate instance serves, opened in order and closed in reverse: policies, the
// data directory and its secrets, the database and its migrations, the notification hub, the
// caller directory, the services, the sandbox and tools, the run engine, the A2A service, and the
// reactions between them (src/reactions.ts). src/server.ts puts HTTP in front of it.
//
// Start-up order, and why:
//   1. policies, data dir, secret key: a bad file stops start-up before anything is opened.
//   2. database, migrations, the audit chainer.
//   3. `listen`: the port is bound only now (a start that cannot reach its database binds
//      nothing), and before the services, so the default public URL names the port actually
//      bound (PEERGATE_PORT=0). Until the app is in place every request is answered 503. Then
//      `listenGrpc`, when the gRPC binding is on (PEERGATE_GRPC_PORT), for the same reasons: the
//      card names the gRPC port bound, and calls are answered UNAVAILABLE until it is served.
//   4. notification hub → caller directory → auth-failure log → services → admin token →
//      control socket (PGlite only) → the prune schedule → model → sandbox → tools → the policy-file watcher
//      (src/policy-reload.ts: services, engine and A2A read the policies through it) → run
//      engine → A2A → reactions.
// `close()` undoes them in exactly the reverse order: the engine stops its runs (whose ends still
// reach A2A), then the reactions are unwired, the A2A streams close, the watcher stops and tools close, the control
// socket, then the auth-failure log writes its last summaries while the database is still open,
// the directory and the hub close, the gRPC port, the port, the audit chainer's last pass, and last the database.
//
// Each slow step logs "starting: <what>" as it begins (policies, data directory, database,
// migrations, sandbox, tools), so a first start that spends a minute creating the embedded
// database says so while it does, rather than printing everything at the end.
import { randomBytes } from "node:crypto";
import { access } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { resolvePublicUrl } from "./a2a/agent-card.ts";
import { deriveCardSigningKey } from "./a2a/card-signing.ts";
import type { GrpcListening } from "./a2a/grpc-listener.ts";
import { createPushEgress } from "./a2a/push-targets.ts";
import { startPushWorker } from "./a2a/push-worker.ts";
import { type A2aService, createA2aService } from "./a2a/service.ts";
import { createJwksCache } from "./auth/jwt.ts";
import { createRateLimiter, type RateLimiter } from "./auth/rate-limit.ts";
import { loadSecretKey } from "./auth/secret-key-file.ts";
import { type Config, checkWorkspacePlace } from "./config.ts";
import { serveControlSocket } from "./control/serve-control-socket.ts";
import { startAuditChainer } from "./db/audit-chainer.ts";
import type { Database } from "./db/client.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { type Notifications, openNotifications } from "./db/notifications.ts";
import {
  describeDatabase,
  openConfiguredDatabase,
  resolveDatabaseOptions,
} from "./db/open-configured.ts";
import { type LoadedPolicies, loadPolicies } from "./load-policies.ts";
import type { LogFields, Logger } from "./log.ts";
import { createInstanceEvents, type InstanceEvents } from "./metrics-events.ts";
import { createModelCallLog, type ModelCallLog, timeModelCalls } from "./metrics-model.ts";
import { startParkedRunNotifier } from "./notify/parked-notifier.ts";
import { createCeilingCache } from "./policy/ceiling-cache.ts";
import { type LivePolicies, watchPolicies } from "./policy-reload.ts";
import { createSignal, reactionsOf, wireReactions } from "./reactions.ts";
import { resolveModel } from "./runs/resolve-model.ts";
import { prepareSandbox, type SandboxStatus } from "./sandbox/prepare-sandbox.ts";
import { createRedactor, databaseUrlSecrets } from "./sandbox/redact.ts";
import { adminTokenFile, ensureDataDir, readSecretFile, secretKeyFile } from "./secret-files.ts";
import { settleAdminToken } from "./services/admin-credentials.ts";
import type { AuthDeps } from "./services/authenticate-caller.ts";
import { openCallerDirectory } from "./services/caller-directory.ts";
import type { CallerEvent } from "./services/caller-events.ts";
import type { ServiceContext } from "./services/context.ts";
import { heldSecrets } from "./services/held-secrets.ts";
import { startPruneSchedule } from "./services/prune-schedule.ts";
import { createAuthFailureLog } from "./services/record-auth-failures.ts";
import { createRunEngine, type PeergateRunEngine } from "./services/runs/engine.ts";
import { createMcpInstances } from "./tools/declared/mcp-instances.ts";
import { createToolRuntime, type ToolRuntimeOptions } from "./tools/runtime.ts";
import { isSecretName } from "./tools/scrub-environment.ts";
import { startsProcesses } from "./tools/starts-processes.ts";

/** The HTTP port, bound by src/server.ts when the core asks for it (step 3 above). */
export type Listening = { readonly url: string; close(): Promise<void> };

export type CoreOptions = {
  /** Failed authentications allowed per source (and per claimed name) within the window. */
  readonly authThrottle: { readonly maxFailures: number; readonly windowMs: number };
  /** Binds the port; called once, after the migrations and before the services. */
  readonly listen: () => Promise<Listening>;
  /** Binds the gRPC port, right after `listen`; absent when the gRPC binding is off. */
  readonly listenGrpc?: () => Promise<GrpcListening>;
  /** How often the engine heartbeats its runs and reads their recorded stops (default 5 s). */
  readonly runHeartbeatMs?: number;
  /** Tests only: what the instance's modules hear of notifications (e.g. a hub that loses some). */
  readonly wrapNotifications?: (hub: Notifications) => Notifications;
};

export type Core = {
  /** The URL the port was bound at (the public URL defaults to it). */
  readonly url: string;
  /** `host:port` the gRPC binding was bound at, when it is on. */
  readonly grpcAddress: string | undefined;
  readonly database: Database;
  readonly services: ServiceContext;
  readonly auth: AuthDeps;
  readonly limiter: RateLimiter;
  readonly engine: PeergateRunEngine;
  readonly a2a: A2aService;
  readonly sandboxStatus: SandboxStatus;
  /** Timed model calls, for the latency histogram on /metrics. */
  readonly modelCalls: ModelCallLog;
  /** What the instance counts as it happens, for the counters on /metrics. */
  readonly events: InstanceEvents;
  /** Closes everything in the reverse order it was opened; once, however often it is called. */
  close(): Promise<void>;
};

export async function openCore(
  config: Config,
  logger: Logger,
  /** The parent environment, which commands run by tools inherit after scrubbing. */
  env: Readonly<Record<string, string | undefined>>,
  options: CoreOptions,
): Promise<Core> {
  const starting = (what: string, fields: LogFields = {}) =>
    logger.info(`starting: ${what}`, fields);
  starting("loading policies", { dir: config.policiesDir });
  const policies = await loadPolicies(config.policiesDir);
  starting("opening the data directory", { dir: config.dataDir });
  for (const fix of await ensureDataDir(config.dataDir)) {
    logger.warn(
      "made owner-only: group or others could reach it (rotate the secrets in it if others may have read them)",
      fix,
    );
  }
  // Again now that the data directory exists: by identity, it may only now have one.
  checkWorkspacePlace(config, env);
  const secretKey = await loadSecretKey({
    configured: config.secretKey,
    dataDir: config.dataDir,
    sharedDatabase: config.databaseUrl !== undefined,
    logger,
  });
  const databaseOptions = resolveDatabaseOptions(config);
  const where = describeDatabase(databaseOptions);
  if (databaseOptions.kind === "postgres")
    starting("connecting to the database", { database: where });
  else if (await isNewCluster(databaseOptions.dataDir)) {
    starting("creating the embedded database (first start only; it takes a while)", {
      database: where,
    });
  } else starting("opening the embedded database", { database: where });
  const database = await openConfiguredDatabase(config, (msg, fields) => logger.warn(msg, fields));
  const opened: (() => Promise<void>)[] = [() => database.close()];
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      for (const fn of opened.reverse()) await fn().catch(() => {});
    })();
    return closing;
  };
  try {
    const { applied } = await migrateDatabase(database, {
      applying: (pending, expected) =>
        starting(`applying ${pending.length} of ${expected} migrations`, {
          first: pending[0],
          last: pending.at(-1),
        }),
    });
    logger.info("database ready", { database: where, migrationsApplied: applied });
    // Chains committed audit events; stopped (after one last pass) before the database closes.
    const auditChainer = startAuditChainer({ database, logger });
    opened.push(() => auditChainer.stop());

    const listening = await options.listen();
    opened.push(() => listening.close());
    const grpcListening = await options.listenGrpc?.();
    if (grpcListening) opened.push(() => grpcListening.close());

    // One LISTEN hub for the instance: the caller directory and the run engine share it.
    const hub = await openNotifications({ database, logger });
    opened.push(() => hub.close());
    const notifications = options.wrapNotifications?.(hub) ?? hub;
    const directory = await openCallerDirectory({ database, logger, notifications });
    opened.push(() => directory.close());
    // Closed after the engine and before the database: every failure's summary reaches the trail.
    // What /metrics counts, told as it happens (src/metrics-events.ts).
    const events = createInstanceEvents();
    const authFailureLog = createAuthFailureLog({
      db: database.db,
      logger,
      windowMs: options.authThrottle.windowMs,
    });
    opened.push(() => authFailureLog.close());
    const authFailures: typeof authFailureLog = {
      ...authFailureLog,
      record(failure) {
        events.authFailed(failure.surface);
        authFailureLog.record(failure);
      },
    };
    const committedHere = createSignal<CallerEvent>();
    const offRevocations = committedHere.when((event) => {
      if (event.change === "revoked") events.callerRevoked();
    });
    opened.push(async () => offRevocations());
    // The policy files are read again on change or SIGHUP (src/policy-reload.ts): until the
    // watcher exists, the policies start-up loaded.
    let live: LivePolicies | undefined;
    const services: ServiceContext = {
      database,
      db: database.db,
      now: () => new Date(),
      logger,
      get policies() {
        return live?.view ?? policies;
      },
      ceilings: createCeilingCache(),
      secretKey,
      publicUrl: config.publicUrl ?? listening.url,
      callerChanged: committedHere.emit,
      authFailures,
      retention: config.retention,
    };

    const admin = await settleAdminToken({
      services,
      configured: config.adminToken,
      dataDir: config.dataDir,
      logger,
    });

    // The embedded database admits one process: the CLI reaches it through this socket meanwhile.
    if (database.kind === "pglite") {
      const control = await serveControlSocket({ dataDir: config.dataDir, services, logger });
      if (control) opened.push(() => control.close());
    }

    // Rows past their retention, pruned on a schedule (src/services/prune-schedule.ts).
    const pruning = startPruneSchedule({
      services,
      intervalMs: config.retention.intervalMs,
      logger,
    });
    opened.push(() => pruning.stop());

    const limiter = createRateLimiter(options.authThrottle);
    const auth: AuthDeps = { services, directory, jwks: createJwksCache() };

    const resolvedModel = resolveModel({
      modelId: config.model ?? policies.agent.model,
      baseUrl: config.modelBaseUrl,
      apiKey: config.modelApiKey,
    });
    if (resolvedModel.ok) logger.info("model", { model: resolvedModel.id });
    else
      logger.warn("runs will fail until a model is configured", { problem: resolvedModel.message });

    starting("probing the sandbox", { sandbox: config.sandbox });
    const sandbox = await prepareSandbox({
      kind: config.sandbox,
      processTools: startsProcesses(policies),
      logger,
      dataDir: config.dataDir,
      workspace: config.workspace,
    });
    // Every secret this process holds, and every credential peergate generates, replaced in
    // process output and tool results.
    const redactor = createRedactor(
      await heldSecrets({
        db: database.db,
        secretKey,
        known: [
          config.modelApiKey,
          config.adminToken,
          admin.generated,
          config.secretKey,
          await readSecretFile(config.dataDir, adminTokenFile),
          await readSecretFile(config.dataDir, secretKeyFile),
          ...databaseUrlSecrets(config.databaseUrl),
          ...Object.entries(env).flatMap(([name, value]) => (isSecretName(name) ? [value] : [])),
        ],
      }),
      { credentialShapes: true },
    );
    // Every tool runtime (a reload builds a new one) shares one set of MCP server instances.
    const mcpInstances = createMcpInstances({ logger });
    opened.push(() => mcpInstances.close());
    const runtimeOptions = (loaded: LoadedPolicies): ToolRuntimeOptions => ({
      policies: loaded,
      workspace: config.workspace,
      dataDir: config.dataDir,
      env,
      envAllowlist: loaded.agent.envAllowlist ?? [],
      allowHardLinks: config.workspaceHardLinks === "allow",
      sandbox: sandbox.backend,
      redactor,
      mcpInstances,
      logger,
      ...(loaded.agent.webFetch === undefined ? {} : { webFetch: loaded.agent.webFetch }),
    });
    // agent.yaml, tools.yaml and models.yaml, read again on change or SIGHUP and validated
    // first; each run keeps the policies, tools and price it started with.
    starting("loading tools");
    const initialTools = await createToolRuntime(runtimeOptions(policies));
    opened.push(() => initialTools.close());
    live = await watchPolicies({
      dir: config.policiesDir,
      initial: policies,
      tools: initialTools,
      logger,
      checkSandbox: async (next) => {
        await prepareSandbox({
          kind: config.sandbox,
          processTools: startsProcesses(next),
          logger,
          dataDir: config.dataDir,
          workspace: config.workspace,
        });
      },
      buildTools: (next) => createToolRuntime(runtimeOptions(next)),
      checkPlaces: () => checkWorkspacePlace(config, env),
    });
    const livePolicies = live;
    opened.push(() => livePolicies.close());
    const tools = live.tools;
    // Every model call timed for /metrics (peergate_model_call_duration_seconds).
    const modelCalls = createModelCallLog();
    const engine = await createRunEngine({
      database,
      policies: live.view,
      ceilings: services.ceilings,
      tools,
      model: timeModelCalls(resolvedModel, modelCalls),
      instanceId: `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`,
      logger,
      // The runtime's resolved root (realpath): tools refuse a call made for any other root.
      workspace: tools.workspace ?? config.workspace,
      notifications,
      meter: events,
      ...(options.runHeartbeatMs === undefined ? {} : { heartbeatMs: options.runHeartbeatMs }),
      priceTable: live.prices,
      redactor,
      startsAtOnce: config.runStartsAtOnce,
      ...(policies.agent.classifier?.model === undefined
        ? {}
        : {
            classifierModel: timeModelCalls(
              resolveModel({
                modelId: policies.agent.classifier.model,
                baseUrl: config.modelBaseUrl,
                apiKey: config.modelApiKey,
              }),
              modelCalls,
            ),
          }),
    });
    // Derived from the secret key, so instances sharing it sign the card (and push JWTs) alike.
    const cardSigningKey = await deriveCardSigningKey(secretKey.bytes);
    const pushEgress = createPushEgress({ allowAddresses: config.push.allowAddresses });
    const a2a = createA2aService({
      database,
      policies: live.view,
      publicUrl: services.publicUrl,
      runs: engine,
      logger,
      cardSigningKey,
      push: { secretKey, egress: pushEgress },
      ...(grpcListening
        ? { grpcAddress: config.grpc?.publicAddress ?? grpcListening.address }
        : {}),
      notifications,
    });
    opened.push(() => a2a.close());
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
      timeoutMs: config.push.timeoutMs,
    });
    opened.push(() => pushWorker.stop());
    const unwire = wireReactions(
      reactionsOf({ committedHere: committedHere.when, directory, engine, a2a, tools, logger }),
    );
    opened.push(async () => unwire());
    opened.push(() => engine.stop());
    // Parked runs noticed to PEERGATE_NOTIFY_URL, signed, through web_fetch's egress rules.
    const notify = config.notify;
    if (notify) {
      const notifier = startParkedRunNotifier({
        database,
        config: notify,
        instanceId: `${hostname()}-${process.pid}`,
        logger,
      });
      opened.push(() => notifier.close());
    }

    return {
      url: listening.url,
      grpcAddress: grpcListening?.address,
      database,
      services,
      auth,
      limiter,
      engine,
      a2a,
      sandboxStatus: sandbox.status,
      modelCalls,
      events,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Whether the embedded database's directory holds no cluster yet (PGlite will create one). */
async function isNewCluster(dir: string | undefined): Promise<boolean> {
  if (dir === undefined) return true;
  return access(path.join(dir, "PG_VERSION")).then(
    () => false,
    () => true,
  );
}
