// The stage gate of a declared command tool: a stage not covered by the caller's allowlist asks
// on its own, when the engine gates stages. Covered, approved before (by fingerprint) or approved
// now, it runs; otherwise the call parks there (when the engine can park) or the stage is refused.
// A stage the risk floor flags (a chain that runs code: `sh -c 'ls > f'`) is never covered by the
// allowlist: like an execute_command call with floor reasons, it asks an operator, and it asks
// before any stage of the call starts (gateFloor). What the operator, the audit and the allowlist
// see of a stage has its secrets masked.

import { canonicalJson } from "../../json-text.ts";
import type { CommandToolPolicy } from "../../policy/policy-files.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import { explainCoverage } from "../../shell/command-key.ts";
import { argvKey } from "../../shell/keys.ts";
import type { StageEvent, StageRequest, ToolCallContext } from "../types.ts";
import type { PlannedStage } from "./command-plan.ts";
import { DeclaredToolError } from "./command-prepare.ts";
import { sha256Hex } from "./declared-output.ts";

/** Thrown by the stage gate when the engine parks the call before an uncovered stage. */
export class StageParked extends Error {
  readonly request: StageRequest;
  constructor(request: StageRequest) {
    super("stage parked");
    this.request = request;
  }
}

export type StageGate = {
  /**
   * Lets the stage run, or throws StageParked or a DeclaredToolError. `floorReasons`: the risk
   * floor's reasons for the stage, which the allowlist does not cover.
   */
  gateStage(
    stage: PlannedStage,
    invocation: ToolCallContext,
    floorReasons?: readonly string[],
  ): Promise<void>;
  /**
   * Before any stage starts: a stage the floor flags asks for an operator (when the engine gates
   * stages; otherwise the call's own decision covers it). Throws StageParked or a refusal.
   */
  gateFloor(
    stage: PlannedStage,
    invocation: ToolCallContext,
    reasons: readonly string[],
  ): Promise<void>;
  stageEvent(
    invocation: ToolCallContext,
    stage: PlannedStage,
    event: StageEvent["event"],
    extra?: { reason?: string; status?: Record<string, unknown> },
  ): void;
};

export function createStageGate(tool: CommandToolPolicy, manifest: string): StageGate {
  const fingerprint = (stage: PlannedStage) =>
    sha256Hex(
      canonicalJson({
        manifest,
        executable: stage.resolved.path,
        sha256: stage.resolved.sha256,
        argv: stage.shown,
      }),
    );

  /** What the operator, the audit and the allowlist see of a stage: secrets masked. */
  const stageRequest = (stage: PlannedStage, reason: string): StageRequest => ({
    tool: tool.name,
    argv: [stage.name, ...stage.shown],
    executable: stage.resolved.path,
    executableSha256: stage.resolved.sha256,
    fingerprint: fingerprint(stage),
    reason,
  });

  const stageEvent = (
    invocation: ToolCallContext,
    stage: PlannedStage,
    event: StageEvent["event"],
    extra: { reason?: string; status?: Record<string, unknown> } = {},
  ) => {
    if (invocation.onStage === undefined) return;
    const request = stageRequest(stage, "");
    invocation.onStage({
      event,
      tool: tool.name,
      program: stage.name,
      arguments: stage.shown,
      executable: request.executable,
      executableSha256: request.executableSha256,
      fingerprint: request.fingerprint,
      ...extra,
    });
  };

  const gateFloor = async (
    stage: PlannedStage,
    invocation: ToolCallContext,
    reasons: readonly string[],
  ) => {
    if (invocation.commands === undefined) return;
    await ask(stage, invocation, `the risk floor: ${reasons.join("; ")}`);
  };

  const gateStage = async (
    stage: PlannedStage,
    invocation: ToolCallContext,
    floorReasons: readonly string[] = [],
  ) => {
    const gate = invocation.commands;
    if (gate === undefined) {
      stageEvent(invocation, stage, "allowed", {
        reason: "the call's own decision covers every stage",
      });
      return;
    }
    if (floorReasons.length > 0) {
      await ask(stage, invocation, `the risk floor: ${floorReasons.join("; ")}`);
      return;
    }
    const coverage = explainCoverage(argvKey([stage.name, ...stage.shown]), gate.entries);
    if (coverage.covered) {
      stageEvent(invocation, stage, "allowed", {
        reason: `covered by ${JSON.stringify(coverage.entry.text)}`,
      });
      return;
    }
    await ask(stage, invocation, coverage.reason);
  };

  /** Stages approved during one call (a flagged stage is asked once: before any stage starts). */
  const approvedInCall = new WeakMap<ToolCallContext, Set<string>>();

  /** Approved before (by fingerprint) or now; else the call parks there or the stage is refused. */
  const ask = async (stage: PlannedStage, invocation: ToolCallContext, reason: string) => {
    const gate = invocation.commands as NonNullable<ToolCallContext["commands"]>;
    const coverage = { reason };
    const request = stageRequest(stage, coverage.reason);
    const inCall = approvedInCall.get(invocation) ?? new Set<string>();
    approvedInCall.set(invocation, inCall);
    if (inCall.has(request.fingerprint)) {
      stageEvent(invocation, stage, "allowed", { reason: "approved (this stage only)" });
      return;
    }
    if (gate.approved?.includes(request.fingerprint) === true) {
      stageEvent(invocation, stage, "allowed", {
        reason: "approved by an operator (this stage only)",
      });
      return;
    }
    if (gate.approveStage !== undefined && (await gate.approveStage(request))) {
      inCall.add(request.fingerprint);
      stageEvent(invocation, stage, "allowed", { reason: "approved (this stage only)" });
      return;
    }
    if (gate.park === true) {
      stageEvent(invocation, stage, "parked", { reason: coverage.reason });
      throw new StageParked(request);
    }
    stageEvent(invocation, stage, "refused", { reason: `${coverage.reason}; not approved` });
    throw new DeclaredToolError(
      "stage-not-approved",
      `The stage ${quoteUntrusted(request.argv.join(" "), 200)} ${reason.startsWith("the risk floor") ? `needs an operator's approval (${coverage.reason})` : `is not covered by the caller's command allowlist (${coverage.reason})`} and was not approved; it did not run.`,
    );
  };

  return { gateStage, gateFloor, stageEvent };
}
