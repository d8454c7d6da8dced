// What a segment hands the gate (src/gate/): the controls its run decides with, the declared
// command tools as the risk floor reads them, and one classifier call with its spend counted.
// Computed from the run, its caller and the policies of the moment; the gate decides, this only
// gathers.
import type { Caller, Run, RunControlsSnapshot } from "../db/schema.ts";
import { classifyCommand } from "../gate/command-classifier.ts";
import {
  buildRunControls,
  narrowSnapshot,
  type RunControls,
  snapshotControls,
  stricterPolicy,
} from "../gate/controls.ts";
import type { Classification, CommandToolShape } from "../gate/decide.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import { computeCostUsd, findModelPrice } from "./prices.ts";
import type { RunCore } from "./run-core.ts";

/** The controls a run decides with: the stricter of how it started and its caller now. */
export function runControlsFor(
  policies: LoadedPolicies,
  run: Run,
  started: RunControlsSnapshot,
  caller: Caller,
  set: EffectiveToolSet,
): RunControls {
  const agent = policies.agent;
  return buildRunControls({
    policy: stricterPolicy(run.approvalPolicy, caller.approvalPolicy),
    set,
    caller: narrowSnapshot(started, snapshotControls(caller)),
    kind: caller.kind,
    agent: {
      commands: agent.commands,
      toolOverrides: agent.toolOverrides,
      urlGrants: agent.urlGrants,
    },
  });
}

/**
 * A declared argument as the floor reads it: literal text as written, a workspace path as its
 * relative path, a secret as a placeholder (its value never reaches a record or the classifier).
 */
function describeFixedArg(
  arg:
    | string
    | { arg: string }
    | { secretArg: { env: string; prefix: string } }
    | { pathArg: string },
): string {
  if (typeof arg === "string") return arg;
  if ("arg" in arg) return arg.arg;
  if ("pathArg" in arg) return arg.pathArg;
  return `${arg.secretArg.prefix}<secret ${arg.secretArg.env}>`;
}

/** The declared command tools, as the risk floor needs them. */
export function commandToolShapes(policies: LoadedPolicies): ReadonlyMap<string, CommandToolShape> {
  const shapes = new Map<string, CommandToolShape>();
  for (const tool of policies.toolsPolicy.commands) {
    shapes.set(
      tool.name,
      tool.mode === "fixed"
        ? { mode: "fixed", program: tool.program, args: tool.args.map(describeFixedArg) }
        : { mode: tool.mode === "structured" ? "structured" : tool.mode },
    );
  }
  return shapes;
}

/** One classifier call: the command only, its spend added to the caller's day. */
export async function classifyWith(
  core: RunCore,
  command: string,
  signal: AbortSignal,
  spend: { tokens: number; costUsd: number },
): Promise<Classification> {
  const resolved = core.classifierModel;
  if (!resolved.ok) throw new Error("unreachable: no classifier model");
  const result = await classifyCommand({ model: resolved.model, command, signal });
  const inputTokens = result.usage.inputTokens ?? 0;
  const outputTokens = result.usage.outputTokens ?? 0;
  const price = findModelPrice(core.priceTable, resolved.id);
  const costUsd =
    price === undefined
      ? undefined
      : computeCostUsd(price, { input: inputTokens, output: outputTokens });
  spend.tokens += inputTokens + outputTokens;
  spend.costUsd += costUsd ?? 0;
  return { result, model: resolved.id, costUsd };
}
