// Planning one call: the checks every call passes before anything is decided, in this order —
// the run's effective set (checkToolCall: a name outside it, a hidden execute half and a name
// nothing implements all get the same words and run nothing), a deny override (the same words),
// the tool's own schema — then the decision (src/gate/decide.ts) and the row the call opens with.
import type { z } from "zod";
import type { ToolCallDecisionRecord } from "../db/schema.ts";
import { checkToolCall } from "../policy/check-tool-call.ts";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import { digestArgs } from "./args-digest.ts";
import { decideToolCall, isDenied } from "./decide.ts";
import { errorResult } from "./results.ts";
import type { BatchDeps, CallPlan, ModelToolCall, OpenedCall, Planned } from "./types.ts";

const emptySet: EffectiveToolSet = { offered: [], names: new Map() };

/** The words for a tool the run cannot use, identical to a name that exists nowhere. */
export function unavailableMessage(name: string): string {
  const check = checkToolCall(emptySet, name, "model");
  return check.allowed ? "" : check.message;
}

/** Checks and decides one call; pushes the row it opens with onto `rows`. */
export async function planCall(
  deps: BatchDeps,
  call: ModelToolCall,
  index: number,
  recordId: string,
  rows: OpenedCall[],
): Promise<Planned> {
  const controls = deps.controls.current;
  const ref = { toolCallId: call.toolCallId, toolName: call.toolName };
  const argsDigest = digestArgs(call.input);
  const refuse = (code: string, message: string): Planned => {
    rows.push({
      recordId,
      tool: String(call.toolName).slice(0, 128),
      argsDigest,
      status: "refused",
      code,
    });
    return { kind: "done", index, part: errorResult(ref, message) };
  };

  const check = checkToolCall(controls.set, call.toolName, "model");
  if (!check.allowed) return refuse(check.code, check.message);
  const tool = check.tool;
  // A deny override: to the model, exactly a tool that does not exist.
  if (isDenied(controls, tool.name))
    return refuse("tool-unavailable", unavailableMessage(call.toolName));
  const impl = deps.tools.get(tool.name);
  // In the set but not implemented in this process: to the model, it does not exist.
  if (impl === undefined) return refuse("not-implemented", unavailableMessage(call.toolName));

  const fail = (message: string): Planned => {
    rows.push({ recordId, tool: tool.name, argsDigest, status: "failed", code: "invalid-input" });
    return { kind: "done", index, part: errorResult(ref, message) };
  };
  if (call.unparsable) {
    return fail(`The arguments for ${tool.name} are not valid JSON; nothing was run.`);
  }
  const parsed = impl.inputSchema.safeParse(call.input);
  if (!parsed.success) {
    return fail(
      `Invalid arguments for ${tool.name}: ${describeIssues(parsed.error)}. Nothing was run.`,
    );
  }

  const twoPhase = tool.executeHalf !== undefined && impl.executeHalf !== undefined;
  const decided = await decideToolCall({ ...deps.decide, controls }, tool, parsed.data);
  const decision = decided.record;
  const plan: CallPlan = { index, call, recordId, tool, impl, args: parsed.data, decided };
  const resolved = decided.resolved;
  const mode = deps.decide?.commandTools?.get(tool.name)?.mode;
  if (
    (mode === "chain" || mode === "script") &&
    decided.record.rule === "policy-parks" &&
    (resolved.action === "park" || resolved.action === "decline")
  ) {
    // Per stage, not per call: covered stages run, each other one asks when it is reached.
    const record: ToolCallDecisionRecord = {
      ...decision,
      action: "run",
      rule: "stages",
      reason:
        `each stage outside the command allowlist asks on its own (${resolved.action === "park" ? "parks" : "declined: nobody there"}): ${resolved.reason}`.slice(
          0,
          2_000,
        ),
    };
    rows.push({ recordId, tool: tool.name, argsDigest, status: "not-started", decision: record });
    return {
      ...plan,
      decided: { ...decided, record },
      stages: { park: resolved.action === "park" },
      kind: "run",
    };
  }
  if (resolved.action === "refuse") {
    rows.push({
      recordId,
      tool: tool.name,
      argsDigest,
      status: "refused",
      code: "tool-unavailable",
      decision,
    });
    return { kind: "done", index, part: errorResult(ref, unavailableMessage(call.toolName)) };
  }
  if (resolved.action === "decline") {
    rows.push({
      recordId,
      tool: tool.name,
      argsDigest,
      status: "declined",
      code: resolved.rule,
      decision,
    });
    deps.emit({ type: "tool-call", callId: recordId, tool: tool.name, state: "failed" });
    return { kind: "done", index, part: errorResult(ref, resolved.modelMessage) };
  }
  if (!twoPhase && resolved.action === "park") {
    rows.push({ recordId, tool: tool.name, argsDigest, status: "parked", decision });
    return { ...plan, kind: "approve" };
  }
  rows.push({ recordId, tool: tool.name, argsDigest, status: "not-started", decision });
  return { ...plan, kind: twoPhase ? "propose" : "run" };
}

function describeIssues(error: z.ZodError): string {
  const text = error.issues
    .slice(0, 5)
    .map((issue) => {
      const at = issue.path.length > 0 ? issue.path.map(String).join(".") : "(arguments)";
      return `${quoteUntrusted(at, 64)}: ${issue.message}`;
    })
    .join("; ");
  return text.length > 1_000 ? `${text.slice(0, 1_000)}…` : text;
}
