// `peergate tools`' answer: the tool inventory the policy files make (policy/explain.ts), and each
// declared command tool's mode, contracts and declaration digest (no program resolved: nothing is
// run or read but the policies already loaded). No server, no database.
import { createHash } from "node:crypto";
import { canonicalJson } from "../json-text.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import { describeInventory, type ToolView } from "../policy/explain.ts";
import type { CommandToolPolicy } from "../policy/policy-files.ts";

export type DeclaredToolView = {
  name: string;
  mode: string;
  contract: string;
  declarationSha256: string;
};

export function describeTools(policies: Pick<LoadedPolicies, "inventory" | "toolsPolicy">): {
  inventoryVersion: string;
  tools: ToolView[];
  declared: DeclaredToolView[];
} {
  return {
    ...describeInventory(policies.inventory),
    declared: policies.toolsPolicy.commands.map((tool) => ({
      name: tool.name,
      ...describeDeclaration(tool),
    })),
  };
}

/** A declared tool's mode, contracts and declaration digest. */
function describeDeclaration(tool: CommandToolPolicy): Omit<DeclaredToolView, "name"> {
  const contract = tool.arguments ?? { mode: "optional" };
  const parts = [
    `arguments ${contract.mode}${contract.maxCount === undefined ? "" : ` ≤${contract.maxCount}`}`,
    `stdin ${tool.stdin ?? "none"}`,
    `rationale ${tool.rationale ?? (tool.mode === "fixed" ? "none" : "optional")}`,
    `result ${tool.result ?? "combined"}`,
    `nonzero ${tool.nonzero ?? "result"}`,
    `stream ${tool.stream ?? "finalized"}`,
  ];
  return {
    mode: tool.mode,
    contract: parts.join(", "),
    declarationSha256: createHash("sha256").update(canonicalJson(tool)).digest("hex"),
  };
}
