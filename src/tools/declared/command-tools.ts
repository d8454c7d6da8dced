// Declared command tools from tools.yaml (docs/declared-tools.md), four modes and no shell:
// `fixed` (program and leading arguments fixed; the model's arguments appended as literal argv),
// `structured` (the model names one declared program and its argv), `chain` (plain words joined by
// | ; && ||, read by the bash parser, every stage resolved, checked and gated on its own) and
// `script` (a script file hashed at load and re-verified before every start).
//
// This file is one call's path: the manifest check, the denylist and pin checks of every stage
// before anything starts, the stage gate, the pipelines in chain order, and the result. Loading
// and the manifest digest are in command-prepare.ts, the model's input schema in command-input.ts,
// each mode's stages in command-plan.ts, the stage gate in command-stage-gate.ts and the result's
// shape in command-result.ts. The digest travels in the call's arguments, so an approval names it,
// and a call whose digest is not the running manifest's is refused. A `sha256` pin is checked at
// start and before every call; a script or pinned program runs from the copy hashed at load
// (verified-files.ts), so the digest names the bytes that run. One found changed is refused, and
// the refusal audited as a refused stage, until a policy reload builds the tools again.
import { z } from "zod";
import { quoteUntrusted } from "../../policy/quote.ts";
import { SandboxUnavailableError } from "../../sandbox/pids-cgroup.ts";
import { createRedactor } from "../../sandbox/redact.ts";
import { resolveSandboxLimits } from "../../sandbox/types.ts";
import { checkCommandDenylist } from "../../shell/denylist.ts";
import { programName } from "../../shell/programs.ts";
import { assessArgvRisk, findArgvCodeRun } from "../../shell/risk.ts";
import { scrubEnvironment } from "../scrub-environment.ts";
import {
  type StageCheckpoint,
  type StageParking,
  stageApprovalCode,
  type ToolCallContext,
  type ToolFailure,
  type ToolImplementation,
  type ToolSuccess,
} from "../types.ts";
import { checkCallWorkspace } from "../workspace.ts";
import { ChainSyntaxError } from "./chain.ts";
import { buildInputSchema, type CallInput } from "./command-input.ts";
import {
  ChangedFileError,
  type ChangeLog,
  createCommandPlanner,
  type PlannedStage,
} from "./command-plan.ts";
import {
  type CreateCommandToolsOptions,
  commandToolLimits,
  DeclaredToolError,
  type Prepared,
  prepareCommandTools,
} from "./command-prepare.ts";
import {
  exitOf,
  readCheckpoint,
  recordOf,
  type StageRecord,
  shapeResult,
  statusOf,
} from "./command-result.ts";
import { createStageGate, StageParked } from "./command-stage-gate.ts";
import { chainRedactors, createProgressStream, stripTerminal } from "./declared-output.ts";
import { describeDeclaredTool } from "./describe.ts";
import { type PipelineResult, runPipeline, type StageStatus } from "./pipeline.ts";
import { launchVerified } from "./verified-files.ts";

export {
  type CreateCommandToolsOptions,
  commandToolLimits,
  DeclaredToolError,
  hashExecutable,
  resolveExecutable,
} from "./command-prepare.ts";

/**
 * Resolves and verifies every declared command tool and returns their implementations. Throws
 * ConfigError naming the tool, the field, the value and the fix for each one that cannot run.
 */
export async function createCommandTools(
  options: CreateCommandToolsOptions,
): Promise<ToolImplementation[]> {
  const prepared = await prepareCommandTools(options);
  // Shared by this runtime's tools: a program two tools pin is refused by both once changed.
  const changes: ChangeLog = new Map();
  return prepared.map((p) => buildCommandTool(p, options, changes));
}

