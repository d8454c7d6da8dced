// The end-to-end harness: the real server (`startServer`, the composition root `peergate serve`
// runs) on 127.0.0.1, configured through the same environment variables an operator sets, with a
// scripted model behind the real `@ai-sdk/openai-compatible` provider (test/support/openai-stub.ts)
// and driven from outside: callers through the admin HTTP API, A2A through the real @a2a-js/sdk
// client, webhooks through plain HTTP. Nothing here reaches into the server's internals except
// `createOperatorToken` (which, like `peergate operator-token create`, needs database access and is
// never offered over HTTP).
//
// The scripted model reads the conversation it is sent: the first `scenario:<name>` in it picks a
// script, and the number of assistant turns so far picks the step, so scenarios run side by side
// and a run resumed on another instance carries on where it stopped.
import { createHash, randomBytes } from "node:crypto";
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type Message, Role, type StreamResponse, type Task } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/log.ts";
import { type RunningServer, type StartServerOptions, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase } from "../support/databases.ts";
import { eventually, eventuallyValue } from "../support/eventually.ts";
import {
  type ChatRequest,
  countAssistantTurns,
  createOpenAiStub,
  type OpenAiStub,
  readContent,
  readScenario,
  type Scenarios,
  type StubStep,
} from "../support/openai-stub.ts";
import { giveToSandboxUser } from "../support/sandbox-workspace.ts";

/** The model id every e2e server runs; priced at $0 in the test copy of models.yaml. */
export const scriptedModelId = "openai-compatible:scripted";

// ---------------------------------------------------------------- the scripted model

export { readScenario, type Scenarios } from "../support/openai-stub.ts";

export type ScriptedModel = {
  stub: OpenAiStub;
  baseUrl: string;
  /** The requests of one scenario, in order. */
  requestsOf(scenario: string): ChatRequest[];
  close(): Promise<void>;
};

/**
 * A chat-completions stub that plays `scenarios`. A scenario's last step repeats when the model
 * is asked again (a model that keeps calling tools); an unknown scenario answers "no script".
 */
export async function startScriptedModel(scenarios: Scenarios): Promise<ScriptedModel> {
  const stub = createOpenAiStub();
  stub.respondWith((request) => {
    const steps = scenarios[readScenario(request) ?? ""];
    if (!steps || steps.length === 0) return { text: "no script for this conversation" };
    return steps[Math.min(countAssistantTurns(request), steps.length - 1)] as StubStep;
  });
  const baseUrl = await stub.listen();
  return {
    stub,
    baseUrl,
    requestsOf: (scenario) =>
      stub.requests.filter((r) => readScenario(r.body) === scenario).map((r) => r.body),
    close: () => stub.close(),
  };
}

/** The tool results a model request carries, by tool call id. */
export function readToolResults(request: ChatRequest | undefined): Map<string, string> {
  return new Map(
    (request?.messages ?? [])
      .filter((m) => m.role === "tool")
      .map((m) => [m.tool_call_id ?? "", readContent(m)]),
  );
}

// ---------------------------------------------------------------- files

const tempDirs: string[] = [];

async function makeTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Removes the policy copies and workspaces this file made (after its servers stopped). */
export async function removeTempDirs(): Promise<void> {
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
}

/** Sets the agent's `tools:` line of a policies copy (agent.yaml) to `tools`. */
export async function setAgentTools(policiesDir: string, tools: readonly string[]): Promise<void> {
  const file = path.join(policiesDir, "agent.yaml");
  const agent = await readFile(file, "utf8");
  if (!/^tools: /m.test(agent)) throw new Error(`${file} has no tools: line to set`);
  await writeFile(file, agent.replace(/^tools: .*$/m, `tools: [${tools.join(", ")}]`));
}

/** A copy of the repository's policies/, with the scripted model priced (free). */
export async function copyPolicies(): Promise<string> {
  const dir = await makeTempDir("peergate-e2e-policies-");
  // Programs a test declares here (bin/) run in the sandbox as the workspace's owner, not root:
  // the directory must be searchable by that user, as an operator's policies directory would be.
  await chmod(dir, 0o755);
  await cp(repoPoliciesDir, dir, { recursive: true });
  const models = path.join(dir, "models.yaml");
  const text = await readFile(models, "utf8");
  await writeFile(
    models,
    text.replace(
      /^models:\n/m,
      `models:\n  "${scriptedModelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`,
    ),
  );
  return dir;
}

/** A workspace with a few files in it (as root, the unprivileged test user's: the sandbox runs as it). */
export async function createWorkspace(): Promise<string> {
  const dir = await makeTempDir("peergate-e2e-workspace-");
  await writeFile(path.join(dir, "README.md"), "# demo\n\nA workspace for the e2e tests.\n");
  await mkdir(path.join(dir, "notes"));
  await writeFile(path.join(dir, "notes", "todo.txt"), "- nothing yet\n");
  await mkdir(path.join(dir, "src"));
  await writeFile(path.join(dir, "src", "app.ts"), "export const answer = 42;\n");
  await giveToSandboxUser(dir);
  return dir;
}

