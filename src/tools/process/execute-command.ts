// execute_command, two-phase. Structured only: `{program, args[]}` becomes argv, never a shell
// string, so `; rm -rf /` or `$(id)` in an argument is one literal argv element. The proposal
// checks the denylist and shows the exact argv (and, when the program is a shell with `-c`, the
// risk floor's reasons); the hidden half checks again and runs it in the workspace, in its own
// process group, with a scrubbed environment, a timeout, and capped output.
import { z } from "zod";
import { createNoneBackend } from "../../sandbox/none.ts";
import type { Redactor } from "../../sandbox/redact.ts";
import { defaultSandboxLimits, type SandboxBackend } from "../../sandbox/types.ts";
import { checkCommandDenylist } from "../../shell/denylist.ts";
import { assessArgvRisk } from "../../shell/risk.ts";
import { defineBuiltin, requireHalf } from "../builtin.ts";
import { decodeOutput, type ProcessResult, runProcess } from "../run-process.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ApprovalRequest, ToolFailure, ToolImplementation, ToolSuccess } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const executeCommandTool = defineBuiltin(
  {
    name: "execute_command",
    category: "shell",
    risk: "unknown",
    disclosure: "private",
    // A shell can reach the network (curl, git push): the honest answer is yes.
    egress: true,
    twoPhase: true,
    // The gate reads the argv this call would run: the floor, the allowlist and the classifier.
    reads: { argv: readCommandArgv },
    description:
      "Run a program with arguments in the workspace (no shell: args are passed literally). Shows the command for approval first. Returns exit code, stdout and stderr (each cut at 256 KiB).",
  },
  ({ workspace, env, options, sandbox, redactor }, d) =>
    createExecuteCommandTool({
      workspace,
      executeHalfName: requireHalf(d),
      env,
      egress: d.egress,
      sandbox: sandbox ?? createNoneBackend(),
      ...(redactor === undefined ? {} : { redactor }),
      ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
    }),
);

/** `[program, ...args]` of a call, or undefined when it names no program. */
function readCommandArgv(args: unknown): string[] | undefined {
  const input = (typeof args === "object" && args !== null ? args : {}) as Record<string, unknown>;
  if (typeof input.program !== "string") return undefined;
  const rest = Array.isArray(input.args)
    ? input.args.filter((x): x is string => typeof x === "string")
    : [];
  return [input.program, ...rest];
}

export const commandLimits = {
  maxArgs: 256,
  maxArgChars: 32 * 1024,
  maxTotalArgChars: 128 * 1024,
  defaultTimeoutMs: 120_000,
  maxTimeoutMs: 600_000,
  maxOutputBytes: 256 * 1024,
};

const noNul = (s: string) => !s.includes("\0");

const argvFields = {
  program: z
    .string()
    .min(1)
    .max(4096)
    .refine(noNul, { error: "no NUL characters" })
    .describe("The program to run: a name on PATH or a path. Not a shell command line."),
  args: z
    .array(z.string().max(commandLimits.maxArgChars).refine(noNul, { error: "no NUL characters" }))
    .max(commandLimits.maxArgs)
    .default([])
    .describe("Arguments, each passed literally as one argv element (no shell parsing)."),
  cwd: z
    .string()
    .min(1)
    .max(4096)
    .optional()
    .describe("Directory to run in, relative to the workspace (default: the workspace)."),
  timeoutMs: z
    .number()
    .int()
    .min(1000)
    .max(commandLimits.maxTimeoutMs)
    .optional()
    .describe(
      `Kill the command after this many milliseconds (default ${commandLimits.defaultTimeoutMs}).`,
    ),
};

const inputSchema = z.strictObject(argvFields);
const executeSchema = z.strictObject({ ...argvFields, cwd: z.string().min(1).max(4096) });

/** argv as an operator reads it: plain words bare, anything else JSON-quoted and escaped. */
export function formatArgv(argv: readonly string[]): string {
  return argv.map((arg) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(arg) ? arg : quotePath(arg))).join(" ");
}

function checkArgvSize(args: readonly string[]): void {
  const total = args.reduce((sum, a) => sum + a.length, 0);
  if (total > commandLimits.maxTotalArgChars) {
    throw new ToolCallError(
      "too-large",
      `The arguments total ${total} characters; at most ${commandLimits.maxTotalArgChars}.`,
    );
  }
}

function checkDenylist(program: string, args: readonly string[]): void {
  const verdict = checkCommandDenylist(program, args);
  if (verdict.denied) {
    throw new ToolCallError(
      "refused",
      `This command is not allowed: ${verdict.reason}. Nothing was run; do not retry it in another form.`,
    );
  }
}

/** The risk floor's reasons for the argv (every script it runs, code it cannot read), if any. */
function describeShellRisk(program: string, args: readonly string[]): string {
  const floor = assessArgvRisk([program, ...args], "unknown");
  return floor.reasons.length > 0 ? ` The command is high-risk: ${floor.reasons.join("; ")}.` : "";
}

