// The policy files read again while the server runs: `agent.yaml`, `tools.yaml` and
// `models.yaml`, on change (the directory is watched) or on SIGHUP, without a restart.
//
//   const live = await watchPolicies({ dir, initial, tools, logger, checkSandbox, buildTools });
//   live.view      a LoadedPolicies whose fields read the policies in force at each access
//   live.prices    the price table in force, read the same way
//   live.tools     the tool runtime in force (rebuilt when the new files change the tools)
//   policiesNow(live.view)   the policies in force, as one value a run keeps (load-policies.ts)
//
// Every file is validated before anything changes: a bad file keeps the whole policy in force and
// is logged with the file, the field and what to do. A reload that lets the agent start processes
// it could not before (execute_command newly offered, a command tool or a stdio MCP server newly
// declared) runs the sandbox start-up check first and is refused when that fails, as start-up
// would be. A reload gives the agent a new identity (and content version), so memoised ceilings
// are computed again. A run reads the policies once when its segment starts (`policiesNow`) and
// keeps them, with the tool runtime it found, to the segment's end: a reload narrows or widens
// the runs that start after it. Tool runtimes replaced by a reload are closed when the server
// stops (a run in flight may still be using one).
//
// What a reload cannot change in a running server, because it was read once at start, is logged
// as needing a restart: the model (`model:`, `classifier.model`) and the agent card's fields.

import { type FSWatcher, watch } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { ConfigError, type Problem } from "./errors.ts";
import { type LoadedPolicies, loadPolicies, policiesNowKey } from "./load-policies.ts";
import type { Logger } from "./log.ts";
import { emptyPriceTable, type PriceTable, parsePriceTable } from "./runs/prices.ts";
import { startsProcesses } from "./tools/starts-processes.ts";
import type { ToolRuntime } from "./tools/types.ts";

export const policyFiles = ["agent.yaml", "tools.yaml", "models.yaml"] as const;

export type PolicyReloadResult =
  | { readonly ok: true; readonly changed: readonly string[] }
  | { readonly ok: false; readonly problems: readonly ReloadProblem[] };

/** Why a reload was refused: the file, the field, and what to do. */
export type ReloadProblem = { file: string; field?: string; problem: string; fix: string };

export type LivePolicies = {
  /** The policies in force now. */
  readonly current: LoadedPolicies;
  /** Reads the policies in force at each field access; `policiesNow(view)` takes one value. */
  readonly view: LoadedPolicies;
  /** The price table in force, read at each access (a run keeps the price it found). */
  readonly prices: PriceTable;
  /** The tool runtime in force, read at each access (a segment keeps the map it found). */
  readonly tools: ToolRuntime;
  /** Reads the files again now; a refusal keeps everything in force. Reloads run one at a time. */
  reload(): Promise<PolicyReloadResult>;
  /** Stops watching, then closes every tool runtime (the one in force and those replaced). */
  close(): Promise<void>;
};

/** The settings a tool runtime is built from: when they change, a new runtime is needed. */
function runtimeInputs(p: LoadedPolicies): unknown {
  return {
    inventory: p.inventoryVersion,
    toolsPolicy: p.toolsPolicy,
    envAllowlist: p.agent.envAllowlist ?? [],
    webFetch: p.agent.webFetch,
  };
}

