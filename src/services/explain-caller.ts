// The admin's questions about what a caller can do: its ceiling, explained tool by tool, and the
// inventory it is computed from.
import { type CeilingReport, describeInventory, reportCeiling } from "../policy/explain.ts";
import type { ServiceContext } from "./context.ts";
import { findCallerRow } from "./find-caller.ts";

export async function explainCallerCeiling({
  ctx,
  name,
}: {
  ctx: ServiceContext;
  name: string;
}): Promise<CeilingReport & { revoked: boolean; version: number }> {
  const caller = await findCallerRow(ctx.db, name);
  const { inventory, agent } = ctx.policies;
  const input = {
    name: caller.id,
    tier: caller.tier,
    allow: caller.allow,
    version: caller.version,
  };
  const report = reportCeiling(inventory, agent, input, ctx.ceilings.get(inventory, agent, input));
  return {
    ...report,
    caller: { name: caller.name, tier: caller.tier, allow: caller.allow },
    revoked: caller.revokedAt !== null,
    version: caller.version,
  };
}

export function listTools({ ctx }: { ctx: ServiceContext }) {
  return describeInventory(ctx.policies.inventory);
}
