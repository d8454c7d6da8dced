// Reads the operator's policy files from disk and hands them, with the built-in tools'
// descriptors (declared beside their implementations in src/tools/), to the pure parsers in
// src/policy/.
// The only policy code that does I/O: it reads `agent.yaml` (required) and `tools.yaml`
// (optional), and computes the content-hash versions that key every cached ceiling. Any problem
// stops start-up with a ConfigError naming the file; problems in both files are listed together.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { ConfigError, type Problem } from "./errors.ts";
import {
  type AgentPolicy,
  listPolicyTools,
  parseAgentPolicy,
  parseToolsPolicy,
  type ToolsPolicy,
  validateAgentTools,
} from "./policy/policy-files.ts";
import { createInventory, type Inventory } from "./policy/tools.ts";
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