/** The fields read once at start: changing them needs a restart. */
function startOnly(p: LoadedPolicies): Record<string, unknown> {
  const { name, description, declaredVersion, skills, model, classifier } = p.agent as Record<
    string,
    unknown
  >;
  return {
    model,
    "classifier.model": (classifier as { model?: unknown } | undefined)?.model,
    "agent card (name, description, version, skills)": {
      name,
      description,
      declaredVersion,
      skills,
    },
  };
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

function toProblems(error: unknown, files: readonly string[]): ReloadProblem[] {
  const fix = "correct the file and save it again (or send SIGHUP); the policy in force stays";
  if (!(error instanceof ConfigError)) {
    return [{ file: files.join(", "), problem: String(error), fix }];
  }
  return error.problems.map((p: Problem) => {
    const where = `${p.field ?? ""} ${p.message}`;
    const file = files.find((f) => where.includes(f)) ?? files.join(", ");
    return {
      file,
      ...(p.field === undefined ? {} : { field: p.field }),
      problem: p.message,
      fix: p.expected === undefined ? fix : `set it to ${p.expected}; ${fix}`,
    };
  });
}

export async function watchPolicies(options: {
  /** The directory holding the three files (PEERGATE_POLICIES_DIR). */
  readonly dir: string;
  /** The policies start-up loaded. */
  readonly initial: LoadedPolicies;
  /** The tool runtime start-up built for them. */
  readonly tools: ToolRuntime;
  readonly logger: Logger;
  /** Reload on SIGHUP too (the server; a test starting many servers may turn it off). */
  readonly signals?: boolean;
  /** The sandbox start-up check for policies that start processes; throws ConfigError on failure. */
  readonly checkSandbox: (next: LoadedPolicies) => Promise<void>;
  /** A tool runtime for new policies whose tools differ from those in force. */
  readonly buildTools: (next: LoadedPolicies) => Promise<ToolRuntime>;
  /**
   * The places of the data directory, workspace and policy directory checked again by identity
   * (config.ts checkWorkspacePlace); throws ConfigError when one now holds another.
   */
  readonly checkPlaces?: () => void;
}): Promise<LivePolicies> {
  const { dir, logger } = options;
  const files = policyFiles.map((name) => path.join(dir, name));
  const [agentFile, toolsFile, modelsFile] = files as [string, string, string];
  let current = options.initial;
  let tools = options.tools;
  const retired: ToolRuntime[] = [];
  let lastTexts = await Promise.all(files.map((f) => readText(f).catch(() => undefined)));
  const modelsText = lastTexts[2];
  let prices: PriceTable =
    modelsText === undefined ? emptyPriceTable : parsePriceTable(modelsText, modelsFile);

  const view = {
    get agent() {
      return current.agent;
    },
    get inventory() {
      return current.inventory;
    },
    get toolsPolicy() {
      return current.toolsPolicy;
    },
    get toolsFile() {
      return current.toolsFile;
    },
    get inventoryVersion() {
      return current.inventoryVersion;
    },
    get agentVersion() {
      return current.agentVersion;
    },
    [policiesNowKey]: () => current,
  } as LoadedPolicies;
  const pricesView: PriceTable = {
    get models() {
      return prices.models;
    },
    get fallback() {
      return prices.fallback;
    },
  };
  const toolsView: ToolRuntime = {
    get tools() {
      return tools.tools;
    },
    get workspace() {
      return tools.workspace;
    },
    close: async () => {
      for (const runtime of [...retired.splice(0), tools]) await runtime.close().catch(() => {});
    },
    // Runs keep the runtime they started with: a caller or run is released in every one.
    releaseCaller: async (callerId) => {
      for (const runtime of [...retired, tools]) await runtime.releaseCaller?.(callerId);
    },
    releaseRun: async (runId) => {
      for (const runtime of [...retired, tools]) await runtime.releaseRun?.(runId);
    },
  };

  const refuse = (problems: ReloadProblem[]): PolicyReloadResult => {
    for (const p of problems) {
      logger.warn("policies not reloaded: a policy file is invalid; the policy in force stays", p);
    }
    return { ok: false, problems };
  };

  const reloadOnce = async (): Promise<PolicyReloadResult> => {
    let texts: (string | undefined)[];
    try {
      options.checkPlaces?.();
      texts = await Promise.all(files.map(readText));
    } catch (error) {
      return refuse(toProblems(error, files));
    }
    const changed = files.filter((_, i) => texts[i] !== lastTexts[i]);
    // A script or pinned program that changed keeps its tool refused until a reload: this one.
    const stale = [...tools.tools.values()]
      .filter((tool) => tool.changedSinceLoad?.() === true)
      .map((tool) => tool.name);
    if (changed.length === 0 && stale.length === 0) return { ok: true, changed: [] };
    const policiesChanged = changed.includes(agentFile) || changed.includes(toolsFile);

    // Everything is validated before anything is replaced.
    let next = current;
    let nextPrices = prices;
    let nextTools: ToolRuntime | undefined;
    try {
      if (policiesChanged) next = await loadPolicies(dir);
      if (changed.includes(modelsFile)) {
        nextPrices =
          texts[2] === undefined ? emptyPriceTable : parsePriceTable(texts[2], modelsFile);
      }
    } catch (error) {
      return refuse(toProblems(error, files));
    }
    if (policiesChanged) {
      if (startsProcesses(next) && !startsProcesses(current)) {
        try {
          await options.checkSandbox(next);
        } catch (error) {
          return refuse(
            toProblems(error, [agentFile, toolsFile]).map((p) => ({
              ...p,
              file: changed.filter((f) => f !== modelsFile).join(", "),
              fix: `${p.fix.replace(/; the policy in force stays$/, "")}, or do not offer a tool that starts processes; the policy in force stays`,
            })),
          );
        }
      }
    }
    if (
      stale.length > 0 ||
      (policiesChanged && !isDeepStrictEqual(runtimeInputs(next), runtimeInputs(current)))
    ) {
      try {
        nextTools = await options.buildTools(next);
      } catch (error) {
        return refuse(toProblems(error, [toolsFile, agentFile]));
      }
    }

    const before = startOnly(current);
    const after = startOnly(next);
    current = next;
    prices = nextPrices;
    if (nextTools !== undefined) {
      retired.push(tools);
      tools = nextTools;
    }
    lastTexts = texts;
    const restartNeeded = Object.keys(after).filter((k) => !isDeepStrictEqual(before[k], after[k]));
    if (restartNeeded.length > 0) {
      logger.warn("policy reloaded, but these are read only at start: restart to apply them", {
        fields: restartNeeded,
      });
    }
    if (changed.includes(modelsFile)) {
      logger.info("prices reloaded", { file: modelsFile, models: prices.models.size });
    }
    if (stale.length > 0) {
      logger.info(
        "tools whose script or pinned program changed were read, hashed and loaded again",
        {
          tools: stale,
        },
      );
    }
    logger.info("policies reloaded", {
      files: changed,
      agentVersion: current.agentVersion,
      inventoryVersion: current.inventoryVersion,
      toolRuntimeRebuilt: nextTools !== undefined,
    });
    return { ok: true, changed };
  };

  let queue: Promise<unknown> = Promise.resolve();
  const reload = () => {
    const next = queue.then(reloadOnce);
    queue = next.catch((error) => logger.error("policy reload failed", { error }));
    return next;
  };

  // The directory, not the files: editors replace a file by renaming a new one over it.
  let watcher: FSWatcher | undefined;
  let settle: NodeJS.Timeout | undefined;
  const names = new Set<string>(policyFiles);
  try {
    // A write is several events (truncate, then data): read once they settle.
    watcher = watch(dir, (_event, name) => {
      if (name !== null && !names.has(name)) return;
      clearTimeout(settle);
      settle = setTimeout(() => void reload(), 200);
    });
    watcher.on("error", (error) =>
      logger.warn("cannot watch the policy files; send SIGHUP after editing them", { dir, error }),
    );
  } catch (error) {
    logger.warn("cannot watch the policy files; send SIGHUP after editing them", { dir, error });
  }
  const onSighup = () => void reload();
  const signals = options.signals ?? true;
  if (signals) process.on("SIGHUP", onSighup);

  return {
    get current() {
      return current;
    },
    view,
    prices: pricesView,
    tools: toolsView,
    reload,
    async close() {
      watcher?.close();
      clearTimeout(settle);
      if (signals) process.off("SIGHUP", onSighup);
      await queue;
      await toolsView.close();
    },
  };
}
