// Shared pieces of the A2A suites: a scripted fake RunEngine, a fake `authenticate`, and a
// harness that serves the real routes on 127.0.0.1 so the real @a2a-js/sdk client can talk to
// them.
//
// The fake engine reads the last user message of a run and acts on its first word:
//   park      a tool call, then the run parks (waits for an operator)
//   fail      the run fails with a caller-facing message
//   limit     start() throws RateLimitedError (retry after 7 s)
//   slow      streams a little text, then runs until cancelled (or 20 s)
//   gate      streams a little text, then waits for `engine.release(taskId)`
//   boom      start() throws a plain Error (an internal failure)
//   anything  a tool call (started, completed), the answer in two deltas, completed:
//             "echo: <text>"
import { randomBytes, randomUUID } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { type AgentCard, type Message, Role } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { serve } from "@hono/node-server";
import type { ModelMessage } from "ai";
import { Hono, type MiddlewareHandler } from "hono";
import { requestId } from "hono/request-id";
import { type CardSigningKey, deriveCardSigningKey } from "../../src/a2a/card-signing.ts";
import { type A2aService, createA2aService } from "../../src/a2a/service.ts";
import type { Database } from "../../src/db/client.ts";
import { type Caller, callers } from "../../src/db/schema.ts";
import { NotFoundError, RateLimitedError, UnauthenticatedError } from "../../src/errors.ts";
import type { A2aEnv } from "../../src/http/middleware/a2a-auth.ts";
import { createErrorHandler } from "../../src/http/problem.ts";
import { a2aRoutes } from "../../src/http/routes/a2a.ts";
import { loadPolicies } from "../../src/load-policies.ts";
import { silentLogger } from "../../src/log.ts";
import type {
  RunEngine,
  RunEvent,
  RunHandle,
  RunOutcome,
  StartRunRequest,
} from "../../src/runs/types.ts";

export const agentYaml = `name: test-peer
description: A peer used by the A2A tests
version: "2.3.4"
skills:
  - id: echo
    name: Echo
    description: Says back what it is told
    tags: [echo]
    examples: ["say hello"]
  - id: time
    name: Time
    description: Tells the time
    tags: [time]
tools: []
`;

function lastUserText(messages: ModelMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const m = messages[i];
    if (m?.role === "user") return typeof m.content === "string" ? m.content : "";
  }
  return "";
}

type LiveRun = {
  runId: string;
  taskId: string | undefined;
  finish: (outcome: Omit<RunOutcome, "runId" | "messages">) => void;
};

export type FakeEngine = RunEngine & {
  readonly starts: StartRunRequest[];
  readonly cancels: { runId: string; reason: string }[];
  /** Completes a `gate` run of this task. */
  release(taskId: string, text?: string): void;
  /** Runs still going. */
  live(): number;
};

