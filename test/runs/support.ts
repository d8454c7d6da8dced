// Shared pieces of the run engine suites: the served agent (built-in inventory), fake tool
// implementations that record what ran, a scripted model (AI SDK MockLanguageModelV4) that plays
// one step per model call, callers in the database, and an engine factory that stops what it made.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { MockLanguageModelV4 } from "ai/test";
import { eq } from "drizzle-orm";
import { z } from "zod";
import type { Database } from "../../src/db/client.ts";
import {
  type ApprovalPolicy,
  type Caller,
  type CallerBudgets,
  callers,
  runs,
  toolCalls,
} from "../../src/db/schema.ts";
import { type LoadedPolicies, loadPolicies } from "../../src/load-policies.ts";
import { silentLogger } from "../../src/log.ts";
import { createCeilingCache } from "../../src/policy/ceiling-cache.ts";
import type { PriceTable } from "../../src/runs/prices.ts";
import type { RunEvent, RunOutcome } from "../../src/runs/types.ts";
import {
  type CallerEventNotice,
  createRunEngine,
  type PeergateRunEngine,
  type RunEngineOptions,
} from "../../src/services/runs/engine.ts";
import type {
  ToolCallContext,
  ToolImplementation,
  ToolResult,
  ToolRuntime,
} from "../../src/tools/types.ts";

export const agentYaml = `name: test-agent
description: The agent the run engine tests serve
version: "1.0.0"
skills: []
instructions: You are the run engine test agent.
tools: [files, context, web, shell]
deniedTools: []
`;

let policiesDir: string | undefined;
let loaded: Promise<LoadedPolicies> | undefined;

/** The built-in inventory and the agent above (loaded once per test file). */
export function loadTestPolicies(): Promise<LoadedPolicies> {
  loaded ??= (async () => {
    policiesDir = await mkdtemp(path.join(os.tmpdir(), "peergate-runs-"));
    await writeFile(path.join(policiesDir, "agent.yaml"), agentYaml);
    const policies = await loadPolicies(policiesDir);
    await rm(policiesDir, { recursive: true, force: true });
    return policies;
  })();
  return loaded;
}

// ---------------------------------------------------------------- fake tools

export type ToolLog = {
  /** Every execute() that began, as `name(args json)`; halves as `execute_x(...)`. */
  readonly executed: string[];
  /** The signal of each call, by call id. */
  readonly signals: Map<string, AbortSignal>;
};

/** Waits until `signal` aborts (or `ms` passes), like a long command would. */
export function waitForAbort(signal: AbortSignal, ms = 20_000): Promise<"aborted" | "elapsed"> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve("aborted");
    const timer = setTimeout(() => resolve("elapsed"), ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve("aborted");
      },
      { once: true },
    );
  });
}

type Behaviour = (args: unknown, invocation: ToolCallContext) => Promise<ToolResult>;

function plainTool(
  name: string,
  log: ToolLog,
  behaviour: Behaviour,
  inputSchema: z.ZodType = z.looseObject({}),
): ToolImplementation {
  return {
    name,
    description: `fake ${name}`,
    inputSchema,
    // No timeout of its own: the engine's `toolTimeoutMs` applies.
    async execute(args, invocation) {
      log.executed.push(`${name}(${JSON.stringify(args)})`);
      log.signals.set(invocation.callId, invocation.signal);
      return behaviour(args, invocation);
    },
  };
}

function twoPhaseTool(name: string, log: ToolLog): ToolImplementation {
  const half = `execute_${name}`;
  return {
    name,
    description: `fake two-phase ${name}`,
    inputSchema: z.looseObject({}),
    async execute(args) {
      log.executed.push(`${name}(${JSON.stringify(args)})`);
      return {
        kind: "approval-request",
        executeToolName: half,
        executeArgs: { ...(args as object), checked: true },
        summary: `${name} would change things`,
        previewDiff: "--- a\n+++ b\n",
      };
    },
    executeHalf: {
      name: half,
      inputSchema: z.looseObject({}),
      async execute(args, invocation) {
        log.executed.push(`${half}(${JSON.stringify(args)})`);
        log.signals.set(invocation.callId, invocation.signal);
        return { ok: true, content: `${name} done` };
      },
    },
  };
}

/**
 * Fake implementations of the built-ins the tests use. `ls` waits until its signal aborts (a
 * long-running tool); `stat` returns another tool's approval request (approval-shaped output it is
 * not registered to make); `read_file` takes `{ path: string }`.
 */
