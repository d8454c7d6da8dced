// Declared command tools from tools.yaml (the reference's `fixed` and `structured` shell tools,
// without a shell). `fixed`: the program and its leading arguments are the operator's; the
// model's arguments are appended as literal argv elements, counted and size-bounded.
// `structured`: the model picks one program from the declared list and gives its argv. Programs
// are resolved to absolute paths once, at start, through the PATH of the environment peergate
// was given (relative PATH entries are skipped: `.` on PATH is how a workspace file would
// hijack a name). A `sha256` pin is checked at start (a mismatch stops start-up) and again
// before every call (a mismatch refuses the call). Output is capped at 16 KiB per stream.
import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { access, stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { ConfigError, type Problem } from "../../errors.ts";
import type { CommandToolPolicy } from "../../policy/policy-files.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import type { Redactor } from "../../sandbox/redact.ts";
import { resolveSandboxLimits, type SandboxBackend } from "../../sandbox/types.ts";
import { describeProcessResult } from "../process/execute-command.ts";
import { runProcess } from "../run-process.ts";
import { scrubEnvironment } from "../scrub-environment.ts";
import { checkCommandDenylist } from "../shell/command-denylist.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";

export const commandToolLimits = {
  maxArguments: 32,
  maxArgumentBytes: 4096,
  maxOutputBytes: 16 * 1024,
  defaultTimeoutMs: 60_000,
};

async function isExecutableFile(file: string): Promise<boolean> {
  try {
    const stats = await stat(file);
    if (!stats.isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** An absolute path for `program`, or a sentence saying why there is none. */
export async function resolveExecutable(
  program: string,
  pathVariable: string | undefined,
): Promise<{ path: string } | { problem: string }> {
  if (path.isAbsolute(program)) {
    return (await isExecutableFile(program))
      ? { path: program }
      : { problem: `${program} is not an executable file` };
  }
  if (program.includes("/")) {
    return { problem: `${program} is a relative path; give a name on PATH or an absolute path` };
  }
  for (const dir of (pathVariable ?? "").split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, program);
    if (await isExecutableFile(candidate)) return { path: candidate };
  }
  return { problem: `${program} was not found on PATH` };
}

export async function hashExecutable(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

const argumentItem = z
  .string()
  .refine((s) => Buffer.byteLength(s) <= commandToolLimits.maxArgumentBytes && !s.includes("\0"), {
    error: `an argument of at most ${commandToolLimits.maxArgumentBytes} bytes, without NUL`,
  });
const argumentsField = z
  .array(argumentItem)
  .max(commandToolLimits.maxArguments)
  .default([])
  .describe("Arguments, each passed literally as one argv element (no shell parsing).");

type Prepared = { tool: CommandToolPolicy; programs: Map<string, string> };

/**
 * Resolves and verifies every declared command tool and returns their implementations. Throws
 * ConfigError listing every program that cannot be found or whose pinned hash differs.
 */
export async function createCommandTools(options: {
  readonly commands: readonly CommandToolPolicy[];
  readonly workspace: Workspace;
  /** Already scrubbed of secrets. */
  readonly env: Record<string, string>;
  /** PATH to resolve programs with (the parent environment's). */
  readonly pathVariable: string | undefined;
  readonly killGraceMs?: number;
  /** The parent environment, for the names a tool's own envAllowlist adds. */
  readonly parentEnv?: Readonly<Record<string, string | undefined>>;
  /** The agent-wide envAllowlist (a tool's own list is added to it). */
  readonly envAllowlist?: readonly string[];
  readonly sandbox: SandboxBackend;
  readonly redactor?: Redactor;
}): Promise<ToolImplementation[]> {
  const problems: Problem[] = [];
  const prepared: Prepared[] = [];
  for (const tool of options.commands) {
    const names = tool.mode === "fixed" ? [tool.program] : tool.programs;
    const programs = new Map<string, string>();
    for (const name of names) {
      const resolved = await resolveExecutable(name, options.pathVariable);
      if ("problem" in resolved) {
        problems.push({
          field: `commands: ${tool.name}`,
          value: name,
          message: `command tool ${tool.name}: ${resolved.problem}`,
        });
        continue;
      }
      programs.set(name, resolved.path);
      if (tool.mode === "fixed" && tool.sha256 !== undefined) {
        const actual = await hashExecutable(resolved.path);
        if (actual !== tool.sha256) {
          problems.push({
            field: `commands: ${tool.name}`,
            value: resolved.path,
            expected: tool.sha256,
            message: `command tool ${tool.name}: ${resolved.path} has SHA-256 ${actual}, not the pinned ${tool.sha256} (the program changed)`,
          });
        }
      }
    }
    prepared.push({ tool, programs });
  }
  if (problems.length > 0) {
    throw new ConfigError(problems, "peergate cannot start: a declared command tool cannot run");
  }
  return prepared.map((p) => buildCommandTool(p, options));
}

function buildCommandTool(
  { tool, programs }: Prepared,
  options: Parameters<typeof createCommandTools>[0],
): ToolImplementation {
  const timeoutMs = tool.timeoutMs ?? commandToolLimits.defaultTimeoutMs;
  const env =
    tool.envAllowlist === undefined || options.parentEnv === undefined
      ? options.env
      : scrubEnvironment(options.parentEnv, [
          ...(options.envAllowlist ?? []),
          ...tool.envAllowlist,
        ]);
  const limits = resolveSandboxLimits(tool.limits);
  const inputSchema =
    tool.mode === "fixed"
      ? z.strictObject({ arguments: argumentsField })
      : z.strictObject({
          program: z.enum(tool.programs as [string, ...string[]]).describe("Which program to run."),
          arguments: argumentsField,
        });
  const fixedArgs = tool.mode === "fixed" ? tool.args : [];
  // A model argument the program would read as an option (`git log --output=FILE`) can do more
  // than the declared risk. It is safe after an operator-placed `--`; otherwise it is refused,
  // unless the declaration says the model may pass options (allowOptions).
  const optionsAllowed = tool.allowOptions === true || fixedArgs.includes("--");
  const pinned = tool.mode === "fixed" ? tool.sha256 : undefined;

  return {
    name: tool.name,
    description:
      tool.mode === "fixed"
        ? `${tool.description}\n(Runs a fixed program; your arguments are appended literally, at most ${commandToolLimits.maxArguments}${optionsAllowed ? "" : ", none starting with -"}.)`
        : `${tool.description}\n(Runs one of: ${tool.programs.join(", ")}; arguments are passed literally, no shell${optionsAllowed ? "" : ", none starting with -"}.)`,
    inputSchema,
    timeoutMs: timeoutMs + 10_000,
    execute: (args, ctx) =>
      runGuarded(ctx, async () => {
        checkCallWorkspace(ctx.workspace, options.workspace);
        const input = inputSchema.parse(args) as { program?: string; arguments: string[] };
        const name = tool.mode === "fixed" ? tool.program : (input.program ?? "");
        const resolved = programs.get(name);
        if (resolved === undefined) {
          throw new ToolCallError(
            "invalid-input",
            `${quotePath(name)} is not one of this tool's programs.`,
          );
        }
        if (pinned !== undefined && (await hashExecutable(resolved).catch(() => "")) !== pinned) {
          throw new ToolCallError(
            "refused",
            `The program of ${tool.name} changed since peergate started (its SHA-256 no longer matches the pin); nothing was run.`,
          );
        }
        const option = optionsAllowed ? undefined : input.arguments.find((a) => a.startsWith("-"));
        if (option !== undefined) {
          throw new ToolCallError(
            "refused",
            `The argument ${quoteUntrusted(option)} starts with "-": ${tool.name} does not take options from the model. Nothing was run.`,
          );
        }
        const argv = [...fixedArgs, ...input.arguments];
        const verdict = checkCommandDenylist(resolved, argv);
        if (verdict.denied) {
          throw new ToolCallError(
            "refused",
            `This command is not allowed: ${verdict.reason}. Nothing was run.`,
          );
        }
        const result = await runProcess({
          program: resolved,
          args: argv,
          cwd: options.workspace.root,
          env,
          timeoutMs,
          signal: ctx.signal,
          maxOutputBytes: commandToolLimits.maxOutputBytes,
          ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
          sandbox: {
            backend: options.sandbox,
            workspace: options.workspace.root,
            egress: tool.egress === true,
            limits,
            readOnlyPaths: [resolved],
            ...(options.redactor === undefined ? {} : { redactor: options.redactor }),
          },
        });
        return describeProcessResult(result, name, timeoutMs);
      }),
  };
}
