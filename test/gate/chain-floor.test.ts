// A chain tool under an `allow` override: its stages are not gated one by one then, so the call's
// own decision must read them. A stage the floor flags (code hidden in `find -exec sh -c`) makes
// the call ask, as an execute_command call with floor reasons would; a plain chain still runs.
import { describe, expect, it } from "vitest";
import type { RunControls } from "../../src/gate/controls.ts";
import { decideToolCall } from "../../src/gate/decide.ts";
import type { ToolDescriptor } from "../../src/policy/tools.ts";

const chainTool: ToolDescriptor = {
  name: "repo_tools",
  description: "a chain of repository programs",
  category: "shell",
  risk: "low-risk",
  disclosure: "internal",
  egress: false,
  aliases: [],
  executeHalf: undefined,
  needsPerson: false,
  persistsOperatorState: false,
};

const controls: RunControls = {
  policy: "read-only",
  set: { offered: [chainTool], names: new Map() },
  commands: [],
  overrides: { caller: { repo_tools: "allow" }, agent: {} },
  urlGrants: undefined,
  whenNobody: "park",
  classifier: true,
};

const decide = (command: string) =>
  decideToolCall(
    { controls, commandTools: new Map([["repo_tools", { mode: "chain" as const }]]) },
    chainTool,
    { command },
  );

describe("a chain tool under an allow override", () => {
  it("asks when a stage carries code the floor reads", async () => {
    const outcome = await decide("find . -name '*.md' -exec sh -c 'cat \"$1\" > $(mktemp)' _ {} ;");
    expect(outcome.resolved.action).toBe("park");
    expect(outcome.record.floorReasons?.length).toBeGreaterThan(0);
    expect(outcome.resolved.reason).toContain("risk floor");
  });

  it("runs a chain of plain programs, as the override says", async () => {
    const outcome = await decide("git status --short | head -n 5");
    expect(outcome.resolved.action).toBe("run");
    expect(outcome.record.floorReasons).toBeUndefined();
  });
});