/** A fake run engine; given a database, it writes a request's `atStart` rows as the real one does. */
export function createFakeEngine(db?: Database["db"]): FakeEngine {
  const starts: StartRunRequest[] = [];
  const cancels: { runId: string; reason: string }[] = [];
  const runs = new Map<string, LiveRun>();
  const gates = new Map<string, (text?: string) => void>();

  async function start(
    request: StartRunRequest,
    onEvent: (event: RunEvent) => void = () => {},
  ): Promise<RunHandle> {
    const text = lastUserText(request.messages);
    const word = text.split(/\s+/, 1)[0] ?? "";
    if (word === "limit") throw new RateLimitedError("too many runs for this caller", 7);
    if (word === "boom") throw new Error("model provider exploded: secret-internal-detail");
    starts.push(request);
    const runId = randomUUID();
    const writes = request.atStart?.(runId) ?? [];
    if (db && writes.length > 0) {
      await db.transaction(async (tx) => {
        for (const write of writes) await tx.execute(write);
      });
    }
    let settle!: (outcome: RunOutcome) => void;
    const outcome = new Promise<RunOutcome>((resolve) => {
      settle = resolve;
    });
    const live: LiveRun = {
      runId,
      taskId: request.a2a?.taskId,
      finish: (o) => {
        if (!runs.delete(runId)) return;
        settle({ runId, messages: request.messages, ...o });
      },
    };
    runs.set(runId, live);

    // A gate can be released before its first events: the release then waits for them.
    let gateOpen = false;
    let released = false;
    let releasedText: string | undefined;
    const finishGate = (answer?: string) => {
      onEvent({ type: "text-delta", delta: "way" });
      live.finish({ status: "completed", text: answer ?? "half way" });
    };
    if (word === "gate" && live.taskId) {
      gates.set(live.taskId, (answer) => {
        released = true;
        releasedText = answer;
        if (gateOpen) finishGate(answer);
      });
    }

    // Events come after start() resolves, as a real engine's would.
    setTimeout(() => {
      onEvent({ type: "status", status: "working" });
      switch (word) {
        case "park":
          onEvent({ type: "tool-call", callId: "c1", tool: "web_fetch", state: "parked" });
          live.finish({ status: "parked" });
          break;
        case "fail":
          live.finish({
            status: "failed",
            error: {
              code: "budget-exceeded",
              message: "The run stopped: its token budget ran out.",
            },
          });
          break;
        case "slow": {
          onEvent({ type: "text-delta", delta: "thinking" });
          const timer = setTimeout(
            () => live.finish({ status: "completed", text: "late" }),
            20_000,
          );
          timer.unref();
          break;
        }
        case "gate":
          onEvent({ type: "text-delta", delta: "half " });
          gateOpen = true;
          if (released) finishGate(releasedText);
          break;
        default: {
          onEvent({ type: "tool-call", callId: "c1", tool: "read_file", state: "started" });
          onEvent({ type: "tool-call", callId: "c1", tool: "read_file", state: "completed" });
          const answer = `echo: ${text}`;
          onEvent({ type: "text-delta", delta: answer.slice(0, 6) });
          onEvent({ type: "text-delta", delta: answer.slice(6) });
          live.finish({ status: "completed", text: answer });
        }
      }
    }, 5);
    return { runId, outcome };
  }

  async function cancel(runId: string, reason: string): Promise<boolean> {
    cancels.push({ runId, reason });
    const live = runs.get(runId);
    if (!live) return false;
    setTimeout(() => live.finish({ status: "canceled" }), 5);
    return true;
  }

  return {
    start,
    cancel,
    // The fake's runs never ask their caller: an answer finds no run, as for another caller's.
    async answerInput() {
      throw new NotFoundError("no such run");
    },
    starts,
    cancels,
    release(taskId, text) {
      const open = gates.get(taskId);
      gates.delete(taskId);
      open?.(text);
    },
    live: () => runs.size,
  };
}