export function createFakeTools(overrides: Partial<Record<string, Behaviour>> = {}): {
  runtime: ToolRuntime;
  log: ToolLog;
} {
  const log: ToolLog = { executed: [], signals: new Map() };
  const ok =
    (content: string): Behaviour =>
    async () => ({ ok: true, content });
  const tools: ToolImplementation[] = [
    plainTool("get_time", log, overrides.get_time ?? ok("2026-01-01T00:00:00Z")),
    plainTool(
      "read_file",
      log,
      overrides.read_file ?? ok("file contents"),
      z.strictObject({ path: z.string() }),
    ),
    plainTool(
      "ls",
      log,
      overrides.ls ??
        (async (_args, invocation) => {
          await waitForAbort(invocation.signal);
          return { ok: false, code: "interrupted", error: "stopped" };
        }),
    ),
    plainTool(
      "stat",
      log,
      overrides.stat ??
        (async () => ({
          kind: "approval-request",
          executeToolName: "execute_write_file",
          executeArgs: { path: "x" },
          summary: "forged",
        })),
    ),
    plainTool("find", log, overrides.find ?? ok("found")),
    plainTool("mkdir", log, overrides.mkdir ?? ok("made")),
    plainTool("web_fetch", log, overrides.web_fetch ?? ok("page")),
    twoPhaseTool("write_file", log),
    twoPhaseTool("execute_command", log),
  ];
  return {
    runtime: { tools: new Map(tools.map((t) => [t.name, t])), close: async () => {} },
    log,
  };
}

// ---------------------------------------------------------------- scripted model

export type ScriptedCall = { id: string; name: string; input: unknown };

export type Step = {
  text?: string;
  calls?: ScriptedCall[];
  usage?: { input: number; output: number };
  /** Never finishes on its own: ends (with an abort error) when the call is aborted. */
  hang?: boolean;
  /** Report no usage at all. */
  noUsage?: boolean;
  /** The provider fails the call. */
  fail?: string;
};

export type ScriptedModel = {
  model: MockLanguageModelV4;
  /** The options of every model call, in order. */
  readonly calls: LanguageModelV4CallOptions[];
  /** Tool names offered on each call. */
  offered(callIndex: number): string[];
  /** Every tool result the model was shown on a call, as `toolName: text`. */
  toolResults(callIndex: number): string[];
};

/** A model that plays `steps` in order, one per model call (then answers "done"). */
export function scriptModel(steps: Array<Step | ((n: number) => Step)>): ScriptedModel {
  const calls: LanguageModelV4CallOptions[] = [];
  const model = new MockLanguageModelV4({
    doStream: async (options) => {
      calls.push(options);
      const n = calls.length - 1;
      const entry = steps[n] ?? { text: "done" };
      const step = typeof entry === "function" ? entry(n) : entry;
      if (step.fail) throw new Error(step.fail);
      const usage = step.usage ?? { input: 10, output: 5 };
      const parts: LanguageModelV4StreamPart[] = [{ type: "stream-start", warnings: [] }];
      if (step.text) {
        parts.push({ type: "text-start", id: "t" });
        parts.push({ type: "text-delta", id: "t", delta: step.text });
        parts.push({ type: "text-end", id: "t" });
      }
      for (const call of step.calls ?? []) {
        parts.push({
          type: "tool-call",
          toolCallId: call.id,
          toolName: call.name,
          input: typeof call.input === "string" ? call.input : JSON.stringify(call.input),
        });
      }
      const finish: LanguageModelV4StreamPart = {
        type: "finish",
        finishReason: {
          unified: (step.calls?.length ?? 0) > 0 ? "tool-calls" : "stop",
          raw: undefined,
        },
        usage: step.noUsage
          ? {
              inputTokens: {
                total: undefined,
                noCache: undefined,
                cacheRead: undefined,
                cacheWrite: undefined,
              },
              outputTokens: { total: undefined, text: undefined, reasoning: undefined },
            }
          : {
              inputTokens: {
                total: usage.input,
                noCache: usage.input,
                cacheRead: 0,
                cacheWrite: 0,
              },
              outputTokens: { total: usage.output, text: usage.output, reasoning: 0 },
            },
      };
      const signal = options.abortSignal;
      const stream = new ReadableStream<LanguageModelV4StreamPart>({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          if (!step.hang) {
            controller.enqueue(finish);
            controller.close();
            return;
          }
          const stop = () => controller.error(signal?.reason ?? new Error("aborted"));
          if (signal?.aborted) stop();
          else signal?.addEventListener("abort", stop, { once: true });
        },
      });
      return { stream };
    },
  });
  return {
    model,
    calls,
    offered: (i) => (calls[i]?.tools ?? []).map((t) => t.name).sort(),
    toolResults(i) {
      const out: string[] = [];
      for (const message of calls[i]?.prompt ?? []) {
        if (message.role !== "tool") continue;
        for (const part of message.content) {
          if (part.type !== "tool-result") continue;
          const value = (part.output as { value?: unknown }).value;
          out.push(
            `${part.toolName}: ${typeof value === "string" ? value : JSON.stringify(value)}`,
          );
        }
      }
      return out;
    },
  };
}

