// The model-visible description of a declared command tool: a built-in usage contract for its
// mode (what the model provides, how output and nonzero exits come back, that policy and approval
// govern it), then "Additional tool guidance:" and the operator's description, which grants
// nothing.
import type { CommandToolPolicy } from "../../policy/policy-files.ts";

function describeInput(tool: CommandToolPolicy, optionsAllowed: boolean): string[] {
  const lines: string[] = [];
  const contract = tool.arguments ?? { mode: "optional" as const };
  const options = optionsAllowed ? "" : ", none starting with -";
  switch (tool.mode) {
    case "fixed":
      lines.push(`Runs a fixed program with fixed leading arguments (${tool.program}).`);
      break;
    case "structured":
      lines.push(
        `Runs one program you name in "program" (one of: ${tool.programs.join(", ")}) with the arguments you give; no shell runs.`,
      );
      break;
    case "chain":
      lines.push(
        `Runs the command line in "command": plain words joined by |, ;, && or ||, read by a bash parser but never run by a shell. Redirections, here-documents, $() and backticks, background jobs, grouping, subshells, variables, globs, functions and aliases are refused.${tool.programs === undefined ? "" : ` Each stage runs one of: ${tool.programs.join(", ")}.`} Each stage is checked and approved on its own; a branch not taken asks nothing. Pipeline status: ${tool.pipefail === true ? "the last failing stage's (pipefail)" : "the last stage's"}.`,
      );
      break;
    case "script":
      lines.push(
        "Runs a verified script file with fixed leading arguments; a changed script is refused.",
      );
      break;
  }
  if (tool.mode !== "chain") {
    if (contract.mode === "none") lines.push("It takes no arguments.");
    else {
      const max = contract.maxCount ?? 32;
      const min = contract.minCount ?? (contract.mode === "required" ? 1 : 0);
      lines.push(
        `Put your arguments in "arguments" (${min} to ${max}, each one literal argv element${options}).`,
      );
    }
  }
  const stdin = tool.stdin ?? "none";
  if (stdin !== "none")
    lines.push(
      `"stdin" (${stdin}) is given to the ${tool.mode === "chain" ? "first stage" : "program"} on standard input.`,
    );
  const rationale = tool.rationale ?? (tool.mode === "fixed" ? "none" : "optional");
  if (rationale !== "none")
    lines.push(`"rationale" (${rationale}) is shown to the operator; it grants nothing.`);
  return lines;
}

function describeOutput(tool: CommandToolPolicy): string {
  const result = tool.result ?? "combined";
  const how =
    result === "structured"
      ? "a JSON object with status, stdout, stderr, truncation flags, sandbox backend, manifest digest and each command's program, executable and its SHA-256"
      : result === "stdout"
        ? "the exit code and stdout (stderr is not returned)"
        : "the exit code, stdout and stderr";
  const nonzero =
    tool.nonzero === "error"
      ? "A nonzero exit is reported as a tool error carrying the same result."
      : "A nonzero exit is a normal result.";
  return `Returns ${how}, cut at a byte bound (flagged), with control sequences and secrets removed. ${nonzero}`;
}

export function describeDeclaredTool(tool: CommandToolPolicy, optionsAllowed: boolean): string {
  return [
    ...describeInput(tool, optionsAllowed),
    describeOutput(tool),
    "Whether it runs is governed by the operator's policy, approvals, sandbox and limits.",
    "",
    `Additional tool guidance: ${tool.description}`,
  ].join("\n");
}
