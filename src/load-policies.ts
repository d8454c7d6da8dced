// Reads the operator's policy files from disk and hands them, with the built-in tools'
// descriptors (declared beside their implementations in src/tools/), to the pure parsers in
// src/policy/.
// The only policy code that does I/O: it reads `agent.yaml` (required) and `tools.yaml`
// (optional), and computes the content-hash versions that key every cached ceiling. Any problem
// stops start-up with a ConfigError naming the file; problems in both files are listed together.
import { createHash } from "node:crypto";
import { type FSWatcher, watch } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { ConfigError, type Problem } from "./errors.ts";
import type { Logger } from "./log.ts";
import {
  type AgentPolicy,
  listPolicyTools,
  parseAgentPolicy,
  parseToolsPolicy,
  type ToolsPolicy,
  validateAgentTools,
} from "./policy/policy-files.ts";
import { createInventory, type Inventory } from "./policy/tools.ts";
import { loadPriceTable, type PriceTable, parsePriceTable } from "./runs/prices.ts";
import { builtinDescriptors, namedOptionalDescriptors } from "./tools/builtin-tools.ts";

/** The agent as loaded: frozen, since ceilings derived from it are memoised on its identity. */
export type VersionedAgentPolicy = Readonly<
  Omit<AgentPolicy, "tools" | "deniedTools"> & {
    tools: readonly string[];
    deniedTools: readonly string[];
    /** The content hash of agent.yaml (what cached ceilings key on), not the declared version. */
    version: string;
    /** The `version` agent.yaml declares, for the agent card. */
    declaredVersion: string;
  }
>;

export type LoadedPolicies = {
  /** The parsed agent.yaml; `version` is its content hash (what the ceiling cache keys on). */
  readonly agent: VersionedAgentPolicy;
  readonly inventory: Inventory;
  /** The parsed tools.yaml (empty lists without one): what src/tools needs to run declared tools. */
  readonly toolsPolicy: ToolsPolicy;
  /** The full path of tools.yaml (read or not), for start-up errors about declared tools. */
  readonly toolsFile?: string;
  /** Same as `inventory.version`: a hash of every tool descriptor, built-ins included. */
  readonly inventoryVersion: string;
  /** Same as `agent.version`. */
  readonly agentVersion: string;
};

/** Where a live view of the policies (src/policy-reload.ts) keeps the policies in force. */
export const policiesNowKey = Symbol("policies in force");

/**
 * The policies in force, as one value: what a run reads once and keeps to its end. A live view
 * (src/policy-reload.ts) changes under a reload; any other LoadedPolicies is returned as it is.
 */
export function policiesNow(policies: LoadedPolicies): LoadedPolicies {
  const now = (policies as { [policiesNowKey]?: () => LoadedPolicies })[policiesNowKey];
  return now === undefined ? policies : now();
}

function hashJson(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

/** The file's text, or undefined if it does not exist (any other failure is a ConfigError). */
async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(
      [{ field: file, message: `${file}: cannot be read: ${reason}` }],
      `peergate cannot start: bad policy file ${file}`,
    );
  }
}

/** Runs a parser, turning its ConfigError into problems so both files can be reported at once. */
function collect<T>(problems: Problem[], parse: () => T): T | undefined {
  try {
    return parse();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
    return undefined;
  }
}

/**
 * Loads `<policiesDir>/agent.yaml` and `<policiesDir>/tools.yaml`. Throws ConfigError listing
 * every problem, each naming its file.
 */
