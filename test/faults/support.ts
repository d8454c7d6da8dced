// Shared pieces of the fault suites (test/faults/): a PostgreSQL of their own that they may crash
// or freeze, a scripted model behind the real `@ai-sdk/openai-compatible` provider, peergate
// instances started the way `peergate serve` starts them — in this process (`startServer`) or as
// a real child process — and small HTTP helpers. Everything listens on 127.0.0.1 and is stopped,
// killed (whole process groups) and removed by the suite that made it.
import type { ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/log.ts";
import { type RunningServer, type StartServerOptions, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { repoPoliciesDir } from "../support/app.ts";
import {
  countAssistantTurns,
  createOpenAiStub,
  type OpenAiStub,
  readScenario,
  type Scenarios,
  type StubStep,
} from "../support/openai-stub.ts";
import { spawnServeChild } from "../support/serve-process.ts";

/** The model every fault-suite server runs; priced at $0 in the suite's copy of models.yaml. */
export const faultModelId = "openai-compatible:faults";

// ---------------------------------------------------------------- the scripted model

export { readScenario, type Scenarios } from "../support/openai-stub.ts";

export type ScriptedModel = {
  stub: OpenAiStub;
  baseUrl: string;
  /** How many model requests a scenario has received. */
  countOf(scenario: string): number;
  close(): Promise<void>;
};

/**
 * A chat-completions stub playing `scenarios` (step = assistant turns so far; the last step
 * repeats). A conversation naming no scenario gets a one-line answer at once.
 */
export async function startScriptedModel(scenarios: Scenarios = {}): Promise<ScriptedModel> {
  const stub = createOpenAiStub();
  stub.respondWith((request) => {
    const steps = scenarios[readScenario(request) ?? ""];
    if (!steps || steps.length === 0) return { text: "done" };
    return steps[Math.min(countAssistantTurns(request), steps.length - 1)] as StubStep;
  });
  const baseUrl = await stub.listen();
  return {
    stub,
    baseUrl,
    countOf: (scenario) => stub.requests.filter((r) => readScenario(r.body) === scenario).length,
    close: () => stub.close(),
  };
}

/** A copy of the repository's policies/ with the fault model priced (free). Remove it after. */
export async function copyPolicies(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-faults-policies-"));
  await cp(repoPoliciesDir, dir, { recursive: true });
  const models = path.join(dir, "models.yaml");
  const text = await readFile(models, "utf8");
  await writeFile(
    models,
    text.replace(
      /^models:\n/m,
      `models:\n  "${faultModelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
    ),
  );
  return dir;
}

/** Settings every instance sharing one database must agree on. */
export function createSharedSecrets(): { adminToken: string; secretKey: string } {
  return {
    adminToken: `faults-admin-${randomBytes(24).toString("hex")}`,
    secretKey: randomBytes(32).toString("hex"),
  };
}

export type InstanceOptions = {
  /** A PostgreSQL URL; without it, embedded PGlite in the data directory. */
  databaseUrl?: string;
  /** Reuse a data directory (a restart); by default a new temp one. */
  dataDir?: string;
  policiesDir: string;
  modelBaseUrl: string;
  adminToken: string;
  secretKey: string;
  /** The tools' workspace; by default `<data dir>-workspace` (never inside the data dir). */
  workspace?: string;
  /** What a test may change about an in-process server (e.g. the auth throttle). */
  serverOptions?: StartServerOptions;
};

/** The environment an operator would set for this instance. */
export function instanceEnv(
  options: InstanceOptions & { dataDir: string },
): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: options.dataDir,
    PEERGATE_POLICIES_DIR: options.policiesDir,
    PEERGATE_WORKSPACE: options.workspace ?? `${options.dataDir}-workspace`,
    PEERGATE_ADMIN_TOKEN: options.adminToken,
    PEERGATE_SECRET_KEY: options.secretKey,
    PEERGATE_MODEL: faultModelId,
    PEERGATE_MODEL_BASE_URL: options.modelBaseUrl,
    PEERGATE_MODEL_API_KEY: "faults-model-key",
    PEERGATE_SHUTDOWN_TIMEOUT_MS: "2000",
    PEERGATE_LOG_LEVEL: "info",
    ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
  };
}

// ---------------------------------------------------------------- HTTP

export type Reply = { status: number; body: any; headers: Headers; ms: number };

/** One HTTP request with a JSON body; the reply parsed when it is JSON. Never hangs past 30 s. */
export async function call(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Reply> {
  const started = performance.now();
  const response = await fetch(url, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
      ...init.headers,
    },
    ...(init.body === undefined
      ? {}
      : { body: typeof init.body === "string" ? init.body : JSON.stringify(init.body) }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // SSE or plain text: kept as text.
  }
  return {
    status: response.status,
    body,
    headers: response.headers,
    ms: performance.now() - started,
  };
}

/** A v1.0 JSON-RPC SendMessage (or another method) body. */
export function sendMessageBody(
  text: string,
  options: { method?: string; returnImmediately?: boolean } = {},
): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id: randomUUID(),
    method: options.method ?? "SendMessage",
    params: {
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] },
      // A2A 1.0: SendMessage waits for the task to end unless told to return at once.
      ...(options.returnImmediately ? { configuration: { returnImmediately: true } } : {}),
    },
  };
}

/** POST /a2a as a peer (A2A 1.0). */
export function a2a(url: string, token: string, body: unknown): Promise<Reply> {
  return call(`${url}/a2a`, {
    body,
    headers: { authorization: `Bearer ${token}`, "a2a-version": "1.0" },
  });
}

/** The run id peergate keeps in an A2A task's metadata. */
export function taskRunId(task: any): string | undefined {
  const runId = task?.metadata?.peergate?.runId;
  return typeof runId === "string" ? runId : undefined;
}

// ---------------------------------------------------------------- instances

export type Instance = {
  url: string;
  dataDir: string;
  /** Every log line (JSON), for assertions and for a failing test to print. */
  logs: string[];
  /** Calls the admin API with the admin token. */
  admin(
    method: string,
    pathname: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Reply>;
  stop(): Promise<void>;
};

function adminCaller(url: string, adminToken: string): Instance["admin"] {
  return (method, pathname, body, headers = {}) =>
    call(`${url}/admin/v1${pathname}`, {
      method,
      body,
      headers: { authorization: `Bearer ${adminToken}`, ...headers },
    });
}

/** A peergate instance in this process: `startServer`, as `peergate serve` runs it. */
export async function startInstance(
  options: InstanceOptions,
): Promise<Instance & { server: RunningServer }> {
  const dataDir =
    options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), "peergate-faults-data-")));
  const env = instanceEnv({ ...options, dataDir });
  const logs: string[] = [];
  const logger = createLogger({ level: "info", write: (line) => logs.push(line) });
  const server = await startServer(loadConfig(env, dataDir), logger, env, options.serverOptions);
  return {
    url: server.url,
    dataDir,
    logs,
    server,
    admin: adminCaller(server.url, options.adminToken),
    async stop() {
      await server.stop();
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true });
      if (!options.dataDir && !options.workspace) {
        await rm(`${dataDir}-workspace`, { recursive: true, force: true });
      }
    },
  };
}

export type ServeProcess = Instance & {
  child: ChildProcess;
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  exited: Promise<number | string>;
  /** SIGKILLs the whole process group (no graceful anything). */
  kill(): Promise<void>;
};

/**
 * `peergate serve` as a real child process in a process group of its own; resolves once its
 * `listening` log line names the URL. `wrap` runs it under another command (e.g. a shell that
 * sets a limit first): `wrap(["node", main, "serve"])` returns the argv to spawn.
 */
export async function spawnServe(
  env: Record<string, string>,
  adminToken: string,
  options: { wrap?: (argv: string[]) => string[]; readyMs?: number } = {},
): Promise<ServeProcess> {
  const served = await spawnServeChild(env, options);
  const { child, exited } = served;
  return {
    url: served.url,
    dataDir: env.PEERGATE_DATA_DIR ?? "",
    logs: served.logs,
    child,
    exited,
    admin: adminCaller(served.url, adminToken),
    async kill() {
      served.signalGroup("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      served.signalGroup("SIGTERM");
      const timer = setTimeout(() => served.signalGroup("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Adds a caller through the admin API; returns the created body (credential shown once). */
export async function addCaller(
  instance: Instance & { server?: RunningServer },
  input: Record<string, unknown>,
): Promise<any> {
  let created = await instance.admin("POST", "/callers", input);
  if (
    created.status === 403 &&
    created.body?.code === "operator-token-required" &&
    instance.server
  ) {
    // A caller above the floor needs the operator too: do as the operator would.
    const operatorToken = await createOperatorToken({
      services: instance.server.services,
      actor: "system",
    });
    created = await instance.admin("POST", "/callers", input, {
      "x-peergate-operator-token": operatorToken,
    });
  }
  if (created.status !== 201) {
    throw new Error(`adding caller failed: ${created.status} ${JSON.stringify(created.body)}`);
  }
  return created.body;
}

/** The audit chain as the admin API verifies it. */
export async function verifyAudit(instance: Instance): Promise<{ ok: boolean; count: number }> {
  const reply = await instance.admin("GET", "/audit/verify");
  return reply.body as { ok: boolean; count: number };
}
