// The run engine (DESIGN §3-5): admits a caller's run (concurrency and daily limits in Postgres,
// checked and reserved under a per-caller lock), computes its effective tool set, runs the AI SDK
// loop through the executor's gate, enforces budgets while it works, parks it for an operator,
// resumes it on whichever instance the operator answers, and stops it on cancel, revocation,
// deadline or shutdown with every tool call recorded.
//
// Several instances share one database. Each registers itself and heartbeats the runs it
// executes; a run whose heartbeat goes stale is marked `interrupted` by whichever instance notices
// first (and by `recoverRuns()` at start). A cancel for a run executing elsewhere travels over
// NOTIFY `peergate_runs`; a revoked caller's runs are stopped by every instance on its caller event.
//
// @example
// const engine = await createRunEngine({ database, policies, ceilings, tools, model, instanceId,
//   logger, subscribeCallerEvents: directory.onCallerEvent, priceTable });
// const { runId, outcome } = await engine.start({ caller, origin: "a2a", messages }, onEvent);
import { randomUUID } from "node:crypto";
import { realpath } from "node:fs/promises";
import { hostname } from "node:os";
import type { ModelMessage } from "ai";
import { appendAuditEvent } from "../db/audit.ts";
import type { Database } from "../db/client.ts";
import type {
  Caller,
  PendingApproval,
  Run,
  RunBudgetUsed,
  RunError,
  RunStatus,
} from "../db/schema.ts";
import { storableText } from "../db/storable.ts";
import {
  ConflictError,
  NotFoundError,
  RateLimitedError,
  UnauthenticatedError,
  UnavailableError,
  ValidationError,
} from "../errors.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import type { Logger } from "../log.ts";
import type { CeilingCache } from "../policy/ceiling-cache.ts";
import { type EffectiveToolSet, effectiveToolSet } from "../policy/effective-set.ts";
import type { ToolRuntime } from "../tools/types.ts";
import {
  createBudgetMeters,
  describeBudgetExceeded,
  formatUtcDay,
  hasCostBudget,
  readRunLimits,
  secondsUntilNextUtcDay,
  zeroUsage,
} from "./budgets.ts";
import { getRun, type RunDetail } from "./get-run.ts";
import { type ListRunsInput, listRuns, type RunSummary } from "./list-runs.ts";
import { buildModelTools } from "./model-tools.ts";
import { emptyPriceTable, findModelPrice, type ModelPrice, type PriceTable } from "./prices.ts";
import type { ResolvedModel } from "./resolve-model.ts";
import { runSegment, type SegmentEnd } from "./run-loop.ts";
import {
  addDailyUsage,
  chargeStep,
  claimParkedRun,
  closeParkedRun,
  countActiveRuns,
  createToolCallRecorder,
  finishRun,
  heartbeat,
  insertRun,
  isCallerRevoked,
  listCallIds,
  listExpiredParkedRuns,
  listRunsRejectedByRevocation,
  lockCallerRuns,
  lockRun,
  parkRun,
  readCaller,
  readDailyTotals,
  readRun,
  recoverOrphanedRuns,
  registerInstance,
  removeInstance,
  saveMessages,
} from "./run-store.ts";
import type { ApprovalDecision, BatchDeps, ToolCallRecorder } from "./tool-batch.ts";
import type { RunEngine, RunEvent, RunHandle, RunOutcome, StartRunRequest } from "./types.ts";

/** The NOTIFY channel that carries cancels to the instance executing a run. */
export const runsChannel = "peergate_runs";

/** What the engine needs of a caller event (src/services/caller-events.ts sends more). */
export type CallerEventNotice = { readonly callerId: string; readonly change: string };

export type ModelSource =
  | ResolvedModel
  | ((run: { readonly runId: string; readonly callerId: string }) => ResolvedModel);

export type RunEngineOptions = {
  readonly database: Database;
  /** The loaded policy files, or a getter that returns the current ones after a reload. */
  readonly policies: LoadedPolicies | (() => LoadedPolicies);
  readonly ceilings: CeilingCache;
  readonly tools: ToolRuntime;
  /** The model runs use (resolveModel), or a function choosing one per run. */
  readonly model: ModelSource;
  /** Unique per process (e.g. `${hostname}-${pid}-${random}`); runs name their owner with it. */
  readonly instanceId: string;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** The workspace root handed to tools. Default: the current directory. */
  readonly workspace?: string;
  /** Caller events (the caller directory's `onCallerEvent`): `revoked` stops the caller's runs. */
  readonly subscribeCallerEvents?: (listener: (event: CallerEventNotice) => void) => () => void;
  readonly priceTable?: PriceTable;
  /** How long a parked run waits for an operator. Default 24 h. */
  readonly parkTtlMs?: number;
  /** Heartbeat and sweep period (expiry, orphan recovery). Default 5 s; 0 disables the timer. */
  readonly heartbeatMs?: number;
  /** A working run whose heartbeat is older than this is orphaned. Default 30 s. */
  readonly staleAfterMs?: number;
  /** A tool call's timeout when the tool declares none. Default 60 s. */
  readonly toolTimeoutMs?: number;
  /** How long a stopped tool gets to wind down before it is left behind. Default 5 s. */
  readonly toolStopGraceMs?: number;
  /** Tool calls of one step running at once. Default 10. */
  readonly maxToolConcurrency?: number;
  /** Retries of a failed model call (the AI SDK's). Default 2. */
  readonly maxRetries?: number;
  /** Retry-After for a caller at its concurrent-run limit. Default 5 s. */
  readonly concurrencyRetryAfterSeconds?: number;
};