export async function loadPolicies(policiesDir: string): Promise<LoadedPolicies> {
  const agentFile = path.join(policiesDir, "agent.yaml");
  const toolsFile = path.join(policiesDir, "tools.yaml");
  const [agentText, toolsText] = await Promise.all([
    readOptional(agentFile),
    readOptional(toolsFile),
  ]);
  if (agentText === undefined) {
    throw new ConfigError(
      [
        {
          field: agentFile,
          message: `no agent.yaml: looked for ${agentFile} (set PEERGATE_POLICIES_DIR to the directory holding agent.yaml and tools.yaml)`,
        },
      ],
      "peergate cannot start: the served agent is not configured",
    );
  }

  const problems: Problem[] = [];
  const agentPolicy = collect(problems, () => parseAgentPolicy(agentText, agentFile));
  const toolsPolicy: ToolsPolicy | undefined =
    toolsText === undefined
      ? { commands: [], mcpServers: [] }
      : collect(problems, () => parseToolsPolicy(toolsText, toolsFile, builtinDescriptors));
  if (agentPolicy === undefined || toolsPolicy === undefined) {
    throw new ConfigError(problems, "peergate cannot start: bad policy files");
  }

  const tools = listPolicyTools(toolsPolicy, [
    ...builtinDescriptors,
    ...namedOptionalDescriptors(agentPolicy.tools),
  ]);
  const built = createInventory(tools, hashJson(tools));
  if (!built.ok) {
    // parseToolsPolicy already applies the name rules; this is the same check, kept fail-closed.
    throw new ConfigError(
      built.problems.map((p) => ({
        field: `${toolsFile}: ${p.where}`,
        value: p.name,
        expected: p.message,
        message: `${toolsFile}: ${p.where} = ${JSON.stringify(p.name)}: expected ${p.message}`,
      })),
      `peergate cannot start: bad policy file ${toolsFile}`,
    );
  }
  const inventory = built.inventory;
  validateAgentTools(agentPolicy, inventory, agentFile);

  const agentVersion = hashJson(agentPolicy);
  const agent: VersionedAgentPolicy = Object.freeze({
    ...agentPolicy,
    tools: Object.freeze([...agentPolicy.tools]),
    deniedTools: Object.freeze([...agentPolicy.deniedTools]),
    version: agentVersion,
    declaredVersion: agentPolicy.version,
  });
  return {
    agent,
    inventory,
    toolsPolicy,
    toolsFile,
    inventoryVersion: inventory.version,
    agentVersion,
  };
}

/** The price table as it is now: a view the run core reads at each run's start. */
export type LivePriceTable = {
  /** Read by the run core when a run starts; the run keeps the price it found. */
  readonly table: PriceTable;
  /** Reads the file again; a bad file keeps the table in force and says why. */
  reload(): Promise<{ ok: true } | { ok: false; problem: string }>;
  close(): Promise<void>;
};

/**
 * The price file alone, watched. The server now watches every policy file together
 * (`watchPolicies`, src/policy-reload.ts); this stays for callers that want prices only.
 *
 * `policies/models.yaml`, read again when it changes or on SIGHUP, without a restart: an
 * operator who adds a price for a local model does not have to stop the runs in flight. The
 * new file is validated before it replaces the old one; a bad one keeps the old prices and is
 * logged with the reason. A run's price is fixed when it starts (src/runs/core.ts).
 */
export async function watchPriceTable({
  file,
  logger,
  signals = true,
}: {
  file: string;
  logger: Logger;
  /** Reload on SIGHUP too (the server; tests that start many servers may turn it off). */
  signals?: boolean;
}): Promise<LivePriceTable> {
  let current = await loadPriceTable(file);
  let lastText = await readFile(file, "utf8").catch(() => "");
  const table: PriceTable = {
    get models() {
      return current.models;
    },
    get fallback() {
      return current.fallback;
    },
  };
  let queue: Promise<unknown> = Promise.resolve();
  const reload = () => {
    const next = queue.then(async () => {
      const text = await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) =>
        error.code === "ENOENT" ? "" : Promise.reject(error),
      );
      if (text === lastText) return { ok: true as const };
      try {
        current = parsePriceTable(text, file);
        lastText = text;
        logger.info("prices reloaded", { file, models: current.models.size });
        return { ok: true as const };
      } catch (error) {
        const problem =
          error instanceof ConfigError
            ? error.problems.map((p) => p.message).join("; ")
            : String(error);
        logger.warn("prices not reloaded: the file is invalid; the prices in force stay", {
          file,
          problem,
        });
        return { ok: false as const, problem };
      }
    });
    queue = next.catch(() => {});
    return next;
  };
  // The directory, not the file: editors replace a file by renaming a new one over it.
  let watcher: FSWatcher | undefined;
  let settle: NodeJS.Timeout | undefined;
  try {
    // A write is several events (truncate, then data): read once they settle.
    watcher = watch(path.dirname(file), (_event, name) => {
      if (name !== null && name !== path.basename(file)) return;
      clearTimeout(settle);
      settle = setTimeout(() => void reload(), 200);
    });
    watcher.on("error", (error) => logger.warn("cannot watch the price file", { file, error }));
  } catch (error) {
    logger.warn("cannot watch the price file; send SIGHUP after editing it", { file, error });
  }
  const onSighup = () => void reload();
  if (signals) process.on("SIGHUP", onSighup);
  return {
    table,
    reload,
    async close() {
      watcher?.close();
      clearTimeout(settle);
      if (signals) process.off("SIGHUP", onSighup);
      await queue;
    },
  };
}
