// `peergate tools`: the tool inventory from the policy files, with the three properties every
// ceiling is computed from (risk, disclosure, egress). No server, no database.
import { loadConfig } from "../config.ts";
import { loadPolicies } from "../load-policies.ts";
import type { ToolView } from "../policy/explain.ts";
import { describeTools } from "../services/describe-tools.ts";
import { type Command, exitCodes } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

function describeNotes(tool: ToolView): string {
  const notes: string[] = [];
  if (tool.needsPerson) notes.push("needs a person: never in caller runs");
  if (tool.persistsOperatorState) notes.push("persists operator state: never in caller runs");
  return notes.join("; ");
}

export const toolsCommand: Command = {
  words: ["tools"],
  summary: "list the tool inventory with risk, disclosure and egress",
  help: [
    "[--json]",
    "",
    "Lists every tool the policy files in $PEERGATE_POLICIES_DIR make available: the built-ins,",
    "declared command tools and MCP tools, with category, risk, disclosure, egress, aliases and",
    "the hidden execute half of two-phase tools; then each declared command tool's mode, its",
    "contracts (arguments, stdin, rationale, result, nonzero, stream) and the SHA-256 of its",
    "canonical declaration (the manifest digest approvals bind to adds the resolved programs'",
    "and script's hashes at start-up).",
    "",
    "Options:",
    "  --json  print {inventoryVersion, tools: [...]} as JSON",
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const view = describeTools(await loadPolicies(loadConfig(cli.env, cli.cwd).policiesDir));
    const { tools, declared } = view;
    if (args.values.json) {
      cli.io.out(toTerminalJson(view));
      return exitCodes.ok;
    }
    cli.io.out(
      formatTable(
        ["TOOL", "CATEGORY", "RISK", "DISCLOSURE", "EGRESS", "ALIASES", "HIDDEN HALF", "NOTES"],
        tools.map((tool) => [
          tool.name,
          tool.category,
          tool.risk,
          tool.disclosure,
          tool.egress ? "yes" : "no",
          tool.aliases.length === 0 ? "-" : tool.aliases.join(", "),
          tool.executeHalf ?? "-",
          describeNotes(tool),
        ]),
      ),
    );
    cli.io.out(`\n${tools.length} tools (inventory ${view.inventoryVersion.slice(0, 12)})`);
    if (declared.length > 0) {
      cli.io.out(
        `\n${formatTable(
          ["DECLARED TOOL", "MODE", "CONTRACT", "DECLARATION SHA-256"],
          declared.map((d) => [d.name, d.mode, d.contract, d.declarationSha256.slice(0, 16)]),
        )}`,
      );
    }
    return exitCodes.ok;
  },
};
