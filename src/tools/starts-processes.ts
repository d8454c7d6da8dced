// Which tools start a process for a run is the tools' own knowledge: execute_command, every
// declared command tool, and every stdio MCP server. The sandbox is told the answer (it is
// required only then: src/sandbox/prepare-sandbox.ts); a reload that newly needs it checks it first
// (src/policy-reload.ts).
import type { AgentToolPolicy } from "../policy/agent-tools.ts";
import { eligibleCode, viewAgentTools } from "../policy/agent-tools.ts";
import type { ToolsPolicy } from "../policy/policy-files.ts";
import type { Inventory } from "../policy/tools.ts";
import { executeCommandTool } from "./process/execute-command.ts";

/** True when the agent's tools can start a process for a run. */
export function startsProcesses(policies: {
  readonly inventory: Inventory;
  readonly agent: AgentToolPolicy;
  readonly toolsPolicy: ToolsPolicy;
}): boolean {
  if (policies.toolsPolicy.commands.length > 0) return true;
  if (policies.toolsPolicy.mcpServers.some((s) => s.transport === "stdio")) return true;
  const entry = policies.inventory.names.get(executeCommandTool.descriptor.name);
  if (entry === undefined) return false;
  const view = viewAgentTools(policies.inventory, policies.agent);
  return view.verdicts[entry.index] === eligibleCode;
}
