// What the run verbs (src/services/runs/) and the run mechanics share on one instance: the
// database, this instance's id, the policies, model and tools runs use, the registry of runs
// executing here, and the listeners told when a run settles outside a `start()` handle. Built once
// by `createRunEngine`; plain values, so a test can build one too.
import { realpath } from "node:fs/promises";
import type { Database } from "../db/client.ts";
import type { Notifications } from "../db/notifications.ts";
import type { Caller, RunError } from "../db/schema.ts";
import { type LoadedPolicies, policiesNow } from "../load-policies.ts";
import type { Logger } from "../log.ts";
import type { Ceiling } from "../policy/ceiling.ts";
import type { CeilingCache } from "../policy/ceiling-cache.ts";
import { type EffectiveToolSet, effectiveToolSet } from "../policy/effective-set.ts";
import type { Redactor } from "../sandbox/redact.ts";
import type { ToolRuntime } from "../tools/types.ts";
import { type ActiveRuns, createActiveRuns } from "./active-runs.ts";
import { hasCostBudget, readRunLimits } from "./budgets.ts";
import type { SettledRun } from "./outcome.ts";
import { emptyPriceTable, findModelPrice, type ModelPrice, type PriceTable } from "./prices.ts";
import type { ResolvedModel } from "./resolve-model.ts";
import { createStartQueue, defaultStartsAtOnce, type StartQueue } from "./start-queue.ts";
import { noRunMeter, type RunEvent, type RunMeter } from "./types.ts";

export type RunCoreOptions = {
  readonly database: Database;
  readonly policies: LoadedPolicies;
  readonly ceilings: CeilingCache;
  readonly tools: ToolRuntime;
  /** The model runs use (resolveModel). */
  readonly model: ResolvedModel;
  /** Unique per process (e.g. `${hostname}-${pid}-${random}`); runs name their owner with it. */
  readonly instanceId: string;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** The workspace root handed to tools. Default: the current directory. */
  readonly workspace?: string;
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
  /** The command classifier's model (`classifier.model`); default: the run's model. */
  readonly classifierModel?: ResolvedModel;
  /** Every secret peergate holds: replaced in every tool result before the model reads it. */
  readonly redactor?: Redactor;
  /**
   * Runs starting at once on this instance (src/runs/start-queue.ts); 0 for no bound. Default 8
   * (PEERGATE_RUN_STARTS_AT_ONCE).
   */
  readonly startsAtOnce?: number;
  /** Told of each segment's end and each tool call's record (the /metrics counters). */
  readonly meter?: RunMeter;
  /**
   * Schedules the wall-time budget's deadline (`fire` after `ms`); returns what cancels it.
   * Default: a timer. Tests fire it when they choose.
   */
  readonly scheduleDeadline?: (ms: number, fire: () => void) => () => void;
};

export type RunCore = {
  readonly database: Database;
  /** The instance's notification hub: cancels are published and heard there. */
  readonly notifications: Notifications;
  readonly db: Database["db"];
  readonly instanceId: string;
  readonly logger: Logger;
  readonly now: () => Date;
  readonly policies: LoadedPolicies;
  readonly tools: ToolRuntime;
  readonly model: ResolvedModel;
  /** Absolute and symlink-resolved, as tools expect. */
  readonly workspace: string;
  readonly priceTable: PriceTable;
  readonly parkTtlMs: number;
  readonly staleAfterMs: number;
  readonly toolTimeoutMs: number;
  readonly toolStopGraceMs: number;
  readonly maxToolConcurrency: number;
  readonly maxRetries: number;
  readonly concurrencyRetryAfterSeconds: number;
  readonly classifierModel: ResolvedModel;
  readonly redactor: Redactor | undefined;
  readonly meter: RunMeter;
  readonly scheduleDeadline: (ms: number, fire: () => void) => () => void;
  readonly active: ActiveRuns;
  /** The bound on runs starting at once, and the starts waiting for a place. */
  readonly startQueue: StartQueue;
  /** True once shutdown began: no run starts or resumes. */
  readonly stopping: () => boolean;
  /** The effective tool set for a caller now, never wider than `within` when given. */
  toolSetFor(
    caller: Caller,
    within?: readonly string[],
    /** The policies the run keeps (policiesNow at its start); default: those in force. */
    using?: LoadedPolicies,
  ): EffectiveToolSet;
  /** Why a run cannot start at all, before any model call; else the model's price. */
  checkStartable(caller: Caller): { error: RunError } | { price: ModelPrice | undefined };
  /** Tells onRunSettled listeners; a listener that throws is logged, never propagated. */
  notifySettled(settled: SettledRun): void;
  onRunSettled(listener: (settled: SettledRun) => void): () => void;
  /** Relays a run event; a listener that throws is logged. */
  emit(onEvent: (event: RunEvent) => void, event: RunEvent): void;
};