/** A run that settled outside the handle `start()` returned (resumed, expired, recovered …). */
export type SettledRun = {
  readonly runId: string;
  readonly callerId: string;
  readonly origin: Run["origin"];
  readonly a2a?: { readonly taskId: string; readonly contextId: string };
  readonly outcome: RunOutcome;
  /** A re-parked run: the tool it now waits on. */
  readonly pendingTool?: string;
};

export type ApproveRunInput = {
  readonly runId: string;
  readonly callId: string;
  readonly argsDigest: string;
  /** Audit actor. Default `operator`. */
  readonly actor?: string;
};

export type RejectRunInput = {
  readonly runId: string;
  /** Shown to the model as the call's result, so it can reason around the refusal. */
  readonly reason?: string;
  /** When given, must name the pending call (a stale rejection is refused like a stale approval). */
  readonly callId?: string;
  /** Audit actor. Default `admin`. */
  readonly actor?: string;
};

export type PeergateRunEngine = RunEngine & {
  readonly instanceId: string;
  /** Approves the pending call of a parked run and resumes it here (first valid answer wins). */
  approveRun(input: ApproveRunInput): Promise<RunHandle>;
  /** Turns down the pending call; the run resumes here and the model reads the reason. */
  rejectRun(input: RejectRunInput): Promise<RunHandle>;
  listRuns(input?: ListRunsInput): Promise<RunSummary[]>;
  getRun(runId: string): Promise<RunDetail | undefined>;
  /** Marks orphaned runs interrupted; returns how many. Runs at creation and on every sweep. */
  recoverRuns(): Promise<number>;
  /** Heartbeat, parked-run expiry and orphan recovery, once (the timer does this periodically). */
  sweep(): Promise<void>;
  /** Told of every run that settles outside a `start()` handle. Returns an unsubscribe. */
  onRunSettled(listener: (settled: SettledRun) => void): () => void;
  /** Runs executing on this instance. */
  activeRunIds(): string[];
  /** Graceful shutdown: refuse new runs, stop every run here, wait for their records. */
  stop(): Promise<void>;
};

type StopReason = {
  readonly kind: "cancel" | "revoked" | "deadline" | "shutdown";
  readonly message: string;
};

type ActiveRun = {
  readonly runId: string;
  readonly callerId: string;
  readonly controller: AbortController;
  reason: StopReason | undefined;
  done: Promise<unknown>;
};

type SegmentInput = {
  run: Run;
  caller: Caller;
  set: EffectiveToolSet;
  resolved: ResolvedModel;
  resume?: { decision: ApprovalDecision };
  onEvent: (event: RunEvent) => void;
  /** Tell onRunSettled listeners (the outcome does not go to a start() handle). */
  settleOutside: boolean;
};

const defaultParkTtlMs = 24 * 60 * 60 * 1000;

