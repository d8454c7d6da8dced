// Declared command tools from tools.yaml (docs/declared-tools.md), four modes and no shell:
// `fixed` (program and leading arguments fixed; the model's arguments appended as literal argv),
// `structured` (the model names one declared program and its argv), `chain` (plain words joined by
// | ; && ||, read by the bash parser, every stage resolved, checked and gated on its own) and
// `script` (a script file hashed at load and re-verified before every start).
//
// Over 500 lines for now, and not on purpose: the four modes share loading, resolution, hashing
// and the manifest digest here; each mode's call path is the seam to split it along next.
//
// Programs are resolved to absolute paths once, at start, through an `executables` alias or the
// PATH peergate was given (relative PATH entries are skipped). Every resolved program is hashed
// into the tool's manifest digest, with the canonical declaration and the script's hash (never a
// secretArg's value); the digest travels in the call's arguments, so an approval names it, and a
// call whose digest is not the running manifest's is refused. A `sha256` pin is checked at start
// and before every call.
import { constants, createReadStream } from "node:fs";
import { access, open, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { canonicalJson } from "../../db/audit.ts";
import { ConfigError, type Problem } from "../../errors.ts";
import { explainCoverage } from "../../policy/command-key.ts";
import type {
  ArgSourcePolicy,
  CommandToolPolicy,
  ExecutablePolicy,
} from "../../policy/policy-files.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import { SandboxUnavailableError } from "../../sandbox/pids-cgroup.ts";
import { createRedactor, type Redactor } from "../../sandbox/redact.ts";
import { resolveSandboxLimits, type SandboxBackend } from "../../sandbox/types.ts";
import { scrubEnvironment } from "../scrub-environment.ts";
import { checkCommandDenylist } from "../shell/command-denylist.ts";
import { argvKey } from "../shell/command-keys.ts";
import type {
  StageRequest,
  ToolCallContext,
  ToolFailure,
  ToolImplementation,
  ToolSuccess,
} from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";
import { type ChainItem, ChainSyntaxError, parseChain } from "./chain.ts";
import {
  chainRedactors,
  createProgressStream,
  finalizeOutput,
  sha256Hex,
  stripTerminal,
} from "./declared-output.ts";
import { describeDeclaredTool } from "./describe.ts";
import { type PipelineResult, runPipeline, type StageStatus } from "./pipeline.ts";

export const commandToolLimits = {
  maxArguments: 32,
  maxArgumentBytes: 4096,
  maxOutputBytes: 16 * 1024,
  defaultTimeoutMs: 60_000,
  maxStdinBytes: 64 * 1024,
  maxRationaleBytes: 1024,
  maxCommandBytes: 4096,
  maxSourceBytes: 1024 * 1024,
  maxProgressBytes: 64 * 1024,
};

/** A typed refusal of a declared tool: `code` is stable, `message` is for the model. */
export class DeclaredToolError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
    this.name = "DeclaredToolError";
  }
}

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
  const { createHash } = await import("node:crypto");
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** A program as the tool will run it: where it is, its hash now, and a pin if one was declared. */
type ResolvedProgram = { path: string; sha256: string; pinned: string | undefined };

type DeclaredArg =
  | { kind: "literal"; value: string }
  | { kind: "secret"; value: string; raw: string }
  | { kind: "path"; given: string; absolute: string };

type Prepared = {
  tool: CommandToolPolicy;
  /** Program name (as declared) to what it resolved to. */
  programs: Map<string, ResolvedProgram>;
  args: DeclaredArg[];
  script: { path: string; sha256: string; maxBytes: number } | undefined;
  manifest: string;
  secrets: string[];
};

