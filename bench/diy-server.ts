// The do-it-yourself stack bench/a2a.ts compares peergate with: what a user would build instead of
// peergate for the same blocking SendMessage. The a2a-js SDK on express (`jsonRpcHandler`), a
// TaskStore in PostgreSQL (one jsonb row per task), a bearer check against a token table (sha256
// of the token), and an executor that makes one `generateText` call through the real
// `@ai-sdk/openai-compatible` provider to the same instant stub peergate calls, then publishes the
// same events (task, working, answer artifact, completed). No ceiling, no budgets, no audit, no
// run record. Its SQL goes through the same round-trip counter as peergate's
// (src/db/round-trips.ts), so the bench reports both counted alike.
//
// With `guarantees` (budgets for every caller) it is "DIY with peergate's guarantees": the bearer
// is checked against that module's callers table, and the executor wraps its model call in the
// start and end transactions of bench/diy-guarantees.ts (exact budgets, a durable run row, an audit
// event with each, the end written once); the task store's writes are the same.
//
// Run by bench/a2a.ts as a child (`--serve diy` or `--serve diy-guaranteed`) with
// DIY_DATABASE_URL, DIY_MODEL_BASE_URL and DIY_TOKENS (comma-separated bearer tokens to accept).
import { createHash, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import postgres from "postgres";
import { countRoundTrips, type RoundTripCounter } from "../src/db/round-trips.ts";
import { type Budgets, type Guarantees, openGuarantees } from "./diy-guarantees.ts";

export type DiyServer = {
  url: string;
  roundTrips: RoundTripCounter;
  stop(): Promise<void>;
};

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

export async function startDiyServer(input: {
  databaseUrl: string;
  modelBaseUrl: string;
  modelId: string;
  tokens: readonly string[];
  answerText: string;
  /** The caller's budgets: with them, peergate's guarantees (bench/diy-guarantees.ts). */
  guarantees?: Budgets;
  /** With guarantees: the start's COMMIT sent behind its statement (one round trip). */
  startCommitBehind?: boolean;
}): Promise<DiyServer> {
  const { Role, TaskState } = await import("@a2a-js/sdk");
  const { AgentEvent, DefaultRequestHandler } = await import("@a2a-js/sdk/server");
  const { agentCardHandler, jsonRpcHandler } = await import("@a2a-js/sdk/server/express");
  const express = (await import("express")).default;
  const { generateText } = await import("ai");
  const { createOpenAICompatible } = await import("@ai-sdk/openai-compatible");
  type Card = import("@a2a-js/sdk").AgentCard;
  type Task = import("@a2a-js/sdk").Task;
  type Executor = import("@a2a-js/sdk/server").AgentExecutor;
  type Store = import("@a2a-js/sdk/server").TaskStore;

  const counted = countRoundTrips(
    postgres(input.databaseUrl, { max: 10, onnotice: () => {} }) as never,
  );
  const sql = counted.sql as unknown as postgres.Sql;
  // Through `unsafe` (what the counter wraps), with parameters, as a driver user writes them.
  const query = <Row>(text: string, params: unknown[] = []) =>
    sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<Row[]>;
  await query("create table if not exists diy_tasks (id text primary key, owner text, task jsonb)");
  let guarantees: Guarantees | undefined;
  if (input.guarantees) {
    const callers = input.tokens.map((token, i) => ({
      name: `caller-${i + 1}`,
      tokenSha256: sha256(token),
    }));
    guarantees = await openGuarantees(
      query,
      sql,
      callers,
      input.guarantees,
      input.startCommitBehind,
    );
  } else {
    await query("create table if not exists diy_tokens (token_sha256 text primary key, name text)");
    for (const [i, token] of input.tokens.entries()) {
      await query("insert into diy_tokens values ($1, $2) on conflict do nothing", [
        sha256(token),
        `caller-${i + 1}`,
      ]);
    }
  }
  const authenticate = guarantees
    ? "select name from diyg_callers where token_sha256 = $1 and not revoked"
    : "select name from diy_tokens where token_sha256 = $1";

  const model = createOpenAICompatible({
    name: "openai-compatible",
    baseURL: input.modelBaseUrl,
    apiKey: "bench",
  }).chatModel(input.modelId.replace(/^openai-compatible:/, ""));

  const store: Store = {
    async save(task, context) {
      await query(
        `insert into diy_tasks (id, owner, task) values ($1, $2, $3::text::jsonb)
         on conflict (id) do update set task = excluded.task`,
        [task.id, context.user?.userName ?? "", JSON.stringify(task)],
      );
    },
    async load(taskId, context) {
      const [row] = await query<{ task: Task }>(
        "select task from diy_tasks where id = $1 and owner = $2",
        [taskId, context.user?.userName ?? ""],
      );
      return row?.task;
    },
    async list() {
      throw new Error("the bench does not list tasks");
    },
  };

  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card: Card = {
    name: "diy",
    description: "The do-it-yourself stack: a2a-js, PostgreSQL, one generateText call",
    version: "1.0.0",
    supportedInterfaces: [
      { url: `${url}/a2a`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [],
    signatures: [],
  };
  const text = (value: string) => ({
    content: { $case: "text" as const, value },
    mediaType: "text/plain",
    filename: "",
    metadata: undefined,
  });
  const readText = (message: { parts?: unknown[] }) =>
    (message.parts ?? [])
      .map((p) => {
        const part = p as { text?: string; content?: { $case?: string; value?: unknown } };
        return part.text ?? (part.content?.$case === "text" ? String(part.content.value) : "");
      })
      .join("");
  const executor: Executor = {
    async execute(context, bus) {
      const ids = { taskId: context.taskId, contextId: context.contextId };
      const caller = context.context.user?.userName ?? "";
      const prompt = readText(context.userMessage);
      const runId = randomUUID();
      const admitted = await guarantees?.start({
        caller,
        runId,
        taskId: ids.taskId,
        input: prompt,
      });
      if (guarantees && !admitted) throw new Error("rate limited: the caller's budget is spent");
      const status = (state: (typeof TaskState)[keyof typeof TaskState], message?: string) =>
        AgentEvent.statusUpdate({
          ...ids,
          status: {
            state,
            timestamp: new Date().toISOString(),
            message: message
              ? {
                  messageId: randomUUID(),
                  ...ids,
                  role: Role.ROLE_AGENT,
                  parts: [text(message)],
                  metadata: undefined,
                  extensions: [],
                  referenceTaskIds: [],
                }
              : undefined,
          },
          metadata: undefined,
        });
      bus.publish(
        AgentEvent.task({
          id: ids.taskId,
          contextId: ids.contextId,
          status: {
            state: TaskState.TASK_STATE_SUBMITTED,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          artifacts: [],
          history: [context.userMessage],
          metadata: {},
        }),
      );
      bus.publish(status(TaskState.TASK_STATE_WORKING));
      const call = generateText({
        model,
        messages: [{ role: "user", content: prompt }],
        ...(admitted ? { maxOutputTokens: Math.max(1, admitted.grantedTokens) } : {}),
      });
      let result: Awaited<typeof call>;
      try {
        result = await call;
      } catch (error) {
        await guarantees?.end({ caller, runId, status: "failed", text: "", tokens: 0, costUsd: 0 });
        throw error;
      }
      if (guarantees) {
        // The bench's model is priced at $0, as in peergate's bench policies.
        const tokens = result.usage.totalTokens ?? 0;
        const ended = await guarantees.end({
          caller,
          runId,
          status: "completed",
          text: result.text,
          tokens,
          costUsd: 0,
        });
        if (!ended) throw new Error("the run had already ended");
      }
      bus.publish(
        AgentEvent.artifactUpdate({
          ...ids,
          artifact: {
            artifactId: `answer-${ids.taskId}`,
            name: "answer",
            description: "The agent's answer",
            parts: [text(result.text || input.answerText)],
            metadata: undefined,
            extensions: [],
          },
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
      );
      bus.publish(status(TaskState.TASK_STATE_COMPLETED, result.text));
      bus.finished();
    },
    async cancelTask() {},
  };

  const handler = new DefaultRequestHandler(card, store, executor);
  const app = express();
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
  app.use(
    "/a2a",
    jsonRpcHandler({
      requestHandler: handler,
      userBuilder: async (req) => {
        const match = /^Bearer (.+)$/.exec(req.headers.authorization ?? "");
        const [row] = match?.[1]
          ? await query<{ name: string }>(authenticate, [sha256(match[1])])
          : [];
        if (!row) throw new Error("unauthenticated");
        return { isAuthenticated: true, userName: row.name };
      },
    }),
  );
  server.on("request", app);
  return {
    url,
    roundTrips: counted.counter,
    stop: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // Every run ended: its guarantees must balance (said on stderr, the bench's own).
      const wrong = (await guarantees?.check()) ?? [];
      if (wrong.length > 0) process.stderr.write(`diy-guaranteed: ${wrong.join(", ")}\n`);
      await sql.end({ timeout: 2 });
    },
  };
}