export async function createRunCore(
  options: RunCoreOptions,
  notifications: Notifications,
  stopping: () => boolean,
): Promise<RunCore> {
  const { database, ceilings, policies, model, priceTable = emptyPriceTable } = options;
  const logger = options.logger.child({ component: "runs", instanceId: options.instanceId });
  const settledListeners = new Set<(settled: SettledRun) => void>();
  const toolSets = createToolSetCache();
  return {
    database,
    notifications,
    db: database.db,
    instanceId: options.instanceId,
    logger,
    now: options.now ?? (() => new Date()),
    policies,
    tools: options.tools,
    model,
    workspace: await realpath(options.workspace ?? process.cwd()),
    priceTable,
    parkTtlMs: options.parkTtlMs ?? 24 * 60 * 60 * 1000,
    staleAfterMs: options.staleAfterMs ?? 30_000,
    toolTimeoutMs: options.toolTimeoutMs ?? 60_000,
    toolStopGraceMs: options.toolStopGraceMs ?? 5_000,
    maxToolConcurrency: options.maxToolConcurrency ?? 10,
    maxRetries: options.maxRetries ?? 2,
    concurrencyRetryAfterSeconds: options.concurrencyRetryAfterSeconds ?? 5,
    classifierModel: options.classifierModel?.ok === true ? options.classifierModel : model,
    redactor: options.redactor,
    meter: options.meter ?? noRunMeter,
    scheduleDeadline: options.scheduleDeadline ?? scheduleTimer,
    active: createActiveRuns(),
    startQueue: createStartQueue(options.startsAtOnce ?? defaultStartsAtOnce, {
      retryAfterSeconds: options.concurrencyRetryAfterSeconds ?? 5,
    }),
    stopping,
    toolSetFor(caller, within, using = policiesNow(policies)) {
      const ceiling = ceilings.get(using.inventory, using.agent, {
        // Keyed by id: a name can be reused by a later caller.
        name: caller.id,
        tier: caller.tier,
        allow: caller.allow,
        version: caller.version,
      });
      return toolSets.get(using.inventory, using.agent, ceiling, within);
    },
    checkStartable(caller) {
      if (!model.ok) return { error: { code: "no-model", message: model.message } };
      const price = findModelPrice(priceTable, model.id);
      if (price === undefined && hasCostBudget(readRunLimits(caller.budgets), caller.budgets)) {
        return {
          error: {
            code: "cost-unknown",
            message: `this caller has a cost budget, but model ${model.id} has no price in policies/models.yaml (add it, or a default)`,
          },
        };
      }
      return { price };
    },
    notifySettled(settled) {
      for (const listener of settledListeners) {
        try {
          listener(settled);
        } catch (error) {
          logger.error("a run settle listener failed", { runId: settled.runId, error });
        }
      }
    },
    onRunSettled(listener) {
      settledListeners.add(listener);
      return () => settledListeners.delete(listener);
    },
    emit(onEvent, event) {
      try {
        onEvent(event);
      } catch (error) {
        logger.error("a run event listener failed", { error });
      }
    },
  };
}

/** The wall-time deadline on a timer. */
function scheduleTimer(ms: number, fire: () => void): () => void {
  const timer = setTimeout(fire, ms);
  return () => clearTimeout(timer);
}

/**
 * Effective tool sets, computed once per (policy generation, caller's ceiling, narrowing). A set
 * depends only on the inventory, the agent's policy and the caller's ceiling (itself one object
 * per caller version and policy generation, src/policy/ceiling-cache.ts), and is never modified;
 * each run start and each step's check of its caller reused to compute it afresh (issue 28). Kept
 * beside the ceiling, so a new generation or caller version drops its sets with it.
 */
function createToolSetCache(): {
  get(
    inventory: LoadedPolicies["inventory"],
    agent: LoadedPolicies["agent"],
    ceiling: Ceiling,
    within: readonly string[] | undefined,
  ): EffectiveToolSet;
} {
  type Entry = {
    inventory: LoadedPolicies["inventory"];
    agent: LoadedPolicies["agent"];
    set: EffectiveToolSet;
  };
  const byCeiling = new WeakMap<Ceiling, Map<string, Entry>>();
  /** Distinct narrowings kept per ceiling (a resumed run's start names one each). */
  const maxPerCeiling = 64;
  return {
    get(inventory, agent, ceiling, within) {
      const key = within === undefined ? "" : JSON.stringify([...within].sort());
      let entries = byCeiling.get(ceiling);
      if (!entries) {
        entries = new Map();
        byCeiling.set(ceiling, entries);
      }
      const hit = entries.get(key);
      if (hit && hit.inventory === inventory && hit.agent === agent) return hit.set;
      const set = effectiveToolSet(
        inventory,
        agent,
        ceiling,
        within ? { within: new Set(within) } : {},
      );
      if (entries.size >= maxPerCeiling) entries.clear();
      entries.set(key, { inventory, agent, set });
      return set;
    },
  };
}