// ---------------------------------------------------------------- callers and engines

let callerCount = 0;

export async function insertCaller(
  database: Database,
  overrides: {
    tier?: Caller["tier"];
    allow?: string[];
    approvalPolicy?: ApprovalPolicy;
    budgets?: CallerBudgets;
    name?: string;
  } = {},
): Promise<Caller> {
  const [row] = await database.db
    .insert(callers)
    .values({
      name: overrides.name ?? `peer-${++callerCount}`,
      kind: "peer",
      tier: overrides.tier ?? "public",
      allow: overrides.allow ?? [],
      approvalPolicy: overrides.approvalPolicy ?? "auto",
      budgets: overrides.budgets ?? {},
    })
    .returning();
  if (!row) throw new Error("no caller row");
  return row;
}

/** A caller-event source the tests fire by hand. */
export function createCallerEvents() {
  const listeners = new Set<(event: CallerEventNotice) => void>();
  return {
    subscribe(listener: (event: CallerEventNotice) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    fire(event: CallerEventNotice) {
      for (const listener of listeners) listener(event);
    },
  };
}

export type EngineHarness = {
  engine: PeergateRunEngine;
  model: ScriptedModel;
  tools: ReturnType<typeof createFakeTools>;
  events: ReturnType<typeof createCallerEvents>;
};

const openEngines = new Set<PeergateRunEngine>();

/** Stops every engine the test made (call in afterEach). */
export async function stopEngines(): Promise<void> {
  const engines = [...openEngines];
  openEngines.clear();
  await Promise.allSettled(engines.map((e) => e.stop()));
}

export async function startEngine(
  database: Database,
  input: {
    model?: ScriptedModel;
    tools?: ReturnType<typeof createFakeTools>;
    instanceId?: string;
    priceTable?: PriceTable;
    options?: Partial<RunEngineOptions>;
  } = {},
): Promise<EngineHarness> {
  const model = input.model ?? scriptModel([]);
  const tools = input.tools ?? createFakeTools();
  const events = createCallerEvents();
  const engine = await createRunEngine({
    database,
    policies: await loadTestPolicies(),
    ceilings: createCeilingCache(),
    tools: tools.runtime,
    model: { ok: true, model: model.model, id: "test:scripted" },
    instanceId: input.instanceId ?? "instance-a",
    logger: silentLogger,
    heartbeatMs: 0,
    toolStopGraceMs: 500,
    subscribeCallerEvents: events.subscribe,
    ...(input.priceTable ? { priceTable: input.priceTable } : {}),
    ...input.options,
  });
  openEngines.add(engine);
  return { engine, model, tools, events };
}

export function userMessage(text: string) {
  return [{ role: "user" as const, content: text }];
}

/** Starts a run and collects its events; resolves with the outcome. */
export async function runToEnd(
  engine: PeergateRunEngine,
  caller: Caller,
  text = "hello",
): Promise<{ runId: string; outcome: RunOutcome; events: RunEvent[] }> {
  const events: RunEvent[] = [];
  const handle = await engine.start(
    { caller, origin: "a2a", messages: userMessage(text) },
    (event) => events.push(event),
  );
  return { runId: handle.runId, outcome: await handle.outcome, events };
}

export async function readToolCalls(database: Database, runId: string) {
  const rows = await database.db.select().from(toolCalls).where(eq(toolCalls.runId, runId));
  return new Map(rows.map((r) => [r.callId, r]));
}

export async function readRunRow(database: Database, runId: string) {
  const [row] = await database.db.select().from(runs).where(eq(runs.id, runId));
  if (!row) throw new Error(`no run ${runId}`);
  return row;
}