/** The recorder, telling `onOpen` when a segment records its first tool call. */
function trackOpened(recorder: ToolCallRecorder, onOpen: () => void): ToolCallRecorder {
  return {
    ...recorder,
    open(rows) {
      if (rows.length > 0) onOpen();
      return recorder.open(rows);
    },
  };
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Creates the engine: registers this instance, listens for cancels, recovers orphaned runs. */
export async function createRunEngine(options: RunEngineOptions): Promise<PeergateRunEngine> {
  const { database, ceilings, instanceId } = options;
  const db = database.db;
  const logger = options.logger.child({ component: "runs", instanceId });
  const now = options.now ?? (() => new Date());
  // Tools expect the root absolute and symlink-resolved.
  const workspace = await realpath(options.workspace ?? process.cwd());
  const priceTable = options.priceTable ?? emptyPriceTable;
  const parkTtlMs = options.parkTtlMs ?? defaultParkTtlMs;
  const heartbeatMs = options.heartbeatMs ?? 5_000;
  const staleAfterMs = options.staleAfterMs ?? 30_000;
  const toolTimeoutMs = options.toolTimeoutMs ?? 60_000;
  const toolStopGraceMs = options.toolStopGraceMs ?? 5_000;
  const maxToolConcurrency = options.maxToolConcurrency ?? 10;
  const maxRetries = options.maxRetries ?? 2;
  const concurrencyRetryAfter = options.concurrencyRetryAfterSeconds ?? 5;
  const readPolicies =
    typeof options.policies === "function"
      ? options.policies
      : () => options.policies as LoadedPolicies;
  const resolveFor = (runId: string, callerId: string): ResolvedModel =>
    typeof options.model === "function" ? options.model({ runId, callerId }) : options.model;

  const active = new Map<string, ActiveRun>();
  // Runs this instance is claiming from `parked` (the row names it before the run is in `active`).
  const claiming = new Set<string>();
  const settledListeners = new Set<(settled: SettledRun) => void>();
  let stopping = false;

  const emitSafely = (onEvent: (event: RunEvent) => void, event: RunEvent) => {
    try {
      onEvent(event);
    } catch (error) {
      logger.error("a run event listener failed", { error });
    }
  };

  const notifySettled = (settled: SettledRun) => {
    for (const listener of settledListeners) {
      try {
        listener(settled);
      } catch (error) {
        logger.error("a run settle listener failed", { runId: settled.runId, error });
      }
    }
  };

  const settledFromRun = (run: Run, outcome: RunOutcome, pendingTool?: string): SettledRun => ({
    runId: run.id,
    callerId: run.callerId,
    origin: run.origin,
    ...(run.a2aTaskId && run.a2aContextId
      ? { a2a: { taskId: run.a2aTaskId, contextId: run.a2aContextId } }
      : {}),
    outcome,
    ...(pendingTool ? { pendingTool } : {}),
  });

  const outcomeOf = (run: Run): RunOutcome => ({
    runId: run.id,
    status: run.status,
    ...(typeof (run.result as { text?: unknown } | null)?.text === "string"
      ? { text: (run.result as { text: string }).text }
      : {}),
    ...(run.error ? { error: run.error } : {}),
    messages: run.messages as ModelMessage[],
  });

  const register = (runId: string, callerId: string): ActiveRun => {
    const entry: ActiveRun = {
      runId,
      callerId,
      controller: new AbortController(),
      reason: undefined,
      done: Promise.resolve(),
    };
    active.set(runId, entry);
    return entry;
  };

  const stopLocal = (entry: ActiveRun, reason: StopReason) => {
    if (entry.controller.signal.aborted) return;
    entry.reason = reason;
    entry.controller.abort(new Error(reason.message));
  };

  const setFor = (policies: LoadedPolicies, caller: Caller, within?: readonly string[]) => {
    const ceiling = ceilings.get(policies.inventory, policies.agent, {
      // Keyed by id: a name can be reused by a later caller.
      name: caller.id,
      tier: caller.tier,
      allow: caller.allow,
      version: caller.version,
    });
    return effectiveToolSet(
      policies.inventory,
      policies.agent,
      ceiling,
      within ? { within: new Set(within) } : {},
    );
  };

  /** Why a run cannot start at all, before any model call (it is stored as failed). */
  const checkStartable = (
    resolved: ResolvedModel,
    caller: Caller,
  ):
    | { error: RunError; price?: undefined }
    | { error?: undefined; price: ModelPrice | undefined } => {
    if (!resolved.ok) return { error: { code: "no-model", message: resolved.message } };
    const price = findModelPrice(priceTable, resolved.id);
    if (price === undefined && hasCostBudget(readRunLimits(caller.budgets), caller.budgets)) {
      return {
        error: {
          code: "cost-unknown",
          message: `this caller has a cost budget, but model ${resolved.id} has no price in policies/models.yaml (add it, or a default)`,
        },
      };
    }
    return { price };
  };

  // ---------------------------------------------------------------- start

  async function start(
    request: StartRunRequest,
    onEvent: (event: RunEvent) => void = () => {},
  ): Promise<RunHandle> {
    if (stopping) throw new UnavailableError("the run engine is shutting down");
    checkMessages(request.messages);
    const runId = randomUUID();
    const policies = readPolicies();
    const resolved = resolveFor(runId, request.caller.id);
    // Registered before the run exists, so a revocation that lands meanwhile still finds it.
    const entry = register(runId, request.caller.id);
    let created: { run: Run; caller: Caller; set: EffectiveToolSet; failure?: RunError };
    try {
      created = await db.transaction(async (tx) => {
        await lockCallerRuns(tx, request.caller.id);
        const caller = await readCaller(tx, request.caller.id);
        if (!caller || isCallerRevoked(caller)) {
          throw new UnauthenticatedError("the caller is unknown or revoked");
        }
        const at = now();
        const startable = checkStartable(resolved, caller);
        const failure = startable.error;
        if (!failure) await checkLimits(tx, caller, at);
        const set = setFor(policies, caller);
        const run = await insertRun(tx, {
          id: runId,
          callerId: caller.id,
          origin: request.origin,
          a2aTaskId: request.a2a?.taskId ?? null,
          a2aContextId: request.a2a?.contextId ?? null,
          status: failure ? "failed" : "working",
          approvalPolicy: caller.approvalPolicy,
          toolSet: set.offered.map((t) => t.name),
          segments: failure ? 0 : 1,
          budgetLimits: readRunLimits(caller.budgets),
          budgetUsed: { ...zeroUsage },
          messages: request.messages,
          modelId: resolved.ok ? resolved.id : null,
          ownerInstanceId: failure ? null : instanceId,
          heartbeatAt: failure ? null : at,
          startedAt: at,
          segmentStartedAt: failure ? null : at,
          createdAt: at,
          updatedAt: at,
          ...(failure ? { error: failure, finishedAt: at } : {}),
        });
        if (!failure) await addDailyUsage(tx, caller.id, formatUtcDay(at), { runs: 1 });
        await appendAuditEvent(tx, {
          actor: `caller:${caller.name}`,
          kind: failure ? "run.failed" : "run.started",
          subject: `run:${runId}`,
          data: {
            runId,
            callerId: caller.id,
            origin: request.origin,
            ...(request.a2a ? { a2aTaskId: request.a2a.taskId } : {}),
            approvalPolicy: caller.approvalPolicy,
            toolSet: run.toolSet,
            modelId: run.modelId,
            ...(failure ? { error: { code: failure.code } } : {}),
          },
        });
        await request.inCreateTransaction?.(tx, runId);
        return { run, caller, set, ...(failure ? { failure } : {}) };
      });
    } catch (error) {
      active.delete(runId);
      throw error;
    }

    if (created.failure) {
      active.delete(runId);
      logger.warn("a run failed before it started", { runId, code: created.failure.code });
      emitSafely(onEvent, { type: "status", status: "failed", message: created.failure.message });
      return { runId, outcome: Promise.resolve(outcomeOf(created.run)) };
    }
    emitSafely(onEvent, { type: "status", status: "working" });
    const outcome = runAndRecord(entry, {
      run: created.run,
      caller: created.caller,
      set: created.set,
      resolved,
      onEvent,
      settleOutside: false,
    });
    entry.done = outcome;
    return { runId, outcome };
  }

  function checkMessages(messages: readonly ModelMessage[]): void {
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new ValidationError([
        { field: "messages", message: "a run needs at least one message" },
      ]);
    }
    // Caller runs get the agent's instructions only: a caller cannot add a system prompt.
    if (messages.some((m) => (m as { role?: unknown }).role === "system")) {
      throw new ValidationError([
        { field: "messages", message: "a caller's messages may not include system messages" },
      ]);
    }
  }

  /** Concurrency and daily limits; throws RateLimitedError before anything is created. */
  async function checkLimits(tx: Parameters<typeof countActiveRuns>[0], caller: Caller, at: Date) {
    const budgets = caller.budgets;
    const concurrent = budgets.concurrentRuns;
    if (typeof concurrent === "number" && concurrent >= 0) {
      const running = await countActiveRuns(tx, caller.id);
      if (running >= concurrent) {
        throw new RateLimitedError(
          `caller has ${running} runs in progress; its limit is ${concurrent}`,
          concurrencyRetryAfter,
        );
      }
    }
    const daily = budgets.daily;
    if (!daily) return;
    const totals = await readDailyTotals(tx, caller.id, formatUtcDay(at));
    const retryAfter = secondsUntilNextUtcDay(at);
    if (typeof daily.runs === "number" && totals.runs >= daily.runs) {
      throw new RateLimitedError(`caller used its ${daily.runs} runs for today (UTC)`, retryAfter);
    }
    if (typeof daily.tokens === "number" && totals.tokens >= daily.tokens) {
      throw new RateLimitedError(
        `caller used its ${daily.tokens} tokens for today (UTC)`,
        retryAfter,
      );
    }
    if (typeof daily.costUsd === "number" && totals.costUsd >= daily.costUsd) {
      throw new RateLimitedError(`caller used its $${daily.costUsd} for today (UTC)`, retryAfter);
    }
  }

  // ---------------------------------------------------------------- one segment

  /** Runs a segment and records how it ended. Never rejects. */
  async function runAndRecord(entry: ActiveRun, input: SegmentInput): Promise<RunOutcome> {
    try {
      return await runSegmentOf(entry, input);
    } catch (error) {
      // The database went away or a bug: the run is left for recovery to mark interrupted.
      logger.error("a run segment could not be recorded", { runId: entry.runId, error });
      const outcome: RunOutcome = {
        runId: entry.runId,
        status: "interrupted",
        error: { code: "internal", message: "the run stopped inside peergate; see the server log" },
        messages: input.run.messages as ModelMessage[],
      };
      if (input.settleOutside) notifySettled(settledFromRun(input.run, outcome));
      return outcome;
    } finally {
      active.delete(entry.runId);
    }
  }

  async function runSegmentOf(entry: ActiveRun, input: SegmentInput): Promise<RunOutcome> {
    const { run, caller, set, resolved } = input;
    const startedMs = performance.now();
    const used: RunBudgetUsed = { ...zeroUsage, ...run.budgetUsed };
    const messages = [...(run.messages as ModelMessage[])];
    const segment = run.segments;
    const policies = readPolicies();

    let end: SegmentEnd;
    let timer: NodeJS.Timeout | undefined;
    // Usage of steps not yet written: flushed before tools run, else with the run's end.
    const unflushed = { tokens: 0, costUsd: 0 };
    let callsRecorded = false;
    const startable = checkStartable(resolved, caller);
    if (startable.error || !resolved.ok) {
      end = { kind: "failed", error: startable.error ?? { code: "no-model", message: "no model" } };
    } else {
      const day = formatUtcDay(now());
      const meters = createBudgetMeters({
        limits: run.budgetLimits,
        used,
        daily: caller.budgets.daily,
        // Today's totals matter only to a daily token or cost budget.
        dailyUsed:
          caller.budgets.daily?.tokens !== undefined || caller.budgets.daily?.costUsd !== undefined
            ? await readDailyTotals(db, caller.id, day)
            : { tokens: 0, costUsd: 0, runs: 0 },
      });
      if (meters.remainingMs !== undefined) {
        const deadline = {
          kind: "deadline",
          message: describeBudgetExceeded("durationMs", run.budgetLimits, caller.budgets.daily),
        } as const;
        if (meters.remainingMs <= 0) stopLocal(entry, deadline);
        else timer = setTimeout(() => stopLocal(entry, deadline), meters.remainingMs);
      }
      // A first segment has no calls yet; a resumed one keeps its rows' ids unique.
      const recordIds = new Set(input.resume ? await listCallIds(db, run.id) : []);
      const reserved = new Set(policies.inventory.names.keys());
      const modelTools = buildModelTools(set, options.tools.tools, reserved);
      const batch: BatchDeps = {
        set,
        tools: options.tools.tools,
        policy: run.approvalPolicy,
        signal: entry.controller.signal,
        workspace,
        now,
        recorder: trackOpened(
          createToolCallRecorder({
            db,
            runId: run.id,
            segment,
            actor: `caller:${caller.name}`,
            now,
          }),
          () => {
            callsRecorded = true;
          },
        ),
        emit: (event) => emitSafely(input.onEvent, event),
        logger,
        takeRecordId: (toolCallId) => {
          // The model's id names the call's row: keep it storable (no NUL) and short.
          const base = storableText((toolCallId || "call").slice(0, 200));
          let id = base;
          for (let n = 2; recordIds.has(id); n++) id = `${base}#${n}`;
          recordIds.add(id);
          return id;
        },
        maxConcurrency: maxToolConcurrency,
        defaultTimeoutMs: toolTimeoutMs,
        stopGraceMs: toolStopGraceMs,
      };
      try {
        end = await runSegment({
          model: resolved.model,
          price: startable.price,
          instructions: policies.agent.instructions,
          tools: modelTools.tools,
          renamed: modelTools.renamed,
          batch,
          meters,
          used,
          messages,
          signal: entry.controller.signal,
          maxRetries,
          logger,
          ...(input.resume && run.pendingBatch
            ? { resume: { batch: run.pendingBatch, decision: input.resume.decision } }
            : {}),
          chargeStep: (delta) => {
            unflushed.tokens += delta.tokens;
            unflushed.costUsd += delta.costUsd;
          },
          flushUsage: async () => {
            const delta = { ...unflushed };
            unflushed.tokens = 0;
            unflushed.costUsd = 0;
            await chargeStep(db, {
              runId: run.id,
              callerId: caller.id,
              instanceId,
              day: formatUtcDay(now()),
              used,
              delta,
              at: now(),
            });
            // Before any tool of this step runs: the caller event that stops a revoked caller's
            // runs can be lost with a notification connection, so the database is asked too.
            const current = await readCaller(db, caller.id);
            if (!current || isCallerRevoked(current)) {
              stopLocal(entry, { kind: "revoked", message: "the caller was revoked" });
            }
          },
          checkpoint: () => saveMessages(db, run.id, instanceId, messages, now()),
          onTextDelta: (delta) => emitSafely(input.onEvent, { type: "text-delta", delta }),
        });
      } finally {
        clearTimeout(timer);
      }
    }
    used.durationMs += Math.round(performance.now() - startedMs);

    // A stop from outside wins over whatever the loop was doing when it came.
    if (
      end.kind === "stopped" ||
      (entry.reason && end.kind !== "completed" && end.kind !== "parked")
    ) {
      end = { kind: "stopped" };
    }
    const at = now();
    let status: RunStatus;
    let error: RunError | undefined;
    let text: string | undefined;
    switch (end.kind) {
      case "completed":
        status = "completed";
        text = end.text;
        break;
      case "failed":
        status = "failed";
        error = end.error;
        text = end.text;
        break;
      case "budget":
        status = "failed";
        error = {
          code: "budget-exceeded",
          budget: end.budget,
          message: describeBudgetExceeded(end.budget, run.budgetLimits, caller.budgets.daily),
        };
        text = end.text;
        break;
      case "stopped":
        ({ status, error } = describeStop(entry.reason));
        break;
      case "parked": {
        const pending: PendingApproval = {
          callId: end.pending.callId,
          tool: end.pending.tool,
          argsDigest: end.pending.argsDigest,
          args: end.pending.args,
          requestedAt: end.pending.requestedAt,
          ...(end.pending.calledTool ? { calledTool: end.pending.calledTool } : {}),
          ...(end.pending.risk ? { risk: end.pending.risk } : {}),
          ...(end.pending.summary ? { summary: end.pending.summary } : {}),
          ...(end.pending.previewDiff ? { previewDiff: end.pending.previewDiff } : {}),
        };
        const parked = await parkRun(db, {
          runId: run.id,
          instanceId,
          pending,
          batch: end.batch,
          messages,
          used,
          parkedUntil: new Date(at.getTime() + parkTtlMs),
          at,
          daily: { callerId: caller.id, day: formatUtcDay(at), delta: unflushed },
        });
        if (!parked) return settleTakenOver(run, input);
        // A cancel or revocation that came while the run was parking still ends it. (A shutdown
        // or deadline does not: a parked run holds no instance and spends no wall time.)
        const reason = entry.reason;
        if (reason?.kind === "cancel" || reason?.kind === "revoked") {
          const closed = await closeParkedRunNow(run.id, reason);
          if (closed) {
            emitSafely(input.onEvent, { type: "status", status: closed.status });
            if (input.settleOutside) notifySettled(settledFromRun(run, closed));
            return closed;
          }
        }
        const outcome: RunOutcome = { runId: run.id, status: "parked", messages };
        emitSafely(input.onEvent, {
          type: "status",
          status: "parked",
          message: `waiting for an operator to approve ${pending.calledTool ?? pending.tool}`,
        });
        if (input.settleOutside) {
          notifySettled(settledFromRun(run, outcome, pending.calledTool ?? pending.tool));
        }
        return outcome;
      }
    }

    const finished = await finishRun(db, {
      runId: run.id,
      instanceId,
      status,
      text,
      error,
      messages,
      used,
      at,
      daily: { callerId: caller.id, day: formatUtcDay(at), delta: unflushed },
      toolCallsOpen: input.resume !== undefined || callsRecorded,
    });
    if (!finished) return settleTakenOver(run, input);
    const outcome: RunOutcome = {
      runId: run.id,
      status,
      ...(text !== undefined && text !== "" ? { text } : {}),
      ...(error ? { error } : {}),
      messages,
    };
    emitSafely(input.onEvent, {
      type: "status",
      status,
      ...(error ? { message: error.message } : {}),
    });
    if (input.settleOutside) notifySettled(settledFromRun(run, outcome));
    return outcome;
  }

  /** Ends a parked run at once (canceled, or rejected for a revoked caller). */
  async function closeParkedRunNow(
    runId: string,
    reason: StopReason,
  ): Promise<RunOutcome | undefined> {
    const closed = await db.transaction(async (tx) => {
      const locked = await lockRun(tx, runId);
      if (locked?.status !== "parked") return false;
      await closeParkedRun(tx, {
        run: locked,
        ...(reason.kind === "revoked"
          ? {
              status: "rejected" as const,
              error: { code: "caller-revoked", message: reason.message },
            }
          : { status: "canceled" as const, error: { code: "canceled", message: reason.message } }),
        actor: `instance:${instanceId}`,
        at: now(),
      });
      return true;
    });
    if (!closed) return undefined;
    const current = await readRun(db, runId);
    return current ? outcomeOf(current) : undefined;
  }

  /** Another instance moved the run on (it thought this one dead): report what it recorded. */
  async function settleTakenOver(run: Run, input: SegmentInput): Promise<RunOutcome> {
    logger.warn("a run was taken over before this instance could record it", { runId: run.id });
    const current = await readRun(db, run.id);
    const outcome = current ? outcomeOf(current) : outcomeOf(run);
    emitSafely(input.onEvent, { type: "status", status: outcome.status });
    return outcome;
  }

  function describeStop(reason: StopReason | undefined): { status: RunStatus; error: RunError } {
    switch (reason?.kind) {
      case "cancel":
        return { status: "canceled", error: { code: "canceled", message: reason.message } };
      case "revoked":
        return { status: "canceled", error: { code: "caller-revoked", message: reason.message } };
      case "deadline":
        return {
          status: "failed",
          error: { code: "budget-exceeded", budget: "durationMs", message: reason.message },
        };
      default:
        return {
          status: "interrupted",
          error: {
            code: "shutdown",
            message: reason?.message ?? "the run was stopped when its instance shut down",
          },
        };
    }
  }

  // ---------------------------------------------------------------- cancel

  async function cancel(runId: string, reason: string): Promise<boolean> {
    const message = String(reason || "canceled").slice(0, 500);
    const local = active.get(runId);
    if (local) {
      stopLocal(local, { kind: "cancel", message });
      return true;
    }
    const run = await readRun(db, runId);
    if (!run) return false;
    if (run.status === "parked") {
      const closed = await closeParkedRunNow(runId, { kind: "cancel", message });
      if (!closed) return false;
      notifySettled(settledFromRun(run, closed));
      return true;
    }
    if (run.status === "working" || run.status === "submitted") {
      await database.notify(
        runsChannel,
        JSON.stringify({ type: "cancel", runId, reason: message }),
      );
      return true;
    }
    return false;
  }

  // ---------------------------------------------------------------- approve / reject

  type Claim =
    | { kind: "claimed"; run: Run; caller: Caller }
    | { kind: "stale" }
    | { kind: "not-waiting"; status: RunStatus }
    | { kind: "closed"; run: Run; why: string };

  async function answerParkedRun(
    runId: string,
    answer: { callId?: string; argsDigest?: string; decision: ApprovalDecision; actor: string },
  ): Promise<RunHandle> {
    if (stopping) throw new UnavailableError("the run engine is shutting down");
    claiming.add(runId);
    try {
      return await claimAndResume(runId, answer);
    } finally {
      claiming.delete(runId);
    }
  }

  async function claimAndResume(
    runId: string,
    answer: { callId?: string; argsDigest?: string; decision: ApprovalDecision; actor: string },
  ): Promise<RunHandle> {
    const claim = await db.transaction(async (tx): Promise<Claim> => {
      const run = await lockRun(tx, runId);
      if (!run) throw new NotFoundError("no such run");
      const pending = run.pendingApproval;
      if (run.status !== "parked" || !pending || !run.pendingBatch) {
        return { kind: "not-waiting", status: run.status };
      }
      if (
        (answer.callId !== undefined && answer.callId !== pending.callId) ||
        (answer.argsDigest !== undefined && answer.argsDigest !== pending.argsDigest)
      ) {
        return { kind: "stale" };
      }
      const at = now();
      if (run.parkedUntil && run.parkedUntil.getTime() <= at.getTime()) {
        await closeParkedRun(tx, {
          run,
          status: "expired",
          error: expiredError(run),
          actor: `instance:${instanceId}`,
          at,
        });
        return { kind: "closed", run, why: "its approval window had closed: the run expired" };
      }
      const caller = await readCaller(tx, run.callerId);
      if (!caller || isCallerRevoked(caller)) {
        await closeParkedRun(tx, {
          run,
          status: "rejected",
          error: {
            code: "caller-revoked",
            message: "the caller was revoked while this run was parked",
          },
          actor: answer.actor,
          at,
        });
        return { kind: "closed", run, why: "its caller was revoked: the run was rejected" };
      }
      const claimed = await claimParkedRun(tx, { run, instanceId, at });
      if (!claimed) throw new ConflictError("the run changed while it was being answered");
      await appendAuditEvent(tx, {
        actor: answer.actor,
        kind: answer.decision.approved ? "run.approved" : "run.call-rejected",
        subject: `run:${run.id}`,
        data: {
          runId: run.id,
          callId: pending.callId,
          tool: pending.tool,
          argsDigest: pending.argsDigest,
          ...(!answer.decision.approved && answer.decision.reason
            ? { reason: answer.decision.reason.slice(0, 500) }
            : {}),
        },
      });
      return { kind: "claimed", run: claimed, caller };
    });

    // A refused answer is audited like any refusal: an approval that arrives after the run was
    // rejected (its caller revoked), answered or expired leaves a trace, not only a 409.
    if (claim.kind === "stale" || claim.kind === "not-waiting") {
      await appendAuditEvent(db, {
        actor: answer.actor,
        kind: "run.answer-refused",
        subject: `run:${runId}`,
        data: {
          runId,
          callId: answer.callId ?? null,
          argsDigest: answer.argsDigest ?? null,
          ...(claim.kind === "not-waiting" ? { runStatus: claim.status } : {}),
        },
      });
      throw new ConflictError(
        claim.kind === "stale"
          ? "the answer does not name the call this run waits on: callId and argsDigest must match its pending approval"
          : `the run is ${claim.status}, not waiting for an operator`,
      );
    }
    if (claim.kind === "closed") {
      const current = await readRun(db, runId);
      if (current) notifySettled(settledFromRun(current, outcomeOf(current)));
      throw new ConflictError(`the run was not resumed: ${claim.why}`);
    }
    return resumeClaimed(claim.run, claim.caller, answer.decision);
  }

  /** Continues a run this instance just claimed from `parked`. */
  function resumeClaimed(run: Run, caller: Caller, decision: ApprovalDecision): RunHandle {
    const entry = register(run.id, caller.id);
    const policies = readPolicies();
    // The recomputed ceiling, never wider than the set the run started with.
    const set = setFor(policies, caller, run.toolSet);
    const resolved = resolveFor(run.id, caller.id);
    const outcome = runAndRecord(entry, {
      run,
      caller,
      set,
      resolved,
      resume: { decision },
      onEvent: () => {},
      settleOutside: true,
    });
    entry.done = outcome;
    return { runId: run.id, outcome };
  }

  function expiredError(run: Run): RunError {
    return {
      code: "expired",
      message: `no operator answered before ${run.parkedUntil?.toISOString() ?? "the deadline"}`,
    };
  }

  // ---------------------------------------------------------------- sweeping

  async function recoverRuns(): Promise<number> {
    const at = now();
    const recovered = await recoverOrphanedRuns(db, {
      instanceId,
      staleBefore: new Date(at.getTime() - staleAfterMs),
      localRunIds: new Set([...active.keys(), ...claiming]),
      at,
    });
    for (const run of recovered) {
      logger.warn("marked an orphaned run interrupted", { runId: run.id });
      notifySettled(settledFromRun(run, outcomeOf(run)));
    }
    return recovered.length;
  }

  async function expireParkedRuns(): Promise<void> {
    const at = now();
    for (const candidate of await listExpiredParkedRuns(db, at)) {
      const closed = await db.transaction(async (tx) => {
        const run = await lockRun(tx, candidate.id);
        if (run?.status !== "parked" || !run.parkedUntil || run.parkedUntil > at) return false;
        await closeParkedRun(tx, {
          run,
          status: "expired",
          error: expiredError(run),
          actor: `instance:${instanceId}`,
          at,
        });
        return true;
      });
      if (!closed) continue;
      const current = await readRun(db, candidate.id);
      if (current) notifySettled(settledFromRun(current, outcomeOf(current)));
    }
  }

  async function sweep(): Promise<void> {
    await heartbeat(db, { instanceId, runIds: [...active.keys()], at: now() });
    await expireParkedRuns();
    await recoverRuns();
  }

  // ---------------------------------------------------------------- wiring

  await registerInstance(db, { id: instanceId, hostname: hostname(), pid: process.pid, at: now() });
  const unlisten = await database.listen(runsChannel, (payload) => {
    let message: { type?: unknown; runId?: unknown; reason?: unknown };
    try {
      message = JSON.parse(payload) as typeof message;
    } catch {
      return;
    }
    if (message.type !== "cancel" || typeof message.runId !== "string") return;
    const entry = active.get(message.runId);
    if (entry) {
      stopLocal(entry, {
        kind: "cancel",
        message: typeof message.reason === "string" ? message.reason : "canceled",
      });
    }
  });
  const unsubscribe =
    options.subscribeCallerEvents?.((event) => {
      if (event.change !== "revoked") return;
      for (const entry of active.values()) {
        if (entry.callerId === event.callerId) {
          stopLocal(entry, { kind: "revoked", message: "the caller was revoked" });
        }
      }
      // The revocation rejected the caller's parked runs; their surfaces learn it here (every
      // instance hears the event, so a surface may be told twice).
      const since = new Date(now().getTime() - 60_000);
      listRunsRejectedByRevocation(db, event.callerId, since)
        .then((rejected) => {
          for (const run of rejected) notifySettled(settledFromRun(run, outcomeOf(run)));
        })
        .catch((error: unknown) =>
          logger.warn("could not list a revoked caller's rejected runs", {
            error: describeError(error),
          }),
        );
    }) ?? (() => {});
  await recoverRuns();

  let sweeping: Promise<void> | undefined;
  const timer =
    heartbeatMs > 0
      ? setInterval(() => {
          if (sweeping || stopping) return;
          sweeping = sweep()
            .catch((error: unknown) =>
              logger.warn("run sweep failed", { error: describeError(error) }),
            )
            .finally(() => {
              sweeping = undefined;
            });
        }, heartbeatMs)
      : undefined;
  timer?.unref();

  async function stop(): Promise<void> {
    if (stopping) return;
    stopping = true;
    if (timer) clearInterval(timer);
    const running = [...active.values()];
    for (const entry of running) {
      stopLocal(entry, {
        kind: "shutdown",
        message: "the instance shut down while the run worked",
      });
    }
    await Promise.allSettled(running.map((entry) => entry.done));
    await sweeping;
    unsubscribe();
    try {
      await unlisten();
    } catch (error) {
      logger.warn("could not stop listening for run cancels", { error: describeError(error) });
    }
    try {
      await removeInstance(db, instanceId);
    } catch (error) {
      logger.warn("could not unregister this instance", { error: describeError(error) });
    }
  }

  return {
    instanceId,
    start,
    cancel,
    approveRun: (input) =>
      answerParkedRun(input.runId, {
        callId: input.callId,
        argsDigest: input.argsDigest,
        decision: { approved: true },
        actor: input.actor ?? "operator",
      }),
    rejectRun: (input) =>
      answerParkedRun(input.runId, {
        ...(input.callId !== undefined ? { callId: input.callId } : {}),
        decision: { approved: false, ...(input.reason ? { reason: input.reason } : {}) },
        actor: input.actor ?? "admin",
      }),
    listRuns: (input) => listRuns(db, input),
    getRun: (runId) => getRun(db, runId),
    recoverRuns,
    sweep,
    onRunSettled(listener) {
      settledListeners.add(listener);
      return () => settledListeners.delete(listener);
    },
    activeRunIds: () => [...active.keys()],
    stop,
  };
}