export type Harness = {
  baseUrl: string;
  /** The key the card is signed with. */
  cardSigningKey: CardSigningKey;
  a2a: A2aService;
  engine: FakeEngine;
  callers: Map<string, Caller>;
  /** fetch that sends `Authorization: Bearer test-<name>`. */
  fetchAs(name: string): typeof fetch;
  /** A real SDK client speaking A2A 1.0. */
  client(name: string): Promise<Client>;
  /** A real SDK client speaking A2A 1.0 over the HTTP+JSON binding, chosen from the card. */
  restClient(name: string): Promise<Client>;
  /** A real SDK client in its v0.3 compat mode, built from the v0.3 card. */
  legacyClient(name: string): Promise<Client>;
  /** POSTs a JSON-RPC body to /a2a. */
  rpc(name: string | undefined, body: unknown, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
};

export async function startHarness(
  database: Database,
  callerNames: readonly string[] = ["alice", "bob"],
  options: {
    keepAliveMs?: number;
    runs?: RunEngine;
    grpcAddress?: string;
    /** The task event log's bounds and poll (src/a2a/task-events.ts). */
    taskEvents?: { maxReplayEvents?: number; maxReplayAgeMs?: number; pollMs?: number };
  } = {},
): Promise<Harness> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-a2a-"));
  await writeFile(path.join(dir, "agent.yaml"), agentYaml);
  const policies = await loadPolicies(dir);
  await rm(dir, { recursive: true, force: true });

  const byName = new Map<string, Caller>();
  for (const name of callerNames) {
    const [row] = await database.db
      .insert(callers)
      .values({ name, kind: "peer", tier: "public" })
      .returning();
    if (!row) throw new Error("caller not inserted");
    byName.set(name, row);
  }
  const authenticate: MiddlewareHandler<A2aEnv> = async (c, next) => {
    const match = /^Bearer test-(.+)$/.exec(c.req.header("authorization") ?? "");
    const caller = match?.[1] ? byName.get(match[1]) : undefined;
    if (!caller) throw new UnauthenticatedError("not a test caller");
    c.set("caller", caller);
    await next();
  };

  let fetchHandler: (request: Request) => Response | Promise<Response> = () =>
    new Response("starting", { status: 503 });
  const server = serve({
    fetch: (request) => fetchHandler(request),
    port: 0,
    hostname: "127.0.0.1",
  });
  if (!server.listening) await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;

  const engine = createFakeEngine(database.db);
  const cardSigningKey = await deriveCardSigningKey(randomBytes(32));
  const a2a = createA2aService({
    cardSigningKey,
    database,
    policies,
    publicUrl: baseUrl,
    runs: options.runs ?? engine,
    logger: silentLogger,
    textFlushMs: 1,
    ...(options.grpcAddress ? { grpcAddress: options.grpcAddress } : {}),
    ...(options.taskEvents ? { taskEvents: options.taskEvents } : {}),
  });
  const app = new Hono();
  app.use(requestId());
  app.route("/", a2aRoutes({ a2a, authenticate, keepAliveMs: options.keepAliveMs ?? 60_000 }));
  app.onError(createErrorHandler(silentLogger));
  fetchHandler = (request) => app.fetch(request);

  const fetchAs =
    (name: string): typeof fetch =>
    (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("Authorization", `Bearer test-${name}`);
      return fetch(input, { ...init, headers });
    };

  const client = (name: string) => {
    const fetchImpl = fetchAs(name);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    );
    return factory.createFromUrl(baseUrl);
  };

  const restClient = (name: string) => {
    const fetchImpl = fetchAs(name);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new RestTransportFactory({ fetchImpl })],
        preferredTransports: ["HTTP+JSON"],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    );
    return factory.createFromUrl(baseUrl);
  };

  const legacyClient = async (name: string) => {
    const fetchImpl = fetchAs(name);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
      }),
    );
    // The v0.3 card (no A2A-Version header); the resolver's normalizeAgentCard translates it.
    const card = (await (
      await fetch(`${baseUrl}/.well-known/agent-card.json`)
    ).json()) as AgentCard;
    return factory.createFromAgentCard(card);
  };

  const rpc = (name: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${baseUrl}/a2a`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        ...(name ? { Authorization: `Bearer test-${name}` } : {}),
        ...headers,
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });

  return {
    baseUrl,
    cardSigningKey,
    a2a,
    engine,
    callers: byName,
    fetchAs,
    client,
    restClient,
    legacyClient,
    rpc,
    async close() {
      await a2a.close();
      server.close();
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      if (server.listening) await once(server, "close");
    },
  };
}

/** A user message in the SDK's protobuf shape. */
export function userMessage(text: string, extra: Partial<Message> = {}): Message {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: "text", value: text }, mediaType: "", filename: "", metadata: undefined },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

/** A v1.0 JSON-RPC SendMessage body. */
export function sendBody(text: string, message: Record<string, unknown> = {}, id: unknown = 1) {
  return {
    jsonrpc: "2.0",
    id,
    method: "SendMessage",
    params: {
      message: {
        messageId: randomUUID(),
        role: "ROLE_USER",
        parts: [{ text }],
        ...message,
      },
    },
  };
}

/** Polls until `check` returns a value (or fails after `timeoutMs`). */
export async function waitFor<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("waitFor timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
