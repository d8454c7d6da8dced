// `peergate ceiling`: explains a ceiling tool by tool. `ceiling <name>` asks the running server
// about a real caller; `ceiling --tier T` computes one for a hypothetical caller from the policy
// files alone (no server, no database). A tier that is not one is a usage error naming the
// tiers: a typo answered with an all-refused ceiling and exit 0 looked like a real answer.

import { loadConfig } from "../config.ts";
import { loadPolicies } from "../load-policies.ts";
import { type CeilingReport, reportCeiling } from "../policy/explain.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import { tiers } from "../policy/tools.ts";
import type { CallerControlsReport, CommandCoverageReport } from "../services/explain-caller.ts";
import { type AdminResponse, callAdmin } from "./admin-client.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { nearest } from "./nearest.ts";
import { toTerminalJson } from "./terminal-text.ts";

/** `--allow a,b --allow c` → ["a", "b", "c"]. Entries are not trimmed: matching is exact. */
function readAllow(value: unknown): string[] {
  const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return values.flatMap((v) => String(v).split(",")).filter((entry) => entry !== "");
}

export const ceilingCommand: Command = {
  words: ["ceiling"],
  summary: "explain which tools a caller (or a hypothetical one) gets, and why",
  help: [
    "<name> [--json]",
    "       peergate ceiling --tier T [--allow a,b] [--json]",
    "",
    "With a caller name: asks the running server (PEERGATE_URL) for that caller's ceiling.",
    "With --tier: computes the ceiling for a caller with tier T and the given allow list, from the policy",
    "files in $PEERGATE_POLICIES_DIR (agent.yaml, tools.yaml). Prints every tool, whether it is",
    "admitted, and the one reason why; then allow entries that name no tool.",
    "",
    "Options:",
    `  --tier T   the caller's tier: ${tiers.join(", ")}`,
    "  --allow L  comma-separated tool names the caller is allowed by name; may repeat.",
    "             Matching is exact and case-sensitive: spaces are part of a name.",
    "  --command C  with a caller name: whether the command allowlists cover shell text C",
    '               (e.g. --command "git status --short"), its key, and why',
    "  --json     print {caller, inventoryVersion, agentVersion, admitted, decisions,",
    "             unknownAllowEntries, runNames, controls, command} as JSON",
  ].join("\n"),
  positionals: { min: 0, max: 1, names: "at most one caller name" },
  options: {
    tier: { type: "string" },
    allow: { type: "string", multiple: true },
    json: { type: "boolean" },
    command: { type: "string" },
  },
  async run(args, cli) {
    const name = args.positionals[0];
    const tier = args.values.tier;
    // `controls` and `command` are not declared in the contract's getCeiling response yet: typed
    // from the service until they are.
    let report: (CeilingReport | AdminResponse<"getCeiling">) & {
      controls?: CallerControlsReport;
      command?: CommandCoverageReport;
    };
    const command = args.values.command;
    if (command !== undefined && name === undefined) {
      throw new UsageError("--command needs a caller name: its allowlist lives on the server");
    }
    let heading: string;
    if (name !== undefined) {
      if (tier !== undefined || args.values.allow !== undefined) {
        throw new UsageError("give a caller name or --tier/--allow, not both");
      }
      report = await callAdmin(cli, "getCeiling", {
        params: { name },
        query: { command: typeof command === "string" ? command : undefined },
      });
      heading = `Ceiling of caller ${quoteUntrusted(name)}`;
    } else {
      if (typeof tier !== "string") {
        throw new UsageError(`give a caller name, or --tier: one of ${tiers.join(", ")}`);
      }
      if (!(tiers as readonly string[]).includes(tier)) {
        const near = nearest(tier, tiers);
        throw new UsageError(
          `--tier ${quoteUntrusted(tier)}: not a tier${near ? ` (did you mean ${near}?)` : ""}; expected one of ${tiers.join(", ")}`,
        );
      }
      const { agent, inventory } = await loadPolicies(loadConfig(cli.env, cli.cwd).policiesDir);
      report = reportCeiling(inventory, agent, {
        name: "(hypothetical)",
        tier,
        allow: readAllow(args.values.allow),
        version: 0,
      });
      heading = `Ceiling for a hypothetical caller; agent ${quoteUntrusted(agent.name)}, ${inventory.tools.length} tools in the inventory`;
    }
    if (args.values.json) {
      cli.io.out(toTerminalJson(report));
      return exitCodes.ok;
    }

    const allow = report.caller.allow;
    const allowShown =
      allow.length === 0 ? "(empty)" : allow.map((e) => quoteUntrusted(e)).join(", ");
    cli.io.out(heading);
    cli.io.out(`tier ${quoteUntrusted(report.caller.tier)}, allow ${allowShown}\n`);
    cli.io.out(
      formatTable(
        ["TOOL", "ADMITTED", "REASON", "WHY"],
        report.decisions.map((d) => [d.tool, d.admitted ? "yes" : "no", d.reason, d.sentence]),
      ),
    );
    cli.io.out(
      `\nAdmitted (${report.admitted.length}): ${report.admitted.length === 0 ? "nothing" : report.admitted.join(", ")}`,
    );
    const otherNames = report.runNames.filter((n) => n.kind !== "tool");
    if (otherNames.length > 0) {
      const described = otherNames.map((n) =>
        n.kind === "alias"
          ? `${n.name} (alias of ${n.tool})`
          : `${n.name} (hidden half of ${n.tool}, approval path only)`,
      );
      cli.io.out(`A run also answers to: ${described.join(", ")}`);
    }
    if (report.controls !== undefined) printControls(cli.io.out, report.controls);
    if (report.command !== undefined) {
      const c = report.command;
      cli.io.out(
        `\nCommand ${quoteUntrusted(c.command)}: ${c.covered ? "covered" : "not covered"} (key ${c.key === null ? "none" : quoteUntrusted(c.key)})`,
      );
      cli.io.out(`  ${quoteUntrusted(c.reason, 2_000).slice(1, -1)}`);
    }
    const unknown = report.unknownAllowEntries;
    if (unknown.length > 0) {
      cli.io.out(`\nAllow entries that name no tool (${unknown.length}):`);
      cli.io.out(
        formatTable(
          ["ENTRY", "NOTE"],
          unknown.map((u) => [quoteUntrusted(u.entry), u.note]),
        ).replace(/^/gm, "  "),
      );
    }
    return exitCodes.ok;
  },
};

