// The tool runtime: one implementation for every tool in the inventory that a caller run can
// ever use (built-ins, declared command tools, MCP tools), keyed by canonical name. The run
// engine decides whether a call may run (src/policy/check-tool-call.ts); this only does the work.
//
// Built once at start-up. Anything that would make a tool misbehave later (an unreachable
// workspace, a missing or changed program, an inventory tool without an implementation) is a
// ConfigError now, naming the tool.

import { ConfigError, type Problem } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { Inventory } from "../policy/tools.ts";
import type { ToolsPolicy } from "../policy/tools-policy.ts";
import { createNoneBackend } from "../sandbox/none.ts";
import type { Redactor } from "../sandbox/redact.ts";
import type { SandboxBackend } from "../sandbox/types.ts";
import type { BuiltinContext, BuiltinOptions, BuiltinTool } from "./builtin.ts";
import { builtinTools, optionalBuiltinTools } from "./builtin-tools.ts";
import { createCommandTools } from "./declared/command-tools.ts";
import type { McpInstances } from "./declared/mcp-instances.ts";
import { createMcpTools } from "./declared/mcp-tools.ts";
import { scrubEnvironment } from "./scrub-environment.ts";
import type { ToolImplementation, ToolRuntime } from "./types.ts";
import { createWorkspace, type Workspace } from "./workspace.ts";

export type ToolRuntimeOptions = BuiltinOptions & {
  /**
   * The part of the loaded policy files (load-policies.ts, which builds on this room) a runtime
   * needs: the inventory and the tools.yaml declarations behind it.
   */
  readonly policies: {
    readonly inventory: Inventory;
    readonly toolsPolicy: ToolsPolicy;
    /** The full path of tools.yaml, for start-up errors about declared tools. */
    readonly toolsFile?: string;
  };
  /** Absolute path of the workspace (created if missing, resolved with realpath once). */
  readonly workspace: string;
  /** peergate's data directory: refused to every tool, wherever it lies. */
  readonly dataDir: string;
  /** The parent environment commands inherit, scrubbed of secrets (never read from process.env here). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Variable names commands may see although they look secret (never SSH_*). */
  readonly envAllowlist?: readonly string[];
  /**
   * Lets the file tools read a regular file that has more than one hard link (default false: such
   * a file may be a link planted in the workspace to a file outside it).
   */
  readonly allowHardLinks?: boolean;
  /** How processes are confined (src/sandbox/prepare-sandbox.ts); the server always passes one. */
  readonly sandbox?: SandboxBackend;
  /** Replaces every secret peergate holds in process output. */
  readonly redactor?: Redactor;
  /**
   * The process's MCP server instances, shared by the runtimes a reload builds (so a revocation
   * reaches them all and `maxInstances` counts across them). Without it the runtime has its own.
   */
  readonly mcpInstances?: McpInstances;
  readonly logger: Logger;
};

const builtinsByName: ReadonlyMap<string, BuiltinTool> = new Map(
  [...builtinTools, ...optionalBuiltinTools].map((tool) => [tool.descriptor.name, tool]),
);

/** Tools' sandbox: without one (tool unit tests) processes are spawned plainly. */
function processConfinement(options: ToolRuntimeOptions) {
  return {
    sandbox: options.sandbox ?? createNoneBackend(),
    ...(options.redactor === undefined ? {} : { redactor: options.redactor }),
  };
}

/**
 * Builds every tool implementation. Throws ConfigError when the workspace cannot be used, a
 * declared program is missing or fails its SHA-256 pin, or the inventory and the
 * implementations disagree.
 */
export async function createToolRuntime(options: ToolRuntimeOptions): Promise<ToolRuntime> {
  let workspace: Workspace;
  try {
    workspace = await createWorkspace({
      root: options.workspace,
      dataDir: options.dataDir,
      allowHardLinks: options.allowHardLinks === true,
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(
      [
        {
          field: "PEERGATE_WORKSPACE",
          value: options.workspace,
          message: `PEERGATE_WORKSPACE=${JSON.stringify(options.workspace)}: ${reason}`,
        },
      ],
      "peergate cannot start: the workspace cannot be used",
    );
  }
  const env = scrubEnvironment(options.env, options.envAllowlist);
  const context: BuiltinContext = { workspace, env, options, ...processConfinement(options) };
  const { inventory, toolsPolicy } = options.policies;

  const tools = new Map<string, ToolImplementation>();
  const problems: Problem[] = [];
  const add = (tool: ToolImplementation) => tools.set(tool.name, tool);

  for (const descriptor of inventory.tools) {
    if (descriptor.category === "custom" || descriptor.category === "mcp") continue;
    if (descriptor.needsPerson || descriptor.persistsOperatorState) continue;
    const create = builtinsByName.get(descriptor.name)?.create;
    if (create === undefined) {
      problems.push({
        field: descriptor.name,
        message: `built-in tool ${descriptor.name} has no implementation`,
      });
      continue;
    }
    add(create(context, descriptor));
  }

  for (const tool of await createCommandTools({
    commands: toolsPolicy.commands,
    ...(options.policies.toolsFile === undefined ? {} : { file: options.policies.toolsFile }),
    executables: toolsPolicy.executables ?? [],
    workspace,
    env,
    parentEnv: options.env,
    envAllowlist: options.envAllowlist ?? [],
    ...processConfinement(options),
    pathVariable: options.env.PATH,
    ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
  })) {
    add(tool);
  }
  const mcp = createMcpTools({
    servers: toolsPolicy.mcpServers,
    workspace,
    env: options.env,
    envAllowlist: options.envAllowlist ?? [],
    ...processConfinement(options),
    ...(options.mcpInstances === undefined ? {} : { instances: options.mcpInstances }),
    logger: options.logger,
  });
  for (const tool of mcp.tools) add(tool);

  // The implementations and the inventory must describe the same tools, halves included.
  for (const tool of tools.values()) {
    const entry = inventory.names.get(tool.name);
    if (entry === undefined || entry.kind !== "tool") {
      problems.push({
        field: tool.name,
        message: `tool ${tool.name} is implemented but not in the inventory`,
      });
      continue;
    }
    if (entry.tool.executeHalf !== tool.executeHalf?.name) {
      problems.push({
        field: tool.name,
        message: `tool ${tool.name}: its hidden half (${tool.executeHalf?.name ?? "none"}) differs from the inventory's (${entry.tool.executeHalf ?? "none"})`,
      });
    }
  }
  for (const descriptor of inventory.tools) {
    if (descriptor.needsPerson || descriptor.persistsOperatorState) continue;
    if (!tools.has(descriptor.name)) {
      problems.push({
        field: descriptor.name,
        message: `tool ${descriptor.name} is in the inventory but has no implementation`,
      });
    }
  }
  if (problems.length > 0) {
    await mcp.close();
    throw new ConfigError(
      problems,
      "peergate cannot start: the tool implementations do not match the inventory",
    );
  }

  let closing: Promise<void> | undefined;
  return {
    tools,
    workspace: workspace.root,
    close: () => {
      closing ??= mcp.close();
      return closing;
    },
    releaseCaller: (callerId) => mcp.instances.closeCaller(callerId),
    releaseRun: (runId) => mcp.instances.closeRun(runId),
  };
}
