// Which calls run without an operator (DESIGN §5): under `auto` every call in the run's set; under
// a risk level, calls whose tool risk is at or below it. `unknown` risk (a shell, an undeclared
// tool) is above every level, so it parks under any policy but `auto`.

import type { ApprovalPolicy } from "../domain/caller.ts";
import { type Risk, rankRisk } from "../policy/tools.ts";

/** True when a call to a tool of this risk runs without asking under `policy`. */
export function isAutoApproved(policy: ApprovalPolicy, risk: Risk): boolean {
  if (policy === "auto") return true;
  if (risk === "unknown") return false;
  return rankRisk(risk) <= rankRisk(policy);
}
