// A whole peergate app on a test database, without listening on a port (use `hono.request`), or
// served on 127.0.0.1 when a real client is needed. The run engine is a recording fake unless a
// test passes a real one, so caller and webhook tests do not depend on models or tools.
import type { Hono } from "hono";
import { createJwksCache } from "../../src/auth/jwt.ts";
import { createRateLimiter, type RateLimiter } from "../../src/auth/rate-limit.ts";
import { generateSecretKeyText, parseSecretKey } from "../../src/auth/sealed-secrets.ts";
import { generateSecret } from "../../src/auth/secrets.ts";
import type { Database } from "../../src/db/client.ts";
import { runs } from "../../src/db/schema.ts";
import { NotFoundError } from "../../src/errors.ts";
import { createApp } from "../../src/http/app.ts";
import { loadPolicies } from "../../src/load-policies.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { createMetrics } from "../../src/metrics.ts";
import { createCeilingCache } from "../../src/policy/ceiling-cache.ts";
import type { RunEngine, StartRunRequest } from "../../src/runs/types.ts";
import {
  createOperatorToken,
  ensureAdminToken,
  type OperatorProof,
} from "../../src/services/admin-credentials.ts";
import type { AuthDeps } from "../../src/services/authenticate-caller.ts";
import { type CallerDirectory, openCallerDirectory } from "../../src/services/caller-directory.ts";
import type { ServiceContext } from "../../src/services/context.ts";
import { claimDelivery } from "../../src/services/runs/delivery-claim.ts";
import { shippedPoliciesDir } from "./shipped-policies.ts";

/**
 * The project's `policies/` as shipped (HEAD, from git), never the checkout's own files, which an
 * operator may have edited (test/support/shipped-policies.ts).
 */
export const repoPoliciesDir = shippedPoliciesDir;

/** A run engine that records what it was asked and starts nothing. */
export type FakeRunEngine = RunEngine & { started: StartRunRequest[]; canceled: string[] };

export function createFakeRunEngine(database: Database): FakeRunEngine {
  const started: StartRunRequest[] = [];
  const canceled: string[] = [];
  return {
    started,
    canceled,
    async start(request) {
      const runId = crypto.randomUUID();
      // Like the real engine: the run row and the request's own rows commit together or not at all.
      const claimed = await database.db.transaction(async (tx) => {
        await tx.insert(runs).values({
          id: runId,
          callerId: request.caller.id,
          origin: request.origin,
          approvalPolicy: request.caller.approvalPolicy,
          toolSet: [],
        });
        for (const write of request.atStart?.(runId) ?? []) await tx.execute(write);
        return request.delivery
          ? claimDelivery(tx, request.delivery, { runId, callerId: request.caller.id })
          : { retryOf: undefined };
      });
      started.push(request);
      return {
        runId,
        ...(claimed.retryOf ? { retryOf: claimed.retryOf } : {}),
        outcome: Promise.resolve({ runId, status: "completed", messages: request.messages }),
      };
    },
    async cancel(runId) {
      canceled.push(runId);
      return false;
    },
    async answerInput() {
      throw new NotFoundError("no such run");
    },
  };
}

export type TestApp = {
  hono: Hono;
  services: ServiceContext;
  auth: AuthDeps;
  directory: CallerDirectory;
  adminToken: string;
  /** The operator token, for writes that widen a caller (and approvals). */
  operatorToken: string;
  runs: RunEngine;
  limiter: RateLimiter;
  logLines: string[];
  close(): Promise<void>;
};

const testAdminToken = generateSecret("adminToken");

export async function createTestApp(
  database: Database,
  options: { runs?: RunEngine; logger?: Logger; limiter?: RateLimiter; now?: () => Date } = {},
): Promise<TestApp> {
  const logLines: string[] = [];
  const logger =
    options.logger ?? createLogger({ level: "debug", write: (line) => logLines.push(line) });
  const key = parseSecretKey(generateSecretKeyText());
  if (!key) throw new Error("secret key");
  const directory = await openCallerDirectory({ database, logger });
  const services: ServiceContext = {
    database,
    db: database.db,
    now: options.now ?? (() => new Date()),
    logger,
    policies: await loadPolicies(repoPoliciesDir),
    ceilings: createCeilingCache(),
    secretKey: key,
    publicUrl: "http://127.0.0.1:9",
    callerChanged: (event) => directory.forget(event.callerId),
  };
  // One admin token for every app of this test process: two apps on one database are two
  // instances of one cluster, which share the cluster's token (an instance with another is refused).
  const adminToken = testAdminToken;
  await ensureAdminToken({ services, configured: adminToken });
  const operatorToken = await createOperatorToken({ services, actor: "cli:test" });
  const auth: AuthDeps = { services, directory, jwks: createJwksCache() };
  const limiter = options.limiter ?? createRateLimiter({ maxFailures: 1000, windowMs: 60_000 });
  const engine = options.runs ?? createFakeRunEngine(database);
  const app = createApp({
    logger,
    metrics: createMetrics({ processMetrics: false }),
    checkReadiness: async () => ({ ready: true, checks: [] }),
    admin: { services, limiter },
    webhooks: { auth, limiter, runs: engine },
  });
  return {
    hono: app.hono,
    services,
    auth,
    directory,
    adminToken,
    operatorToken,
    runs: engine,
    limiter,
    logLines,
    close: () => directory.close(),
  };
}

/** Calls the admin API as the admin: the admin token alone. */
export function adminRequest(
  app: TestApp,
  method: string,
  pathname: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return Promise.resolve(
    app.hono.request(`/admin/v1${pathname}`, {
      method,
      headers: {
        authorization: `Bearer ${app.adminToken}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
}

/** Calls the admin API as the operator: the admin token and the operator token. */
export function operatorRequest(
  app: TestApp,
  method: string,
  pathname: string,
  body?: unknown,
): Promise<Response> {
  return adminRequest(app, method, pathname, body, {
    "x-peergate-operator-token": app.operatorToken,
  });
}

/** The operator proof a service call gets when the request carried the operator token. */
export function operatorProof(app: Pick<TestApp, "operatorToken">): OperatorProof {
  return { token: app.operatorToken, failure: { surface: "operator", source: "test" } };
}