/** Turns a finished process into the result the model sees (shared with declared command tools). */
export function describeProcessResult(
  result: ProcessResult,
  program: string,
  timeoutMs: number,
): ToolSuccess | ToolFailure {
  if (result.spawnError !== undefined) {
    const code = result.spawnError.code;
    if (code === "ENOENT") {
      return {
        ok: false,
        code: "not-found",
        error: `The program ${quotePath(program)} was not found.`,
      };
    }
    if (code === "EACCES" || code === "EPERM") {
      return {
        ok: false,
        code: "refused",
        error: `The program ${quotePath(program)} is not executable.`,
      };
    }
    return {
      ok: false,
      code: "failed",
      error: `The program ${quotePath(program)} could not be started (${code ?? "error"}).`,
    };
  }
  const stdout = decodeOutput(result.stdout, result.stdoutBytes);
  const stderr = decodeOutput(result.stderr, result.stderrBytes);
  const truncated = result.stdoutTruncated || result.stderrTruncated;
  if (result.stoppedBy !== undefined) {
    const how = result.forceKilled ? "SIGTERM, then SIGKILL" : "SIGTERM";
    const tail = (text: string) => (text.length > 2000 ? `…${text.slice(-2000)}` : text);
    const output = `\nstdout (end): ${tail(stdout)}\nstderr (end): ${tail(stderr)}`;
    return result.stoppedBy === "timeout"
      ? {
          ok: false,
          code: "timeout",
          error: `The command ran longer than ${timeoutMs} ms and was killed (${how}).${output}`,
          truncated,
        }
      : {
          ok: false,
          code: "interrupted",
          error: `The command was stopped (${how}); it may have made part of its changes.${output}`,
          truncated,
        };
  }
  return {
    ok: true,
    content: {
      exitCode: result.exitCode,
      signal: result.signal,
      stdout,
      stderr,
      stdoutTruncated: result.stdoutTruncated,
      stderrTruncated: result.stderrTruncated,
      durationMs: result.durationMs,
    },
    truncated,
  };
}

export function createExecuteCommandTool(options: {
  readonly workspace: Workspace;
  readonly executeHalfName: string;
  /** Already scrubbed of secrets (scrubEnvironment). */
  readonly env: Record<string, string>;
  readonly killGraceMs?: number;
  readonly sandbox: SandboxBackend;
  /** As the inventory declares it: false runs the command without a network. */
  readonly egress: boolean;
  readonly redactor?: Redactor;
}): ToolImplementation {
  const { workspace, executeHalfName, env } = options;

  const resolveCwd = async (given: string | undefined) => {
    const cwd = await workspace.resolveExisting(given ?? ".");
    if (!cwd.stats.isDirectory()) {
      throw new ToolCallError(
        "invalid-input",
        `The working directory ${quotePath(cwd.given)} is not a directory.`,
      );
    }
    return cwd;
  };

  return {
    name: "execute_command",
    description: executeCommandTool.descriptor.description,
    inputSchema,
    // Also the bound the engine may apply to the hidden half, which runs the command.
    timeoutMs: commandLimits.maxTimeoutMs + 15_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async (): Promise<ApprovalRequest> => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        checkArgvSize(input.args);
        checkDenylist(input.program, input.args);
        const cwd = await resolveCwd(input.cwd);
        const timeoutMs = input.timeoutMs ?? commandLimits.defaultTimeoutMs;
        const floor = describeShellRisk(input.program, input.args);
        return {
          kind: "approval-request",
          executeToolName: executeHalfName,
          executeArgs: { program: input.program, args: input.args, cwd: cwd.relative, timeoutMs },
          summary: `Run ${formatArgv([input.program, ...input.args])} in ${quotePath(cwd.relative)} (timeout ${timeoutMs} ms).${floor}`,
        };
      }),
    executeHalf: {
      name: executeHalfName,
      inputSchema: executeSchema,
      timeoutMs: commandLimits.maxTimeoutMs + 15_000,
      execute: (args, invocation) =>
        runGuarded(invocation, async () => {
          checkCallWorkspace(invocation.workspace, workspace);
          const input = executeSchema.parse(args);
          checkArgvSize(input.args);
          checkDenylist(input.program, input.args);
          const cwd = await resolveCwd(input.cwd);
          const timeoutMs = input.timeoutMs ?? commandLimits.defaultTimeoutMs;
          const result = await runProcess({
            program: input.program,
            args: input.args,
            cwd: cwd.absolute,
            env,
            timeoutMs,
            signal: invocation.signal,
            maxOutputBytes: commandLimits.maxOutputBytes,
            ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
            sandbox: {
              backend: options.sandbox,
              workspace: workspace.root,
              egress: options.egress,
              limits: defaultSandboxLimits,
              ...(options.redactor === undefined ? {} : { redactor: options.redactor }),
            },
          });
          return describeProcessResult(result, input.program, timeoutMs);
        }),
    },
  };
}
