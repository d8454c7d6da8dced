// The security suite's harness: the real server (`startServer`, what `peergate serve` runs) on
// 127.0.0.1, on a fresh database of the test PostgreSQL (or, without one, the embedded PGlite in
// a temporary data directory), every log line kept, and a raw HTTP client that sends exactly the
// bytes, paths and repeated headers a test asks for (fetch would normalise `%2e%2e`, drop a
// doubled header and refuse `Transfer-Encoding`).
//
// The failed-authentication throttle is raised (the suite sends hundreds of bad credentials from
// one address on purpose; test/http/admin.security.test.ts proves the throttle itself), and the
// slow-client timeouts can be shortened; everything else is the production composition.
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { loadConfig } from "../../src/config.ts";
import { selectRows } from "../../src/db/client.ts";
import { createLogger } from "../../src/log.ts";
import { type ClientTimeouts, type RunningServer, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

export type SecurityServer = {
  url: string;
  port: number;
  server: RunningServer;
  /** The admin token in force (changes when a test replaces it). */
  adminToken: string;
  /** Every log line the server wrote, at debug level. */
  logLines: string[];
  dataDir: string;
  workspace: string;
  /** Calls the admin API with the current admin token; the body is parsed JSON when it is JSON. */
  admin(method: string, pathname: string, body?: unknown): Promise<Reply & { json: any }>;
  /** A new operator token (as `peergate operator-token create` does), revoking the previous one. */
  newOperatorToken(): Promise<string>;
  /** Rotates the admin token through the admin API (as `peergate admin-token rotate` does). */
  replaceAdminToken(operatorToken: string): Promise<{ old: string; current: string }>;
  stop(): Promise<void>;
};

export type SecurityServerOptions = {
  /** agent.yaml; default: the repository's policies/. */
  agentYaml?: string;
  clientTimeouts?: ClientTimeouts;
  /** Extra environment (PEERGATE_MODEL, …). */
  env?: Record<string, string>;
  /** A model id to price at $0 in models.yaml (callers' default budgets include a cost). */
  freeModel?: string;
  /**
   * Default: a fresh database on the test PostgreSQL when there is one (starts in ~0.2 s), the
   * embedded PGlite in the data directory otherwise (2-6 s).
   */
  database?: "postgres" | "pglite";
  /** The failed-authentication throttle; default: raised out of the way (see above). */
  authThrottle?: { maxFailures: number; windowMs: number };
};

export function newAdminToken(): string {
  return `sec-admin-${randomBytes(24).toString("base64url")}`;
}

export async function startSecurityServer(
  options: SecurityServerOptions = {},
): Promise<SecurityServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-security-"));
  let policiesDir = repoPoliciesDir;
  if (options.agentYaml || options.freeModel) {
    policiesDir = path.join(dir, "policies");
    await cp(repoPoliciesDir, policiesDir, { recursive: true });
    if (options.agentYaml) await writeFile(path.join(policiesDir, "agent.yaml"), options.agentYaml);
    if (options.freeModel) {
      const models = path.join(policiesDir, "models.yaml");
      const text = await readFile(models, "utf8");
      await writeFile(
        models,
        text.replace(
          /^models:\n/m,
          `models:\n  "${options.freeModel}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
        ),
      );
    }
  }
  const dataDir = path.join(dir, "data");
  const workspace = path.join(dir, "workspace");
  let adminToken = newAdminToken();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: dataDir,
    PEERGATE_POLICIES_DIR: policiesDir,
    PEERGATE_WORKSPACE: workspace,
    PEERGATE_ADMIN_TOKEN: adminToken,
    PEERGATE_SHUTDOWN_TIMEOUT_MS: "1000",
    ...options.env,
  };
  await mkdir(workspace, { recursive: true });
  const usePostgres = (options.database ?? "postgres") === "postgres" && !postgresSkipReason();
  const postgres = usePostgres ? await createPostgresTestDatabase({ migrate: true }) : undefined;
  if (postgres) env.DATABASE_URL = postgres.url;
  const logLines: string[] = [];
  const logger = createLogger({ level: "debug", write: (line) => logLines.push(line) });
  let server: RunningServer;
  try {
    server = await startServer(loadConfig(env, dir), logger, env, {
      authThrottle: options.authThrottle ?? { maxFailures: 1_000_000, windowMs: 60_000 },
      ...(options.clientTimeouts ? { clientTimeouts: options.clientTimeouts } : {}),
    });
  } catch (error) {
    await postgres?.drop();
    throw error;
  }
  const port = Number(new URL(server.url).port);

  const harness: SecurityServer = {
    url: server.url,
    port,
    server,
    adminToken,
    logLines,
    dataDir,
    workspace,
    async admin(method, pathname, body) {
      const request = async (operatorToken?: string) => {
        const reply = await send(port, {
          method,
          path: `/admin/v1${pathname}`,
          headers: {
            authorization: `Bearer ${harness.adminToken}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
            ...(operatorToken ? { "x-peergate-operator-token": operatorToken } : {}),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        let json: any;
        try {
          json = JSON.parse(reply.text);
        } catch {
          json = undefined;
        }
        return { ...reply, json };
      };
      const reply = await request();
      // A write that widens a caller needs the operator too: do as the operator would.
      if (reply.status !== 403 || reply.json?.code !== "operator-token-required") return reply;
      return request(
        await createOperatorToken({ services: server.services, actor: "cli:security" }),
      );
    },
    newOperatorToken: () =>
      createOperatorToken({ services: server.services, actor: "cli:security" }),
    async replaceAdminToken(operatorToken) {
      const old = harness.adminToken;
      const reply = await send(port, {
        method: "POST",
        path: "/admin/v1/admin-token/rotate",
        headers: { authorization: `Bearer ${old}`, "x-peergate-operator-token": operatorToken },
      });
      if (reply.status !== 200)
        throw new Error(`admin-token rotate: ${reply.status} ${reply.text}`);
      const current = (JSON.parse(reply.text) as { token: string }).token;
      harness.adminToken = current;
      adminToken = current;
      return { old, current };
    },
    async stop() {
      await server.stop();
      await postgres?.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

// ---------------------------------------------------------------- raw HTTP

export type Reply = {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  ms: number;
};

export type RawRequest = {
  method: string;
  /** Sent as is: no normalisation of dot segments, encodings or slashes. */
  path: string;
  /** A header given an array is sent once per value (a doubled header). */
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
};

// A connection per request: the server closes some on purpose (413, 408), and a reused socket
// that was closed under us would fail the next request for reasons of our own making.
const agent = new http.Agent({ keepAlive: false });

/** One request over HTTP/1.1 to 127.0.0.1:`port`, exactly as described. */
export function send(port: number, request: RawRequest): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const body = request.body === undefined ? undefined : Buffer.from(request.body);
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        agent,
        method: request.method,
        path: request.path,
        headers: {
          ...(body === undefined ? {} : { "content-length": String(body.length) }),
          ...request.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString("utf8"),
            ms: performance.now() - started,
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

export type RawExchange = {
  /** Everything the server sent before closing (or before the wait ended). */
  response: string;
  /** The status of the first response line, 0 if none came. */
  status: number;
  closedByServer: boolean;
  ms: number;
};

/**
 * Writes `chunks` to a fresh TCP connection (waiting `gapMs` between them) and collects what the
 * server answers until it closes the connection or `waitMs` pass. For requests node:http will not
 * send: both Content-Length and Transfer-Encoding, bodies longer than declared, trickled bodies.
 */
export function exchange(
  port: number,
  chunks: readonly (string | Buffer)[],
  options: { gapMs?: number; waitMs?: number } = {},
): Promise<RawExchange> {
  const gapMs = options.gapMs ?? 0;
  const waitMs = options.waitMs ?? 5_000;
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = net.connect(port, "127.0.0.1");
    const received: Buffer[] = [];
    let closedByServer = false;
    let finished = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      const response = Buffer.concat(received).toString("latin1");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(response)?.[1] ?? 0);
      resolve({ response, status, closedByServer, ms: performance.now() - started });
    };
    socket.on("data", (d: Buffer) => received.push(d));
    socket.on("end", () => {
      closedByServer = true;
      finish();
    });
    socket.on("close", () => {
      closedByServer = !finished || closedByServer;
      finish();
    });
    socket.on("error", () => finish());
    timer = setTimeout(finish, waitMs);
    socket.once("connect", async () => {
      for (const chunk of chunks) {
        if (finished || socket.destroyed) return;
        socket.write(chunk);
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

// ---------------------------------------------------------------- state

/**
 * What a request could have changed: runs, callers, credentials and every audit event except
 * `auth.failed` (which refusals are meant to write). Equal before and after = nothing happened.
 */
export async function readStateFingerprint(server: RunningServer): Promise<string> {
  const rows = await selectRows(
    server.database.db,
    sql`
    select
      (select count(*) from runs) as runs,
      (select count(*) from callers) as callers,
      (select count(*) from credentials) as credentials,
      (select coalesce(max(updated_at)::text, '') from callers) as callers_updated,
      (select count(*) from audit_events where kind <> 'auth.failed') as audit
  `,
  );
  return JSON.stringify(rows[0]);
}

/** The problem body of a reply without its request id (which differs on every request). */
export function withoutRequestId(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    delete body.requestId;
    return JSON.stringify(body);
  } catch {
    return text;
  }
}

// ---------------------------------------------------------------- timing

export type TimingComparison = {
  /** Median round trip of each side, ms. */
  known: number;
  unknown: number;
  /** Median of the differences between neighbouring requests (known − unknown), ms. */
  shift: number;
  /** Below this the two are taken as indistinguishable, ms. */
  bound: number;
};

const median = (xs: readonly number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/**
 * Sends `known` and `unknown` alternately, in ABBA order, each expected to get `status`, and
 * estimates how much longer one takes than the other as the median of the differences between
 * neighbouring requests: load that drifts over the run hits both members of a pair alike, which
 * two separate medians do not cancel.
 *
 * What "no measurable difference" means: the shift is under a fifth of the faster median and
 * under 0.4 ms, whichever is more. A shortcut on one side — skipping the database lookup, the key
 * check, the HMAC or the audit write — costs 0.5 to 1.5 ms on this server and fails it; on a
 * 2-core machine loaded by other test files, identical code paths show shifts of up to ~0.2 ms.
 */
export async function compareTiming(
  known: () => Promise<Reply>,
  unknown: () => Promise<Reply>,
  options: { pairs?: number; status?: number } = {},
): Promise<TimingComparison> {
  const pairs = options.pairs ?? 150;
  const status = options.status ?? 401;
  const one = async (send: () => Promise<Reply>) => {
    const reply = await send();
    if (reply.status !== status) throw new Error(`expected ${status}, got ${reply.status}`);
    return reply.ms;
  };
  for (let i = 0; i < 10; i++) await Promise.all([one(known), one(unknown)]);
  const k: number[] = [];
  const u: number[] = [];
  const shifts: number[] = [];
  for (let i = 0; i < pairs; i++) {
    let a: number;
    let b: number;
    if (i % 2 === 0) {
      a = await one(known);
      b = await one(unknown);
    } else {
      b = await one(unknown);
      a = await one(known);
    }
    k.push(a);
    u.push(b);
    shifts.push(a - b);
  }
  const m = { known: median(k), unknown: median(u) };
  return { ...m, shift: median(shifts), bound: Math.max(0.4, Math.min(m.known, m.unknown) / 5) };
}

export function describeTiming(t: TimingComparison): string {
  return `known ${t.known.toFixed(2)} ms, unknown ${t.unknown.toFixed(2)} ms, shift ${t.shift.toFixed(2)} ms`;
}
