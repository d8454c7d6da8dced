// Policy files that must stop start-up, and what the operator is told: the file, the path inside
// it, the value found and what was expected, for every problem at once.
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.ts";
import {
  parseAgentPolicy,
  parseToolsPolicy,
  validateAgentTools,
} from "../../src/policy/policy-files.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";

function failure(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

const validAgent = `name: a\ndescription: d\nversion: "1.0"\n`;

describe("YAML syntax", () => {
  it("names the file, line and column", () => {
    const error = failure(() =>
      parseAgentPolicy("name: [unclosed\ntools: x\n", "/etc/pg/agent.yaml"),
    );
    expect(error.message).toContain("bad policy file /etc/pg/agent.yaml");
    expect(error.problems[0]?.message).toMatch(
      /^\/etc\/pg\/agent\.yaml: line \d+, column \d+: not valid YAML/,
    );
  });

  it("refuses duplicate keys instead of keeping the last one", () => {
    const error = failure(() =>
      parseAgentPolicy(`${validAgent}tools: [web]\ntools: [shell]\n`, "agent.yaml"),
    );
    expect(error.problems[0]?.message).toMatch(
      /line 5, column 1: not valid YAML: Map keys must be unique/,
    );
  });
});

describe("agent.yaml fields", () => {
  it("lists every bad field with path, value and expectation", () => {
    const error = failure(() =>
      parseAgentPolicy(
        [
          "name: ''",
          "description: d",
          "version: 1.0",
          "tools: [files, 'has space', Shell]",
          "deniedtools: [shell]",
          "skills:",
          "  - {id: s, name: S, description: D, tags: [x], colour: red}",
        ].join("\n"),
        "agent.yaml",
      ),
    );
    const messages = error.problems.map((p) => p.message);
    expect(messages).toEqual(
      expect.arrayContaining([
        'agent.yaml: name = "": expected the agent\'s name (not empty)',
        expect.stringMatching(/^agent\.yaml: version = 1: expected a version string/),
        expect.stringMatching(
          /^agent\.yaml: tools\[1\] = "has space": expected a tool name or a category/,
        ),
        'agent.yaml: deniedtools = ["shell"]: expected a known field name (check the spelling)',
        'agent.yaml: skills[0].colour = "red": expected a known field name (check the spelling)',
      ]),
    );
    expect(error.problems.find((p) => p.field === "agent.yaml: tools[1]")).toMatchObject({
      value: "has space",
    });
  });

  it("refuses a missing required field, saying it is missing", () => {
    const error = failure(() => parseAgentPolicy("name: a\n", "agent.yaml"));
    expect(error.problems.map((p) => p.message)).toEqual([
      "agent.yaml: description = (missing): expected what the agent does (not empty)",
      expect.stringMatching(/^agent\.yaml: version = \(missing\)/),
    ]);
  });

  it("refuses a top-level __proto__ key rather than letting it change anything", () => {
    const error = failure(() =>
      parseAgentPolicy(`${validAgent}__proto__: {tools: [shell]}\n`, "agent.yaml"),
    );
    expect(error.problems.map((p) => p.field)).toEqual(["agent.yaml: __proto__"]);
  });

  it("refuses a file that is not a mapping", () => {
    const error = failure(() => parseAgentPolicy("- just\n- a list\n", "agent.yaml"));
    expect(error.problems[0]?.message).toMatch(
      /\(top level\) = \["just","a list"\]: expected a mapping/,
    );
  });

  it("refuses duplicate skill ids", () => {
    const skill = "  - {id: s, name: S, description: D}";
    const error = failure(() =>
      parseAgentPolicy(`${validAgent}skills:\n${skill}\n${skill}\n`, "agent.yaml"),
    );
    expect(error.problems[0]?.message).toMatch(
      /^agent\.yaml: skills = .*expected skills with distinct ids/,
    );
  });

  it.each([
    [
      "a self-referencing alias",
      "name: &a [*a]\n",
      "agent.yaml: name = (a value that contains itself)",
    ],
    [
      "a self-referencing list entry",
      `${validAgent}tools: &x [files, *x]\n`,
      "agent.yaml: tools[1] =",
    ],
    ["an unknown key holding a cycle", `${validAgent}extra: &a\n  b: *a\n`, "agent.yaml: extra ="],
  ])("reports %s as a ConfigError, never a crash", (_label, text, expected) => {
    const error = failure(() => parseAgentPolicy(text, "agent.yaml"));
    expect(error.message).toContain(expected);
  });

  it("escapes invisible and right-to-left characters in the echoed value", () => {
    const error = failure(() =>
      parseAgentPolicy(`${validAgent}tools: ["web\u202e\u200b"]\n`, "agent.yaml"),
    );
    expect(error.problems[0]?.message).toContain('"web\\u{202e}\\u{200b}"');
    expect(error.message).not.toMatch(/[\u202e\u200b]/);
  });
});

describe("tools.yaml fields", () => {
  it("reads allowOptions as true or false only", () => {
    const error = failure(() =>
      parseToolsPolicy(
        [
          "commands:",
          "  - {name: a, description: d, mode: fixed, program: p, allowOptions: yes-please}",
          "  - {name: b, description: d, mode: structured, programs: [p], allowOptions: 1}",
        ].join("\n"),
        "tools.yaml",
        builtinTools,
      ),
    );
    const byField = new Map(error.problems.map((p) => [p.field, p.message]));
    expect(byField.get("tools.yaml: commands[0].allowOptions")).toMatch(/expected true or false/);
    expect(byField.get("tools.yaml: commands[1].allowOptions")).toMatch(/expected true or false/);
  });

  it("lists every bad field of commands and MCP servers", () => {
    const error = failure(() =>
      parseToolsPolicy(
        [
          "commands:",
          "  - {name: a, description: d, mode: fixed, program: p, risk: dangerous}",
          "  - {name: b, description: d, mode: fixed, program: p, sha256: ABC}",
          "  - {name: c, description: d, mode: shell, program: p}",
          "  - {name: e, description: d, mode: structured, programs: []}",
          "  - {name: f, description: d, mode: fixed, program: p, timeoutMs: 5}",
          "mcpServers:",
          "  - {name: s.x, transport: stdio, command: c}",
          "  - {name: t, transport: http, url: 'file:///etc/passwd'}",
          "  - {name: u, transport: stdio, command: c, tools: {ok: {risk: maybe, colour: red}, 'bad name': {}}}",
        ].join("\n"),
        "tools.yaml",
        builtinTools,
      ),
    );
    const byField = new Map(error.problems.map((p) => [p.field, p.message]));
    expect(byField.get("tools.yaml: commands[0].risk")).toBe(
      'tools.yaml: commands[0].risk = "dangerous": expected one of read-only, low-risk, high-risk, unknown',
    );
    expect(byField.get("tools.yaml: commands[1].sha256")).toMatch(
      /"ABC": expected the program's SHA-256/,
    );
    expect(byField.get("tools.yaml: commands[2].mode")).toMatch(
      /"shell": expected mode: fixed or structured/,
    );
    expect(byField.get("tools.yaml: commands[3].programs")).toMatch(/at least one program/);
    expect(byField.get("tools.yaml: commands[4].timeoutMs")).toMatch(/= 5: expected milliseconds/);
    expect(byField.get("tools.yaml: mcpServers[0].name")).toMatch(
      /"s\.x": expected an MCP server name/,
    );
    expect(byField.get("tools.yaml: mcpServers[1].url")).toMatch(
      /expected an http:\/\/ or https:\/\/ URL/,
    );
    expect(byField.get("tools.yaml: mcpServers[2].tools.ok.risk")).toMatch(
      /"maybe": expected one of/,
    );
    expect(byField.get('tools.yaml: mcpServers[2].tools["bad name"]')).toMatch(
      /expected a tool name/,
    );
    expect(byField.get("tools.yaml: mcpServers[2].tools.ok.colour")).toMatch(
      /"red": expected a known field name/,
    );
    expect(error.problems).toHaveLength(10);
  });

  it.each([
    [
      "a built-in's name",
      "read_file",
      /collide with "read_file" \(built-in tool read_file\)|not already used by built-in tool read_file/,
    ],
    [
      "a case variant of a built-in",
      "Read_File",
      /does not collide with "read_file" \(built-in tool read_file\)/,
    ],
    ["a built-in alias", "GLOB", /"glob" \(built-in alias glob of find\)/],
    [
      "a built-in hidden half",
      "execute_write_file",
      /built-in hidden half execute_write_file of write_file/,
    ],
    ["a category word", "web", /not a category word/],
  ])("refuses a command tool named like %s", (_label, name, expected) => {
    const error = failure(() =>
      parseToolsPolicy(
        `commands:\n  - {name: ${name}, description: d, mode: fixed, program: p}\n`,
        "tools.yaml",
        builtinTools,
      ),
    );
    expect(error.problems.map((p) => p.field)).toContain("tools.yaml: commands[0].name");
    expect(error.message).toMatch(expected);
  });

  it("refuses two declared tools that differ only by case, and MCP names that collide", () => {
    const error = failure(() =>
      parseToolsPolicy(
        [
          "commands:",
          "  - {name: deploy, description: d, mode: fixed, program: p}",
          "  - {name: Deploy, description: d, mode: fixed, program: p}",
          "  - {name: notes.search, description: d, mode: fixed, program: p}",
          "mcpServers:",
          "  - {name: notes, transport: stdio, command: c, tools: {search: }}",
          "  - {name: NOTES, transport: stdio, command: c}",
        ].join("\n"),
        "tools.yaml",
        builtinTools,
      ),
    );
    expect(error.problems.map((p) => [p.field, p.value])).toEqual([
      ["tools.yaml: commands[1].name", "Deploy"],
      ["tools.yaml: mcpServers[0].tools.search", "notes.search"],
      ["tools.yaml: mcpServers[1].name", "NOTES"],
    ]);
  });
});

describe("validateAgentTools", () => {
  const built = createInventory(builtinTools, "v");
  if (!built.ok) throw new Error("built-ins refused");
  const inventory = built.inventory;
  const agent = (tools: string[], deniedTools: string[]) =>
    parseAgentPolicy(
      `${validAgent}tools: ${JSON.stringify(tools)}\ndeniedTools: ${JSON.stringify(deniedTools)}\n`,
      "agent.yaml",
    );

  it("accepts names, aliases, categories, and denials of any name", () => {
    expect(() =>
      validateAgentTools(
        agent(["files", "glob", "web_fetch"], ["execute_execute_command", "shell"]),
        inventory,
        "agent.yaml",
      ),
    ).not.toThrow();
  });

  it("refuses unknown names (a misspelt denial protects nothing) and hidden halves in tools", () => {
    const error = failure(() =>
      validateAgentTools(
        agent(["Read_File", "execute_write_file"], ["execute_comand", "WEB_FETCH"]),
        inventory,
        "agent.yaml",
      ),
    );
    expect(error.problems.map((p) => p.message)).toEqual([
      expect.stringMatching(
        /^agent\.yaml: tools\[0\] = "Read_File": expected a tool in the inventory.*did you mean read_file\?/,
      ),
      expect.stringMatching(
        /^agent\.yaml: tools\[1\] = "execute_write_file": expected not a hidden execute half: name write_file/,
      ),
      expect.stringMatching(
        /^agent\.yaml: deniedTools\[0\] = "execute_comand": expected a tool in the inventory/,
      ),
      expect.stringMatching(
        /^agent\.yaml: deniedTools\[1\] = "WEB_FETCH".*did you mean web_fetch\?/,
      ),
    ]);
  });
});