/** Every file under `dir` with the SHA-256 of its bytes, and every directory: a tree's state. */
export async function snapshotTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const rel = path.relative(dir, full);
    out[rel] = entry.isFile()
      ? createHash("sha256")
          .update(await readFile(full))
          .digest("hex")
      : entry.isDirectory()
        ? "dir"
        : "other";
  }
  return out;
}

// ---------------------------------------------------------------- servers

export type PeergateOptions = {
  /** A real PostgreSQL; without it the embedded PGlite in the instance's data directory. */
  databaseUrl?: string;
  policiesDir: string;
  workspace: string;
  modelBaseUrl: string;
  /** Instances sharing a database share these. */
  adminToken: string;
  secretKey: string;
  /** More environment variables, as an operator would set them. */
  env?: Record<string, string>;
  /** What a test changes about the server (a short run heartbeat, lost notifications). */
  server?: StartServerOptions;
};

export type Peergate = {
  url: string;
  server: RunningServer;
  adminToken: string;
  /** The directory the agent works in (PEERGATE_WORKSPACE). */
  workspace: string;
  /** The instance's data directory (PEERGATE_DATA_DIR), removed by `stop()`. */
  dataDir: string;
  /** Log lines at warn and above, for a failing test to print. */
  logs: string[];
  /** Calls the admin API with the admin token; the body is parsed JSON (or undefined). */
  admin(
    method: string,
    pathname: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }>;
  /** A real a2a-js client (A2A 1.0) sending `Authorization: Bearer <token>`. */
  client(token: string): Promise<Client>;
  stop(): Promise<void>;
};

/** Settings two instances sharing one database must agree on. */
export function createSharedSecrets(): { adminToken: string; secretKey: string } {
  return {
    adminToken: `e2e-admin-${randomBytes(24).toString("hex")}`,
    secretKey: randomBytes(32).toString("hex"),
  };
}

