// A shell, an interpreter or a wrapper declared `read-only` in tools.yaml would auto-run any code
// the model's arguments give it; it is refused at load unless the declaration fixes the code.
// The message names the file, the tool, the field, the value and the fix.
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.ts";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";

function fixedTool(program: string, args: readonly string[], risk = "read-only"): string {
  return [
    "commands:",
    "  - name: t",
    "    description: d",
    "    mode: fixed",
    `    program: ${JSON.stringify(program)}`,
    `    args: ${JSON.stringify(args)}`,
    `    risk: ${risk}`,
    "",
  ].join("\n");
}

function structuredTool(programs: readonly string[], risk = "read-only"): string {
  return [
    "commands:",
    "  - name: t",
    "    description: d",
    "    mode: structured",
    `    programs: ${JSON.stringify(programs)}`,
    `    risk: ${risk}`,
    "",
  ].join("\n");
}

function problemsOf(text: string): string[] {
  try {
    parseToolsPolicy(text, "tools.yaml", builtinDescriptors);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => p.message);
    throw error;
  }
  return [];
}

describe("read-only shells and interpreters", () => {
  it.each([
    ["bash", []],
    ["/bin/sh", ["-e"]],
    ["python3", []],
    ["node", ["--no-warnings"]],
    ["perl", ["-w"]],
    ["awk", []],
    ["env", []],
    ["env", ["-i"]],
    ["xargs", []],
    ["sudo", []],
    ["busybox", []],
    ["busybox", ["sh"]],
    ["env", ["bash"]],
    ["timeout", ["10", "python3"]],
  ])(
    "refuses %s %j declared read-only, naming file, tool, field, value and fix",
    (program, args) => {
      const problems = problemsOf(fixedTool(program, args));
      expect(problems).toHaveLength(1);
      const message = problems[0] as string;
      expect(message).toMatch(
        /^tools\.yaml: commands\[0\]\.risk = "read-only": expected not read-only for tool t: /,
      );
      expect(message).toContain("put the script in args");
      expect(message).toContain("risk: high-risk");
    },
  );

  it.each([
    ["bash", ["-c", "git log -n 5"]],
    ["sh", ["-ec", "ls"]],
    ["env", ["-i", "bash", "-c", "ls"]],
    ["python3", ["-c", "print(1)"]],
    ["python3", ["tools/report.py"]],
    ["bash", ["scripts/check.sh"]],
    ["node", ["-e", "1"]],
    ["awk", ["{ print $1 }"]],
    ["git", ["log"]],
    ["timeout", ["10", "git", "log"]],
  ])("accepts %s %j: the code is fixed", (program, args) => {
    expect(problemsOf(fixedTool(program, args))).toEqual([]);
  });

  it("accepts any shell that is not declared read-only", () => {
    expect(problemsOf(fixedTool("bash", [], "high-risk"))).toEqual([]);
    expect(problemsOf(fixedTool("bash", [], "low-risk"))).toEqual([]);
    expect(problemsOf(structuredTool(["bash", "python3"], "unknown"))).toEqual([]);
  });

  it("refuses a structured read-only tool that may pick a shell or interpreter", () => {
    const problems = problemsOf(structuredTool(["git", "python3"]));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("not read-only for tool t: python3 is an interpreter");
    expect(problems[0]).toContain("declare risk: high-risk");
    expect(problemsOf(structuredTool(["git", "ls"]))).toEqual([]);
  });
});
