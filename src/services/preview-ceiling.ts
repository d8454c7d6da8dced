// The what-if ceiling: what a caller could do with a tier and allow list it does not (yet) have.
// Nothing is stored; the answer is computed like the real ceiling (src/policy/explain.ts), so the
// preview and the ceiling after the change agree.
import { z } from "zod";
import { tiers } from "../db/schema.ts";
import { type CeilingReport, reportCeiling } from "../policy/explain.ts";
import { toolNamePattern } from "../policy/tools.ts";
import { parseInput } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";

export const previewCeilingSchema = z.strictObject({
  tier: z.enum(tiers, { error: `one of ${tiers.join(", ")}` }),
  allow: z
    .array(z.string().regex(toolNamePattern, { error: "tool names match ^[A-Za-z0-9_.-]{1,128}$" }))
    .max(10_000)
    .default([]),
});

export function previewCeiling({
  services,
  input,
}: {
  services: ServiceContext;
  input: unknown;
}): CeilingReport {
  const { tier, allow } = parseInput(previewCeilingSchema, input);
  const { inventory, agent } = services.policies;
  // Version 0 is never a stored caller's, and nothing is cached: reportCeiling computes afresh.
  return reportCeiling(inventory, agent, { name: "what-if", tier, allow, version: 0 });
}