export type CreateCommandToolsOptions = {
  readonly commands: readonly CommandToolPolicy[];
  readonly executables?: readonly ExecutablePolicy[];
  readonly workspace: Workspace;
  /** Already scrubbed of secrets. */
  readonly env: Record<string, string>;
  /** PATH to resolve programs with (the parent environment's). */
  readonly pathVariable: string | undefined;
  readonly killGraceMs?: number;
  /** The parent environment, for envAllowlist names and secretArg values. */
  readonly parentEnv?: Readonly<Record<string, string | undefined>>;
  /** The agent-wide envAllowlist (a tool's own list is added to it). */
  readonly envAllowlist?: readonly string[];
  readonly sandbox: SandboxBackend;
  readonly redactor?: Redactor;
};

/** Reads a script under its bound and hashes it; a typed problem when it cannot. */
async function readScript(file: string, maxBytes: number): Promise<{ sha256: string } | string> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    const stats = await handle.stat();
    if (!stats.isFile()) return `${file} is not a regular file`;
    if (stats.size > maxBytes)
      return `${file} has ${stats.size} bytes, over maxSourceBytes ${maxBytes}`;
    const bytes = await handle.readFile();
    if (bytes.length > maxBytes) return `${file} is over maxSourceBytes ${maxBytes}`;
    return { sha256: sha256Hex(bytes) };
  } catch (error) {
    return `${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`;
  } finally {
    await handle?.close();
  }
}

function declaredPrograms(tool: CommandToolPolicy): string[] {
  switch (tool.mode) {
    case "fixed":
      return [tool.program];
    case "structured":
      return tool.programs;
    case "chain":
      return tool.programs ?? [];
    case "script":
      return tool.interpreter === undefined ? [] : [tool.interpreter];
  }
}

/**
 * Resolves and verifies every declared command tool and returns their implementations. Throws
 * ConfigError naming the tool, the field, the value and the fix for each one that cannot run.
 */
