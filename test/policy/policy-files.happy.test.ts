// Parsing the policy files that should parse: the shipped defaults, their commented examples,
// and the inventory they build.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { computeCeiling } from "../../src/policy/ceiling.ts";
import {
  listPolicyTools,
  parseAgentPolicy,
  parseToolsPolicy,
  validateAgentTools,
} from "../../src/policy/policy-files.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { shippedPoliciesDir } from "../support/shipped-policies.ts";
import { makeCaller } from "./fixtures.ts";

const policiesDir = shippedPoliciesDir;
const shippedAgent = readFileSync(path.join(policiesDir, "agent.yaml"), "utf8");
const shippedTools = readFileSync(path.join(policiesDir, "tools.yaml"), "utf8");

/** The shipped tools.yaml with its commented examples switched on. */
function uncommentExamples(text: string): string {
  const lines = text.split("\n");
  const start = lines.indexOf("commands: []");
  return [
    ...lines.slice(0, start),
    ...lines
      .slice(start)
      .filter((line) => line !== "commands: []" && line !== "mcpServers: []")
      .map((line) => (line.startsWith("# ") ? line.slice(2) : line === "#" ? "" : line)),
  ].join("\n");
}

describe("the shipped policies", () => {
  it("agent.yaml parses to the documented defaults", () => {
    const agent = parseAgentPolicy(shippedAgent, "agent.yaml");
    expect(agent).toMatchObject({
      name: "peergate",
      version: "0.1.0",
      model: undefined,
      tools: ["files", "context", "web"],
      deniedTools: [],
    });
    expect(agent.skills.length).toBeGreaterThan(0);
    for (const skill of agent.skills) {
      expect(skill.id && skill.name && skill.description).toBeTruthy();
      expect(skill.tags.length).toBeGreaterThan(0);
    }
    expect(agent.instructions.length).toBeGreaterThan(0);
  });

  it("tools.yaml declares nothing active", () => {
    expect(parseToolsPolicy(shippedTools, "tools.yaml", builtinDescriptors)).toEqual({
      commands: [],
      mcpServers: [],
    });
  });

  it("tools.yaml's commented examples are valid when switched on", () => {
    const policy = parseToolsPolicy(
      uncommentExamples(shippedTools),
      "tools.yaml",
      builtinDescriptors,
    );
    expect(policy.commands.map((c) => [c.name, c.mode])).toEqual([
      ["git_log", "fixed"],
      ["run_checks", "structured"],
    ]);
    expect(policy.mcpServers.map((s) => [s.name, s.transport])).toEqual([
      ["notes", "stdio"],
      ["weather", "http"],
    ]);
  });

  it("the default agent gives a public caller get_time and nothing else", () => {
    const agent = parseAgentPolicy(shippedAgent, "agent.yaml");
    const built = createInventory(
      listPolicyTools(parseToolsPolicy(shippedTools, "t", builtinDescriptors), builtinDescriptors),
      "v",
    );
    if (!built.ok) throw new Error("refused");
    validateAgentTools(agent, built.inventory, "agent.yaml");
    const ceiling = computeCeiling(built.inventory, { ...agent, version: "a" }, makeCaller());
    expect([...ceiling.admitted]).toEqual(["get_time"]);
  });
});

describe("parseToolsPolicy and listPolicyTools", () => {
  const text = `
commands:
  - name: git_log
    description: Show commits.
    mode: fixed
    program: /usr/bin/git
    args: [log, --oneline]
    sha256: ${"ab".repeat(32)}
    timeoutMs: 5000
    risk: read-only
    disclosure: internal
    egress: false
  - name: undeclared
    description: A tool that says nothing about itself.
    mode: structured
    programs: [make]
mcpServers:
  - name: notes
    transport: stdio
    command: notes-mcp
    tools:
      search: { risk: read-only, disclosure: private, egress: false }
      bare:
      __proto__: { risk: read-only, disclosure: public, egress: false }
  - name: remote
    transport: http
    url: https://mcp.example.com/x
`;

  it("builds descriptors: command tools are custom, MCP tools are <server>.<tool>", () => {
    const tools = listPolicyTools(
      parseToolsPolicy(text, "tools.yaml", builtinDescriptors),
      builtinDescriptors,
    );
    const declared = tools
      .slice(13)
      .map((t) => [t.name, t.category, t.risk, t.disclosure, t.egress]);
    expect(declared).toEqual([
      ["git_log", "custom", "read-only", "internal", false],
      ["undeclared", "custom", "unknown", "private", true],
      ["notes.search", "mcp", "read-only", "private", false],
      ["notes.bare", "mcp", "unknown", "private", true],
      ["notes.__proto__", "mcp", "read-only", "public", false],
    ]);
  });

  it("keeps a __proto__ key as an ordinary tool name and pollutes nothing", () => {
    const policy = parseToolsPolicy(text, "tools.yaml", builtinDescriptors);
    expect(policy.mcpServers[0]?.tools.map((t) => t.name)).toEqual(["search", "bare", "__proto__"]);
    expect(({} as Record<string, unknown>).risk).toBeUndefined();
  });

  it("reads empty keys as empty lists", () => {
    expect(parseToolsPolicy("commands:\nmcpServers:\n", "tools.yaml", builtinDescriptors)).toEqual({
      commands: [],
      mcpServers: [],
    });
    expect(parseToolsPolicy("", "tools.yaml", builtinDescriptors)).toEqual({
      commands: [],
      mcpServers: [],
    });
  });
});