export async function startPeergate(options: PeergateOptions): Promise<Peergate> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-e2e-data-"));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    PEERGATE_HOST: "127.0.0.1",
    PEERGATE_PORT: "0",
    PEERGATE_DATA_DIR: dataDir,
    PEERGATE_POLICIES_DIR: options.policiesDir,
    PEERGATE_WORKSPACE: options.workspace,
    PEERGATE_ADMIN_TOKEN: options.adminToken,
    PEERGATE_SECRET_KEY: options.secretKey,
    PEERGATE_MODEL: scriptedModelId,
    PEERGATE_MODEL_BASE_URL: options.modelBaseUrl,
    PEERGATE_MODEL_API_KEY: "e2e-model-key",
    PEERGATE_SHUTDOWN_TIMEOUT_MS: "2000",
    ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
    ...options.env,
  };
  const logs: string[] = [];
  // PEERGATE_TEST_LOG=stderr also prints them as they come (to read a failure's server side).
  const echo = process.env.PEERGATE_TEST_LOG === "stderr";
  const logger = createLogger({
    level: "warn",
    write: (line) => {
      logs.push(line);
      if (echo) process.stderr.write(`[peergate] ${line}\n`);
    },
  });
  const server = await startServer(loadConfig(env, dataDir), logger, env, options.server);

  const admin: Peergate["admin"] = async (method, pathname, body, headers = {}) => {
    const response = await fetch(`${server.url}/admin/v1${pathname}`, {
      method,
      headers: {
        authorization: `Bearer ${options.adminToken}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };

  const client = (token: string) => {
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("Authorization", `Bearer ${token}`);
      return fetch(input, { ...init, headers });
    };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    );
    return factory.createFromUrl(server.url);
  };

  return {
    url: server.url,
    server,
    adminToken: options.adminToken,
    workspace: options.workspace,
    dataDir,
    logs,
    admin,
    client,
    async stop() {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** What a suite's server is started with; each suite gets its own secrets and database. */
export type SuitePeergateOptions = Omit<
  PeergateOptions,
  "databaseUrl" | "adminToken" | "secretKey" | "workspace"
> & {
  /** Without one, a fresh workspace (createWorkspace). */
  workspace?: string;
};

/**
 * The server one suite runs against, on the database `kind` names: the embedded PGlite, or a new
 * database on the test PostgreSQL, which `stop()` drops once the server has stopped.
 */
export async function startPeergateOn(
  kind: "pglite" | "postgres",
  options: SuitePeergateOptions,
): Promise<Peergate> {
  const database =
    kind === "postgres" ? await createPostgresTestDatabase({ migrate: false }) : undefined;
  try {
    const peergate = await startPeergate({
      ...createSharedSecrets(),
      ...options,
      ...(database ? { databaseUrl: database.url } : {}),
      workspace: options.workspace ?? (await createWorkspace()),
    });
    return {
      ...peergate,
      async stop() {
        await peergate.stop();
        await database?.drop();
      },
    };
  } catch (error) {
    await database?.drop();
    throw error;
  }
}

/**
 * Two instances on one new PostgreSQL database, sharing secrets, policies and workspace: `a`
 * migrates the empty database first, `b` then finds it migrated. `stop()` stops both, then drops
 * the database.
 */
export async function startTwoInstances(
  options: SuitePeergateOptions & {
    /** Server options of instance B alone (A gets `options.server`). */
    serverB?: StartServerOptions;
  },
): Promise<{ a: Peergate; b: Peergate; stop(): Promise<void> }> {
  const database = await createPostgresTestDatabase({ migrate: false });
  const started: Peergate[] = [];
  const stop = async () => {
    await Promise.allSettled(started.map((p) => p.stop()));
    await database.drop();
  };
  try {
    const shared = {
      ...createSharedSecrets(),
      ...options,
      databaseUrl: database.url,
      workspace: options.workspace ?? (await createWorkspace()),
    };
    const a = await startPeergate(shared);
    started.push(a);
    const b = await startPeergate({
      ...shared,
      ...(options.serverB ? { server: options.serverB } : {}),
    });
    started.push(b);
    return { a, b, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Adds a caller through the admin API; returns its secret (a peer's bearer token). */
export async function addCaller(
  peergate: Peergate,
  input: Record<string, unknown>,
): Promise<{ name: string; secret: string }> {
  let created = await peergate.admin("POST", "/callers", input);
  if (created.status === 403 && created.body?.code === "operator-token-required") {
    // A caller above the floor needs the operator too: do as the operator would.
    const operatorToken = await createOperatorToken({
      services: peergate.server.services,
      actor: "system",
    });
    created = await peergate.admin("POST", "/callers", input, {
      "x-peergate-operator-token": operatorToken,
    });
  }
  if (created.status !== 201) {
    throw new Error(`adding caller failed: ${created.status} ${JSON.stringify(created.body)}`);
  }
  // A JWT peer has no static token (it authenticates with JWTs only): its secret is "".
  return { name: String(input.name), secret: (created.body.credential?.secret as string) ?? "" };
}

// ---------------------------------------------------------------- A2A

/** A user message in the SDK's protobuf shape. */
export function userMessage(text: string): Message {
  return {
    messageId: crypto.randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: "text", value: text }, mediaType: "", filename: "", metadata: undefined },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function textOf(
  parts: readonly { content?: { $case: string; value: unknown } }[] | undefined,
): string {
  return (parts ?? [])
    .map((p) => (p.content?.$case === "text" ? String(p.content.value) : ""))
    .join("");
}

export function asTask(result: unknown): Task {
  if (!result || typeof result !== "object" || !("status" in result)) {
    throw new Error(`expected a task, got ${JSON.stringify(result)}`);
  }
  return result as Task;
}

/** The run behind an A2A task (peergate keeps it in the task's metadata). */
export function readTaskRunId(task: Task): string {
  const runId = (task.metadata?.peergate as { runId?: unknown } | undefined)?.runId;
  if (typeof runId !== "string") throw new Error(`task ${task.id} names no run`);
  return runId;
}

/** Reads a stream to its end, or until `timeoutMs` (then throws). */
export async function collectStream(
  stream: AsyncGenerator<StreamResponse>,
  onEvent: (event: StreamResponse) => void = () => {},
  timeoutMs = 15_000,
): Promise<{ events: StreamResponse[]; error?: unknown }> {
  const events: StreamResponse[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the stream did not end in time")), timeoutMs);
  });
  try {
    await Promise.race([
      (async () => {
        for await (const event of stream) {
          events.push(event);
          onEvent(event);
        }
      })(),
      timeout,
    ]);
    return { events };
  } catch (error) {
    if (error instanceof Error && error.message === "the stream did not end in time") throw error;
    return { events, error };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `eventually` (test/support/eventually.ts) in the argument order test/console/ still calls it
 * with; everything else calls `eventually` itself. The deadline is never shorter than its own.
 */
export function waitFor<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 25_000,
  what = "a condition",
): Promise<T> {
  return eventually(what, check, { withinMs: Math.max(timeoutMs, 25_000) }) as Promise<T>;
}

/** Waits until the admin API shows the run in one of `statuses`; returns the run. */
export async function waitForRun(
  peergate: Peergate,
  runId: string,
  statuses: readonly string[],
  timeoutMs?: number,
  /** A further condition on the run (e.g. which call it is parked on). */
  accept: (run: any) => boolean = () => true,
): Promise<any> {
  const got = await eventuallyValue(
    `run ${runId} to be ${statuses.join(" or ")}`,
    async () => {
      const got = await peergate.admin("GET", `/runs/${runId}`);
      return { status: got.status, run: got.body?.run ?? got.body };
    },
    (got) => got.status === 200 && statuses.includes(got.run.status) && accept(got.run),
    timeoutMs === undefined ? {} : { withinMs: timeoutMs },
  );
  return got.run;
}
