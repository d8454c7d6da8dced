// The admin's questions about what a caller can do: its ceiling, explained tool by tool, and the
// inventory it is computed from.

import { type CeilingReport, describeInventory, reportCeiling } from "../policy/explain.ts";
import { defaultNobodyThere } from "../policy/overrides.ts";
import { type AllowEntry, explainCoverage, parseAllowEntry } from "../shell/command-key.ts";
import { commandKey } from "../shell/keys.ts";
import type { ServiceContext } from "./context.ts";
import { findCallerRow } from "./find-caller.ts";

/** The precise controls beside the ceiling (DESIGN §10): what runs without asking. */
export type CallerControlsReport = {
  approvalPolicy: string;
  /** Command allowlist entries, the caller's and the agent-wide ones. */
  commands: { entry: string; from: "caller" | "agent" }[];
  toolOverrides: { caller: Record<string, string>; agent: Record<string, string> };
  urlGrants: {
    caller: { hosts?: string[]; suffixes?: string[]; prefixes?: string[] } | null;
    agent: { hosts?: string[]; suffixes?: string[]; prefixes?: string[] } | null;
  };
  whenNobody: "park" | "decline";
  classifier: "on" | "off";
};

/** Whether one command would run without asking by the allowlist, and why. */
export type CommandCoverageReport = {
  command: string;
  covered: boolean;
  key: string | null;
  entry?: string;
  from?: "caller" | "agent";
  reason: string;
};

export async function explainCallerCeiling({
  services,
  name,
  command,
}: {
  services: ServiceContext;
  name: string;
  /** Shell text to check against the command allowlists (`git status --short`). */
  command?: string | undefined;
}): Promise<
  CeilingReport & {
    revoked: boolean;
    version: number;
    controls: CallerControlsReport;
    command?: CommandCoverageReport;
  }
> {
  const caller = await findCallerRow(services.db, name);
  const { inventory, agent } = services.policies;
  const input = {
    name: caller.id,
    tier: caller.tier,
    allow: caller.allow,
    version: caller.version,
  };
  const report = reportCeiling(
    inventory,
    agent,
    input,
    services.ceilings.get(inventory, agent, input),
  );
  const commands = [
    ...(caller.commands ?? []).map((entry) => ({ entry, from: "caller" as const })),
    ...(agent.commands ?? []).map((entry) => ({ entry, from: "agent" as const })),
  ];
  const controls: CallerControlsReport = {
    approvalPolicy: caller.approvalPolicy,
    commands,
    toolOverrides: { caller: caller.toolOverrides ?? {}, agent: agent.toolOverrides ?? {} },
    urlGrants: { caller: caller.urlGrants ?? null, agent: agent.urlGrants ?? null },
    whenNobody: caller.whenNobody ?? defaultNobodyThere(caller.kind),
    classifier: caller.classifier ?? "on",
  };
  return {
    ...report,
    caller: { name: caller.name, tier: caller.tier, allow: caller.allow },
    revoked: caller.revokedAt !== null,
    version: caller.version,
    controls,
    ...(command === undefined ? {} : { command: explainCommand(command, commands) }),
  };
}

function explainCommand(
  command: string,
  commands: readonly { entry: string; from: "caller" | "agent" }[],
): CommandCoverageReport {
  const parsed: { entry: AllowEntry; from: "caller" | "agent" }[] = [];
  for (const { entry, from } of commands) {
    const result = parseAllowEntry(entry);
    if ("entry" in result) parsed.push({ entry: result.entry, from });
  }
  const key = commandKey(command.slice(0, 16_384));
  const coverage = explainCoverage(
    key,
    parsed.map((p) => p.entry),
  );
  if (coverage.covered) {
    const from = parsed.find((p) => p.entry === coverage.entry)?.from ?? "caller";
    return {
      command,
      covered: true,
      key: coverage.key.text,
      entry: coverage.entry.text,
      from,
      reason: `the key ${JSON.stringify(coverage.key.text)} is covered by the ${from === "caller" ? "caller's" : "agent-wide"} entry ${JSON.stringify(coverage.entry.text)}: it runs without asking under any policy (unless a deny or prompt override or a safety check says otherwise)`,
    };
  }
  return {
    command,
    covered: false,
    key: coverage.key?.text ?? null,
    reason: `${coverage.reason}: it follows the approval policy`,
  };
}

export function listTools({ services }: { services: ServiceContext }) {
  return describeInventory(services.policies.inventory);
}