function buildCommandTool(
  prepared: Prepared,
  options: CreateCommandToolsOptions,
  changes: ChangeLog,
): ToolImplementation {
  const { tool, manifest } = prepared;
  const timeoutMs = tool.timeoutMs ?? commandToolLimits.defaultTimeoutMs;
  const maxOutputBytes = tool.maxOutputBytes ?? commandToolLimits.maxOutputBytes;
  const env =
    tool.envAllowlist === undefined || options.parentEnv === undefined
      ? options.env
      : scrubEnvironment(options.parentEnv, [
          ...(options.envAllowlist ?? []),
          ...tool.envAllowlist,
        ]);
  const limits = resolveSandboxLimits(tool.limits);
  const redactor = chainRedactors([options.redactor, createRedactor(prepared.secrets)]);
  const inputSchema = buildInputSchema(tool, manifest);
  const optionsAllowed =
    tool.allowOptions === true ||
    prepared.args.some((a) => a.kind === "literal" && a.value === "--") ||
    tool.mode === "chain";
  const { plan, verify, verifyScript } = createCommandPlanner(
    prepared,
    options,
    optionsAllowed,
    changes,
  );
  const { gateStage, gateFloor, stageEvent } = createStageGate(tool, manifest);
  const runsCode = tool.mode === "chain" && tool.runsCode === true;
  const verifiedPaths = [
    ...(prepared.script === undefined ? [] : [prepared.script.path]),
    ...[...prepared.programs.values()].filter((p) => p.staged !== undefined).map((p) => p.path),
  ];
  /** Runs a check; a changed file's refusal is audited as a refused stage before it is thrown. */
  const audited = async (
    invocation: ToolCallContext,
    stage: PlannedStage,
    check: () => Promise<void>,
  ) => {
    try {
      await check();
    } catch (error) {
      if (error instanceof ChangedFileError) {
        stageEvent(invocation, stage, "refused", { reason: error.message });
      }
      throw error;
    }
  };

  /**
   * A chain stage is a command like execute_command's: the floor reads it as the model wrote it
   * and as it resolves (`sh` → /usr/bin/dash). A chain that does not declare `runsCode: true`
   * runs no code at all: a stage that would (`find -exec sh`, `git -c core.pager=…`) is refused.
   */
  const floorStage = (stage: PlannedStage): string[] => {
    if (tool.mode !== "chain") return [];
    const rest = stage.argv.slice(1);
    const forms = [
      [stage.name, ...rest],
      [programName(stage.resolved.path), ...rest],
    ];
    if (!runsCode) {
      const code = forms.map((argv) => findArgvCodeRun(argv)).find((c) => c !== undefined);
      if (code !== undefined) {
        throw new DeclaredToolError(
          "refused",
          `The stage ${quoteUntrusted([stage.name, ...stage.shown].join(" "), 200)} runs code (${code}), and ${tool.name} is declared without runsCode: true, so it runs plain programs only. Nothing was run.`,
        );
      }
    }
    return [...new Set(forms.flatMap((argv) => assessArgvRisk(argv, "read-only").reasons))];
  };

  const run = async (
    input: CallInput,
    invocation: ToolCallContext,
  ): Promise<ToolSuccess | ToolFailure> => {
    checkCallWorkspace(invocation.workspace, options.workspace);
    if (input.manifest !== manifest) {
      throw new DeclaredToolError(
        "manifest-changed",
        `This call was made (or approved) for another declaration of ${tool.name} (manifest ${input.manifest.slice(0, 12)}, now ${manifest.slice(0, 12)}); nothing was run.`,
      );
    }
    const items = await plan(input);
    // Every stage, taken or not, is checked before anything starts: these checks ask nobody.
    const floors = new Map<PlannedStage, string[]>();
    for (const item of items) {
      for (const stage of item.stages) {
        for (const argv of [stage.argv, [stage.name, ...stage.argv.slice(1)]]) {
          const verdict = checkCommandDenylist(argv[0] as string, argv.slice(1));
          if (verdict.denied) {
            throw new DeclaredToolError(
              "refused",
              `This command is not allowed: ${verdict.reason}. Nothing was run.`,
            );
          }
        }
        const reasons = floorStage(stage);
        if (reasons.length > 0) floors.set(stage, reasons);
        await audited(invocation, stage, () => verify(stage));
      }
    }
    const stdin = input.stdin === undefined ? undefined : Buffer.from(input.stdin, "utf8");
    const progress =
      tool.stream === "sanitized" && invocation.progress !== undefined
        ? createProgressStream(
            invocation.progress,
            redactor,
            commandToolLimits.maxProgressBytes,
            256,
          )
        : undefined;
    const deadline = Date.now() + timeoutMs;
    const resume = invocation.commands?.resume;
    const saved = resume === undefined ? undefined : readCheckpoint(resume, items.length);
    const records: StageRecord[] = saved?.records ?? [];
    const stdout: Buffer[] = saved === undefined ? [] : [Buffer.from(saved.stdout, "utf8")];
    const stderr: Buffer[] = saved === undefined ? [] : [Buffer.from(saved.stderr, "utf8")];
    let stdoutTotal = saved?.stdoutTotal ?? 0;
    let stderrTotal = saved?.stderrTotal ?? 0;
    let status = saved?.status ?? 0;
    let stoppedBy: PipelineResult["stoppedBy"];
    let failure: DeclaredToolError | undefined;
    let lastStatuses: StageStatus[] = saved?.lastStatuses ?? [];
    const parkAt = (error: StageParked, index: number): StageParking => ({
      ok: false,
      code: stageApprovalCode,
      error: `The stage ${quoteUntrusted(error.request.argv.join(" "), 200)} waits for an operator's approval.`,
      stage: error.request,
      checkpoint: checkpoint(index),
    });
    const checkpoint = (item: number): StageCheckpoint => {
      // Filtered and redacted before it is stored: the approval row never holds a secret.
      const keep = (chunks: Buffer[]) =>
        redactor.redact(
          stripTerminal(Buffer.concat(chunks).subarray(0, maxOutputBytes).toString("utf8")),
        );
      return {
        item,
        state: {
          records: [...records],
          stdout: keep(stdout),
          stderr: keep(stderr),
          stdoutTotal,
          stderrTotal,
          status,
          lastStatuses,
        },
      };
    };
    // A stage the floor flags asks before any stage of the call starts, taken branch or not.
    try {
      for (const [stage, reasons] of floors) await gateFloor(stage, invocation, reasons);
    } catch (error) {
      if (!(error instanceof StageParked)) throw error;
      progress?.end();
      return parkAt(error, saved?.item ?? 0);
    }
    for (const [index, item] of items.entries()) {
      if (saved !== undefined && index < saved.item) continue;
      const taken =
        item.op === undefined ||
        item.op === ";" ||
        (item.op === "&&" ? status === 0 : status !== 0);
      if (!taken || stoppedBy !== undefined || failure !== undefined) {
        for (const stage of item.stages) {
          records.push({ ...recordOf(stage), status: { skipped: true } });
        }
        continue;
      }
      try {
        for (const stage of item.stages) await gateStage(stage, invocation, floors.get(stage));
        const first = item.stages[0];
        if (tool.mode === "script" && first !== undefined)
          await audited(invocation, first, verifyScript);
        for (const stage of item.stages) await audited(invocation, stage, () => verify(stage));
      } catch (error) {
        if (error instanceof StageParked) {
          progress?.end();
          return parkAt(error, index);
        }
        if (!(error instanceof DeclaredToolError)) throw error;
        failure = error;
        for (const stage of item.stages)
          records.push({ ...recordOf(stage), status: { skipped: true } });
        continue;
      }
      for (const stage of item.stages) stageEvent(invocation, stage, "started");
      const started = launchVerified(item.stages, options.sandbox);
      const result = await runPipeline({
        stages: started.argvs,
        stdin: index === 0 ? stdin : undefined,
        cwd: options.workspace.root,
        workspace: options.workspace.root,
        env,
        egress: tool.egress === true,
        limits,
        readOnlyPaths: [
          ...new Set(
            item.stages.map((s) => s.argv[0]).concat(prepared.script ? [prepared.script.path] : []),
          ),
        ].filter((p) => !started.verified.has(p)),
        backend: started.backend,
        timeoutMs: Math.max(1, deadline - Date.now()),
        signal: invocation.signal,
        maxOutputBytes,
        ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
        ...(progress === undefined ? {} : { onOutput: (chunk: Buffer) => progress.write(chunk) }),
      });
      stdout.push(result.stdout);
      stderr.push(result.stderr);
      stdoutTotal += result.stdoutBytes;
      stderrTotal += result.stderrBytes;
      stoppedBy = result.stoppedBy;
      lastStatuses = [...result.stages];
      for (const [i, stage] of item.stages.entries()) {
        const stageStatus = statusOf(result.stages[i] as StageStatus);
        records.push({ ...recordOf(stage), status: stageStatus });
        stageEvent(invocation, stage, "exited", { status: stageStatus });
      }
      const exits = result.stages.map(exitOf);
      status =
        tool.mode === "chain" && tool.pipefail === true
          ? ([...exits].reverse().find((e) => e !== 0) ?? 0)
          : (exits[exits.length - 1] ?? 0);
    }
    progress?.end();
    return shapeResult(
      {
        stdout,
        stderr,
        stdoutTotal,
        stderrTotal,
        status,
        stoppedBy,
        failure,
        records,
        lastStatuses,
      },
      { tool, manifest, timeoutMs, maxOutputBytes, redactor, backend: options.sandbox.kind },
    );
  };

  return {
    name: tool.name,
    description: describeDeclaredTool(tool, optionsAllowed),
    changedSinceLoad: () => verifiedPaths.some((p) => changes.has(p)),
    inputSchema,
    timeoutMs: timeoutMs + 10_000,
    execute: async (args, invocation) => {
      try {
        if (invocation.signal.aborted)
          return { ok: false, code: "interrupted", error: "The call was stopped." };
        const input = inputSchema.parse(args) as CallInput;
        if (input.rationale !== undefined) input.rationale = stripTerminal(input.rationale);
        return await run(input, invocation);
      } catch (error) {
        if (error instanceof DeclaredToolError)
          return { ok: false, code: error.code, error: error.message };
        if (error instanceof ChainSyntaxError) {
          return {
            ok: false,
            code: "chain-syntax",
            error: error.message,
            construct: error.construct,
          } as ToolFailure;
        }
        if (error instanceof z.ZodError) {
          return {
            ok: false,
            code: "invalid-input",
            error: `Invalid arguments for ${tool.name}. Nothing was run.`,
          };
        }
        if (error instanceof Error && error.name === "ToolCallError") {
          return {
            ok: false,
            code: (error as Error & { code: string }).code,
            error: error.message,
          };
        }
        if (error instanceof SandboxUnavailableError) {
          return { ok: false, code: "refused", error: error.message };
        }
        if (invocation.signal.aborted)
          return { ok: false, code: "interrupted", error: "The call was stopped." };
        return { ok: false, code: "failed", error: "The tool failed unexpectedly." };
      }
    },
  };
}
