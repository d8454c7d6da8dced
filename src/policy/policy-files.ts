// The operator's policy files, `agent.yaml` (the served agent, agent-policy.ts) and `tools.yaml`
// (declared command tools and MCP servers, tools-policy.ts), parsed from text and validated with
// zod; the YAML reading and field helpers both share are in policy-fields.ts. Pure: the loader
// reads the files and hashes them. A bad file stops start-up with every problem listed, each
// naming the file, the path inside it, the value found and what was expected (these are the only
// policy functions that throw, and only ConfigError). This module is the one the rest of src/
// imports them through.
export {
  type AgentPolicy,
  agentPolicySchema,
  parseAgentPolicy,
  validateAgentTools,
} from "./agent-policy.ts";
export {
  type ArgSourcePolicy,
  type CommandToolPolicy,
  declaredToolBounds,
  type ExecutablePolicy,
  listPolicyTools,
  type McpServerPolicy,
  type McpToolPolicy,
  parseToolsPolicy,
  type ToolsPolicy,
  toolsPolicySchema,
} from "./tools-policy.ts";