/** The precise controls beside the ceiling: what runs without asking, and what asks. */
function printControls(out: (line: string) => void, controls: CallerControlsReport): void {
  out(
    `\nApproval policy ${quoteUntrusted(controls.approvalPolicy)}; calls that need a person: ${controls.whenNobody}${controls.classifier === "off" ? "; command classifier: off (an uncovered command always asks)" : ""}`,
  );
  const commands = controls.commands;
  out(
    commands.length === 0
      ? "Command allowlist: (empty)"
      : `Command allowlist (${commands.length}): ${commands.map((c) => `${quoteUntrusted(c.entry)}${c.from === "agent" ? " (agent-wide)" : ""}`).join(", ")}`,
  );
  const overrides = [
    ...Object.entries(controls.toolOverrides.caller).map(
      ([t, v]) => `${quoteUntrusted(t)}=${quoteUntrusted(v)}`,
    ),
    ...Object.entries(controls.toolOverrides.agent).map(
      ([t, v]) => `${quoteUntrusted(t)}=${quoteUntrusted(v)} (agent-wide)`,
    ),
  ];
  out(`Tool overrides: ${overrides.length === 0 ? "(none)" : overrides.join(", ")}`);
  const grants = [controls.urlGrants.caller, controls.urlGrants.agent];
  if (grants.every((g) => g === null)) {
    out("URL grants: (none; web_fetch follows the approval policy)");
  } else {
    const entries = grants.flatMap((g, i) =>
      g === null
        ? []
        : [...(g.hosts ?? []), ...(g.suffixes ?? []), ...(g.prefixes ?? [])].map(
            (e) => `${quoteUntrusted(e)}${i === 1 ? " (agent-wide)" : ""}`,
          ),
    );
    out(
      `URL grants: ${entries.length === 0 ? "(nothing granted)" : entries.join(", ")}; a fetch outside them asks`,
    );
  }
}