export async function createCommandTools(
  options: CreateCommandToolsOptions,
): Promise<ToolImplementation[]> {
  const problems: Problem[] = [];
  const prepared: Prepared[] = [];
  const aliases = new Map((options.executables ?? []).map((e) => [e.id, e]));
  const hashes = new Map<string, Promise<string>>();
  const hashOnce = (file: string) => {
    let hash = hashes.get(file);
    if (hash === undefined) {
      hash = hashExecutable(file);
      hashes.set(file, hash);
    }
    return hash;
  };
  for (const [index, tool] of options.commands.entries()) {
    const where = `commands[${index}] (${tool.name})`;
    const fail = (field: string, value: unknown, message: string, expected?: string) =>
      problems.push({
        field: `tools.yaml: ${where}.${field}`,
        value,
        ...(expected === undefined ? {} : { expected }),
        message: `tools.yaml: command tool ${tool.name}, field ${field} = ${quoteUntrusted(value, 120)}: ${message}`,
      });
    const programs = new Map<string, ResolvedProgram>();
    for (const name of declaredPrograms(tool)) {
      const alias = aliases.get(name);
      const field =
        tool.mode === "fixed" ? "program" : tool.mode === "script" ? "interpreter" : "programs";
      const aliasPath = alias?.path.replace(/^\$\{workspace\}\//, `${options.workspace.root}/`);
      const resolved = await resolveExecutable(aliasPath ?? name, options.pathVariable);
      if ("problem" in resolved) {
        fail(
          field,
          name,
          `${resolved.problem}; install it, fix the path, or declare it under executables`,
        );
        continue;
      }
      const actual = await hashOnce(resolved.path);
      const pinned = alias?.sha256 ?? (tool.mode === "fixed" ? tool.sha256 : undefined);
      if (pinned !== undefined && actual !== pinned) {
        fail(
          alias === undefined ? "sha256" : `executables ${alias.id}.sha256`,
          pinned,
          `${resolved.path} has SHA-256 ${actual}, not the pinned ${pinned} (the program changed); update the pin after checking the program`,
          pinned,
        );
      }
      programs.set(name, { path: resolved.path, sha256: actual, pinned });
    }
    const secrets: string[] = [];
    const args: DeclaredArg[] = [];
    const declaredArgs = tool.mode === "fixed" || tool.mode === "script" ? tool.args : [];
    for (const [i, source] of declaredArgs.entries()) {
      const arg = prepareArg(source, options, (message) => fail(`args[${i}]`, source, message));
      if (arg === undefined) continue;
      if (arg.kind === "secret") secrets.push(arg.raw);
      args.push(arg);
    }
    let script: Prepared["script"];
    if (tool.mode === "script") {
      const file = path.resolve(options.workspace.root, tool.script);
      const maxBytes = tool.maxSourceBytes ?? commandToolLimits.maxSourceBytes;
      const read = await readScript(file, maxBytes);
      if (typeof read === "string")
        fail("script", tool.script, `${read}; fix the path or the bound`);
      else if (tool.sha256 !== undefined && read.sha256 !== tool.sha256) {
        fail(
          "sha256",
          tool.sha256,
          `the script's SHA-256 is ${read.sha256}; update the pin after reviewing the script`,
          tool.sha256,
        );
      } else if (tool.executable === true && !(await isExecutableFile(file))) {
        fail(
          "executable",
          true,
          `${file} is not executable; chmod +x it or declare an interpreter`,
        );
      } else script = { path: file, sha256: read.sha256, maxBytes };
    }
    const manifest = sha256Hex(
      canonicalJson({
        declaration: tool,
        programs: [...programs.entries()].map(([name, p]) => ({
          name,
          path: p.path,
          sha256: p.sha256,
        })),
        script: script === undefined ? null : { path: script.path, sha256: script.sha256 },
      }),
    );
    prepared.push({ tool, programs, args, script, manifest, secrets });
  }
  if (problems.length > 0) {
    throw new ConfigError(problems, "peergate cannot start: a declared command tool cannot run");
  }
  return prepared.map((p) => buildCommandTool(p, options));
}

function prepareArg(
  source: ArgSourcePolicy,
  options: CreateCommandToolsOptions,
  fail: (message: string) => void,
): DeclaredArg | undefined {
  if (typeof source === "string") return { kind: "literal", value: source };
  if ("arg" in source) return { kind: "literal", value: source.arg };
  if ("secretArg" in source) {
    const value = options.parentEnv?.[source.secretArg.env];
    if (value === undefined || value === "") {
      fail(`the variable ${source.secretArg.env} is not set; set it in peergate's environment`);
      return undefined;
    }
    return { kind: "secret", value: `${source.secretArg.prefix}${value}`, raw: value };
  }
  const absolute = path.resolve(options.workspace.root, source.pathArg);
  const relative = path.relative(options.workspace.root, absolute);
  if (relative.startsWith("..") || path.isAbsolute(relative)) {
    fail("a path inside the workspace");
    return undefined;
  }
  return { kind: "path", given: source.pathArg, absolute };
}

type CallInput = {
  program?: string;
  command?: string;
  arguments?: string[];
  stdin?: string;
  rationale?: string;
  manifest: string;
};

function byteBound(max: number, what: string) {
  return z.string().refine((s) => Buffer.byteLength(s) <= max && !s.includes("\0"), {
    error: `${what} of at most ${max} bytes, without NUL`,
  });
}

/** The model's input schema for a tool: only the fields its contracts allow. */
function buildInputSchema(tool: CommandToolPolicy, manifest: string): z.ZodType {
  const fields: Record<string, z.ZodType> = {};
  const contract = tool.arguments ?? { mode: "optional" as const };
  if (tool.mode !== "chain" && contract.mode !== "none") {
    const maxCount = contract.maxCount ?? commandToolLimits.maxArguments;
    const minCount = contract.minCount ?? (contract.mode === "required" ? 1 : 0);
    const maxItem = contract.maxItemBytes ?? commandToolLimits.maxArgumentBytes;
    const list = z
      .array(byteBound(maxItem, "an argument"))
      .min(minCount)
      .max(maxCount)
      .describe("Arguments, each passed literally as one argv element (no shell parsing).");
    fields.arguments = contract.mode === "required" ? list : list.default([]);
  }
  if (tool.mode === "structured") {
    fields.program = z
      .enum(tool.programs as [string, ...string[]])
      .describe("Which program to run.");
  }
  if (tool.mode === "chain") {
    fields.command = byteBound(
      tool.maxCommandBytes ?? commandToolLimits.maxCommandBytes,
      "a command line",
    ).describe("Plain words joined by |, ;, && or ||. No redirections, $(), variables or globs.");
  }
  const stdin = tool.stdin ?? "none";
  if (stdin !== "none") {
    const field = byteBound(
      tool.maxStdinBytes ?? commandToolLimits.maxStdinBytes,
      "stdin",
    ).describe("Text given to the command on standard input.");
    fields.stdin = stdin === "required" ? field : field.optional();
  }
  const rationale = tool.rationale ?? (tool.mode === "fixed" ? "none" : "optional");
  if (rationale !== "none") {
    const field = byteBound(commandToolLimits.maxRationaleBytes, "a rationale").describe(
      "Why you run this (shown to the operator who approves it; it grants nothing).",
    );
    fields.rationale = rationale === "required" ? field : field.optional();
  }
  fields.manifest = z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .describe("Set by peergate: leave it out.");
  return z.strictObject(fields).transform((input) => ({
    ...input,
    manifest: (input.manifest as string | undefined) ?? manifest,
  }));
}

type StageRecord = {
  program: string;
  arguments: string[];
  executable: string;
  executable_sha256: string;
  status: { exited: number } | { signaled: string } | { skipped: true } | { failed: string };
};

function statusOf(stage: StageStatus): StageRecord["status"] {
  if (stage.spawnError !== undefined) return { failed: stage.spawnError };
  if (stage.signal !== null) return { signaled: stage.signal };
  return { exited: stage.exitCode ?? -1 };
}

function exitOf(stage: StageStatus): number {
  if (stage.exitCode !== null) return stage.exitCode;
  return stage.signal === null ? 127 : 128;
}

type PlannedStage = {
  name: string;
  argv: [string, ...string[]];
  resolved: ResolvedProgram;
  /** What the model sees of the argv (declared secrets masked). */
  shown: string[];
};

function buildCommandTool(
  prepared: Prepared,
  options: CreateCommandToolsOptions,
): ToolImplementation {
  const { tool, programs, manifest } = prepared;
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
  const onPath = new Map<string, ResolvedProgram>();

  const resolveStageProgram = async (name: string): Promise<ResolvedProgram> => {
    const declared = programs.get(name);
    if (declared !== undefined) return declared;
    if (tool.mode !== "chain" || tool.programs !== undefined) {
      throw new DeclaredToolError(
        "not-declared",
        `${quoteUntrusted(name)} is not one of this tool's programs${tool.mode === "chain" && tool.programs ? ` (${tool.programs.join(", ")})` : ""}. Nothing was run.`,
      );
    }
    const found = await resolveExecutable(name, options.pathVariable);
    if ("problem" in found) {
      throw new DeclaredToolError(
        "not-found",
        `${quoteUntrusted(name)} was not found on PATH. Nothing was run.`,
      );
    }
    const cached = onPath.get(found.path);
    const sha256 = cached?.sha256 ?? (await hashExecutable(found.path));
    const resolved = { path: found.path, sha256, pinned: undefined };
    onPath.set(found.path, resolved);
    return resolved;
  };

  const verify = async (stage: PlannedStage) => {
    if (stage.resolved.pinned === undefined) return;
    const now = await hashExecutable(stage.resolved.path).catch(() => "");
    if (now !== stage.resolved.pinned) {
      throw new DeclaredToolError(
        "refused",
        `The program ${quoteUntrusted(stage.name)} of ${tool.name} changed since peergate started (its SHA-256 no longer matches the pin); nothing was run.`,
      );
    }
  };

  const declaredArgv = async (): Promise<{ argv: string[]; shown: string[] }> => {
    const argv: string[] = [];
    const shown: string[] = [];
    for (const arg of prepared.args) {
      if (arg.kind === "literal") {
        argv.push(arg.value);
        shown.push(arg.value);
      } else if (arg.kind === "secret") {
        argv.push(arg.value);
        shown.push("[secret]");
      } else {
        const real = await realpath(arg.absolute).catch(() => {
          throw new DeclaredToolError(
            "not-found",
            `The declared path ${quoteUntrusted(arg.given)} does not exist. Nothing was run.`,
          );
        });
        const rel = path.relative(options.workspace.root, real);
        if (rel.startsWith("..") || path.isAbsolute(rel)) {
          throw new DeclaredToolError(
            "refused",
            `The declared path ${quoteUntrusted(arg.given)} leads outside the workspace. Nothing was run.`,
          );
        }
        argv.push(real);
        shown.push(rel === "" ? "." : rel);
      }
    }
    return { argv, shown };
  };

  /** The stages of the call, resolved and checked, in chain order (one item for other modes). */
  const plan = async (
    input: CallInput,
  ): Promise<{ op: ChainItem["op"]; stages: PlannedStage[] }[]> => {
    const modelArgs = input.arguments ?? [];
    if (!optionsAllowed) {
      const option = modelArgs.find((a) => a.startsWith("-"));
      if (option !== undefined) {
        throw new DeclaredToolError(
          "refused",
          `The argument ${quoteUntrusted(option)} starts with "-": ${tool.name} does not take options from the model. Nothing was run.`,
        );
      }
    }
    if (tool.mode === "chain") {
      const items = parseChain(input.command ?? "");
      const out: { op: ChainItem["op"]; stages: PlannedStage[] }[] = [];
      for (const item of items) {
        const stages: PlannedStage[] = [];
        for (const [name, ...rest] of item.stages) {
          const resolved = await resolveStageProgram(name);
          stages.push({ name, argv: [resolved.path, ...rest], resolved, shown: rest });
        }
        out.push({ op: item.op, stages });
      }
      return out;
    }
    const fixed = await declaredArgv();
    if (tool.mode === "script") {
      const script = prepared.script as NonNullable<Prepared["script"]>;
      const interpreter =
        tool.interpreter === undefined ? undefined : programs.get(tool.interpreter);
      const resolved = interpreter ?? {
        path: script.path,
        sha256: script.sha256,
        pinned: undefined,
      };
      const argv: [string, ...string[]] =
        interpreter === undefined
          ? [script.path, ...fixed.argv, ...modelArgs]
          : [interpreter.path, script.path, ...fixed.argv, ...modelArgs];
      return [
        {
          op: undefined,
          stages: [{ name: tool.script, argv, resolved, shown: [...fixed.shown, ...modelArgs] }],
        },
      ];
    }
    const name = tool.mode === "fixed" ? tool.program : (input.program ?? "");
    const resolved = await resolveStageProgram(name);
    return [
      {
        op: undefined,
        stages: [
          {
            name,
            argv: [resolved.path, ...fixed.argv, ...modelArgs],
            resolved,
            shown: [...fixed.shown, ...modelArgs],
          },
        ],
      },
    ];
  };

  const fingerprint = (stage: PlannedStage) =>
    sha256Hex(
      canonicalJson({
        manifest,
        executable: stage.resolved.path,
        sha256: stage.resolved.sha256,
        argv: stage.argv.slice(1),
      }),
    );

  /** A chain stage not covered by the caller's allowlist asks on its own, when the engine can ask. */
  const gateStage = async (stage: PlannedStage, ctx: ToolCallContext) => {
    const gate = ctx.commands;
    if (gate === undefined) return;
    const coverage = explainCoverage(argvKey([stage.name, ...stage.argv.slice(1)]), gate.entries);
    if (coverage.covered) return;
    const request: StageRequest = {
      tool: tool.name,
      argv: [stage.name, ...stage.argv.slice(1)],
      executable: stage.resolved.path,
      executableSha256: stage.resolved.sha256,
      fingerprint: fingerprint(stage),
      reason: coverage.reason,
    };
    if (gate.approveStage !== undefined && (await gate.approveStage(request))) return;
    throw new DeclaredToolError(
      "stage-not-approved",
      `The stage ${quoteUntrusted(request.argv.join(" "), 200)} is not covered by the caller's command allowlist (${coverage.reason}) and was not approved; it did not run.`,
    );
  };

  const run = async (
    input: CallInput,
    ctx: ToolCallContext,
  ): Promise<ToolSuccess | ToolFailure> => {
    checkCallWorkspace(ctx.workspace, options.workspace);
    if (input.manifest !== manifest) {
      throw new DeclaredToolError(
        "manifest-changed",
        `This call was made (or approved) for another declaration of ${tool.name} (manifest ${input.manifest.slice(0, 12)}, now ${manifest.slice(0, 12)}); nothing was run.`,
      );
    }
    const items = await plan(input);
    // Every stage, taken or not, is checked before anything starts: these checks ask nobody.
    for (const item of items) {
      for (const stage of item.stages) {
        const verdict = checkCommandDenylist(stage.argv[0], stage.argv.slice(1));
        if (verdict.denied) {
          throw new DeclaredToolError(
            "refused",
            `This command is not allowed: ${verdict.reason}. Nothing was run.`,
          );
        }
        await verify(stage);
      }
    }
    const stdin = input.stdin === undefined ? undefined : Buffer.from(input.stdin, "utf8");
    const progress =
      tool.stream === "sanitized" && ctx.progress !== undefined
        ? createProgressStream(ctx.progress, redactor, commandToolLimits.maxProgressBytes, 256)
        : undefined;
    const deadline = Date.now() + timeoutMs;
    const records: StageRecord[] = [];
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let stdoutTotal = 0;
    let stderrTotal = 0;
    let status = 0;
    let stoppedBy: PipelineResult["stoppedBy"];
    let failure: DeclaredToolError | undefined;
    let lastStatuses: StageStatus[] = [];
    for (const [index, item] of items.entries()) {
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
        for (const stage of item.stages) await gateStage(stage, ctx);
        if (tool.mode === "script") await verifyScript();
        for (const stage of item.stages) await verify(stage);
      } catch (error) {
        if (!(error instanceof DeclaredToolError)) throw error;
        failure = error;
        for (const stage of item.stages)
          records.push({ ...recordOf(stage), status: { skipped: true } });
        continue;
      }
      const result = await runPipeline({
        stages: item.stages.map((s) => s.argv),
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
        ],
        backend: options.sandbox,
        timeoutMs: Math.max(1, deadline - Date.now()),
        signal: ctx.signal,
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
        records.push({ ...recordOf(stage), status: statusOf(result.stages[i] as StageStatus) });
      }
      const exits = result.stages.map(exitOf);
      status =
        tool.mode === "chain" && tool.pipefail === true
          ? ([...exits].reverse().find((e) => e !== 0) ?? 0)
          : (exits[exits.length - 1] ?? 0);
    }
    progress?.end();
    return shape({
      stdout,
      stderr,
      stdoutTotal,
      stderrTotal,
      status,
      stoppedBy,
      failure,
      records,
      lastStatuses,
    });
  };

  const recordOf = (stage: PlannedStage) => ({
    program: stage.name,
    arguments: stage.shown,
    executable: stage.resolved.path,
    executable_sha256: stage.resolved.sha256,
  });

  const verifyScript = async () => {
    const script = prepared.script;
    if (script === undefined) return;
    const read = await readScript(script.path, script.maxBytes);
    if (typeof read === "string" || read.sha256 !== script.sha256) {
      throw new DeclaredToolError(
        "script-changed",
        `The script of ${tool.name} changed since peergate loaded it (its SHA-256 differs, or it is gone or too large); nothing was run. Restart peergate after reviewing it.`,
      );
    }
  };

  const shape = (r: {
    stdout: Buffer[];
    stderr: Buffer[];
    stdoutTotal: number;
    stderrTotal: number;
    status: number;
    stoppedBy: PipelineResult["stoppedBy"];
    failure: DeclaredToolError | undefined;
    records: StageRecord[];
    lastStatuses: StageStatus[];
  }): ToolSuccess | ToolFailure => {
    if (r.records.every((rec) => "skipped" in rec.status) && r.failure !== undefined) {
      return { ok: false, code: r.failure.code, error: r.failure.message };
    }
    const outBytes = Buffer.concat(r.stdout).subarray(0, maxOutputBytes);
    const errBytes = Buffer.concat(r.stderr).subarray(0, maxOutputBytes);
    const stdoutTruncated = r.stdoutTotal > outBytes.length;
    const stderrTruncated = r.stderrTotal > errBytes.length;
    const out = finalizeOutput(outBytes, r.stdoutTotal, redactor);
    const err = finalizeOutput(errBytes, r.stderrTotal, redactor);
    const truncated = stdoutTruncated || stderrTruncated;
    const spawnFailed = r.lastStatuses.find((s) => s.spawnError !== undefined);
    if (spawnFailed !== undefined && r.records.length === 1) {
      return {
        ok: false,
        code: spawnFailed.spawnError === "ENOENT" ? "not-found" : "failed",
        error: `The program could not be started (${spawnFailed.spawnError}).`,
      };
    }
    if (r.stoppedBy !== undefined) {
      const tail = (t: string) => (t.length > 2000 ? `…${t.slice(-2000)}` : t);
      return {
        ok: false,
        code: r.stoppedBy === "timeout" ? "timeout" : "interrupted",
        error: `${r.stoppedBy === "timeout" ? `The command ran longer than ${timeoutMs} ms and was killed.` : "The command was stopped; it may have made part of its changes."}\nstdout (end): ${tail(out)}\nstderr (end): ${tail(err)}`,
        truncated,
      };
    }
    const last = r.lastStatuses[r.lastStatuses.length - 1];
    const content: Record<string, unknown> =
      tool.result === "structured"
        ? {
            status: { exited: r.status },
            stdout: out,
            stderr: err,
            stdout_truncated: stdoutTruncated,
            stderr_truncated: stderrTruncated,
            backend: options.sandbox.kind,
            tool: tool.name,
            manifest_sha256: manifest,
            commands: r.records,
            ...(r.failure === undefined
              ? {}
              : { stopped: { code: r.failure.code, reason: r.failure.message } }),
          }
        : tool.result === "stdout"
          ? { exitCode: r.status, stdout: out, stdoutTruncated }
          : {
              exitCode: r.status,
              signal: last?.signal ?? null,
              stdout: out,
              stderr: err,
              stdoutTruncated,
              stderrTruncated,
              ...(r.failure === undefined ? {} : { stopped: r.failure.message }),
            };
    if (r.failure !== undefined) {
      return {
        ok: false,
        code: r.failure.code,
        error: `${r.failure.message}\n${JSON.stringify(content)}`,
        truncated,
      };
    }
    if (r.status !== 0 && tool.nonzero === "error") {
      return {
        ok: false,
        code: "nonzero-exit",
        error: `The command exited with status ${r.status}.\n${JSON.stringify(content)}`,
        truncated,
      };
    }
    return { ok: true, content, truncated };
  };

  return {
    name: tool.name,
    description: describeDeclaredTool(tool, optionsAllowed),
    inputSchema,
    timeoutMs: timeoutMs + 10_000,
    execute: async (args, ctx) => {
      try {
        if (ctx.signal.aborted)
          return { ok: false, code: "interrupted", error: "The call was stopped." };
        const input = inputSchema.parse(args) as CallInput;
        if (input.rationale !== undefined) input.rationale = stripTerminal(input.rationale);
        return await run(input, ctx);
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
        if (ctx.signal.aborted)
          return { ok: false, code: "interrupted", error: "The call was stopped." };
        return { ok: false, code: "failed", error: "The tool failed unexpectedly." };
      }
    },
  };
}
