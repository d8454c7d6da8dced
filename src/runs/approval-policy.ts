// Which calls run without an operator (DESIGN §5): under `auto` every call in the run's set; under
// a risk level, calls whose tool risk is at or below it. `unknown` risk (a shell, an undeclared
// tool) is above every level, so it parks under any policy but `auto`.

import type { ApprovalPolicy } from "../db/schema.ts";
import type { Risk } from "../policy/tools.ts";

const rank: Readonly<Record<Risk, number>> = {
  "read-only": 0,
  "low-risk": 1,
  "high-risk": 2,
  unknown: 3,
};

/** True when a call to a tool of this risk runs without asking under `policy`. */
export function isAutoApproved(policy: ApprovalPolicy, risk: Risk): boolean {
  if (policy === "auto") return true;
  if (risk === "unknown") return false;
  return rank[risk] <= rank[policy];
}
