// Loading declared command tools (docs/declared-tools.md): every program is resolved once, at
// start, through an `executables` alias or the PATH peergate was given (relative PATH entries are
// skipped), hashed, and checked against its `sha256` pin; a script is read under its bound and
// hashed; declared arguments are prepared (a secretArg read from the environment, a pathArg kept
// inside the workspace). The manifest digest covers the canonical declaration, every resolved
// program and the script's hash (never a secretArg's value). Nothing here runs a program.
import { constants, createReadStream } from "node:fs";
import { access, open, stat } from "node:fs/promises";
import path from "node:path";
import { ConfigError, type Problem } from "../../errors.ts";
import { canonicalJson } from "../../json-text.ts";
import { liesWithin } from "../../path-identity.ts";
import type {
  ArgSourcePolicy,
  CommandToolPolicy,
  ExecutablePolicy,
} from "../../policy/policy-files.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import type { Redactor } from "../../sandbox/redact.ts";
import type { SandboxBackend } from "../../sandbox/types.ts";
import type { Workspace } from "../workspace.ts";
import { sha256Hex } from "./declared-output.ts";
import { stageVerifiedFile, stagingDirectory, type VerifiedFile } from "./verified-files.ts";

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

export async function isExecutableFile(file: string): Promise<boolean> {
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

/**
 * A program as the tool will run it: where it is, its hash at load, and a pin if one was declared.
 * A pinned program also has `staged`, the read-only copy of the bytes the pin was checked on:
 * that copy is what runs (verified-files.ts).
 */
export type ResolvedProgram = {
  path: string;
  sha256: string;
  pinned: string | undefined;
  staged?: string | undefined;
};

export type DeclaredArg =
  | { kind: "literal"; value: string }
  | { kind: "secret"; value: string; raw: string }
  | { kind: "path"; given: string; absolute: string };

export type Prepared = {
  tool: CommandToolPolicy;
  /** Program name (as declared) to what it resolved to. */
  programs: Map<string, ResolvedProgram>;
  args: DeclaredArg[];
  /** The script's path, its hash at load, and `staged`: the copy of those bytes that runs. */
  script: { path: string; sha256: string; maxBytes: number; staged: string } | undefined;
  manifest: string;
  secrets: string[];
};

export type CreateCommandToolsOptions = {
  readonly commands: readonly CommandToolPolicy[];
  /** The full path of the file declaring them, named in every start-up error (default tools.yaml). */
  readonly file?: string;
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
export async function readScript(
  file: string,
  maxBytes: number,
): Promise<{ sha256: string } | string> {
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
 * Resolves and verifies every declared command tool and returns what each needs to run. Throws
 * ConfigError naming the tool, the field, the value and the fix for each one that cannot run.
 */
export async function prepareCommandTools(options: CreateCommandToolsOptions): Promise<Prepared[]> {
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
  const staging = new Map<string, Promise<VerifiedFile | string>>();
  const stageOnce = (file: string) => {
    let copy = staging.get(file);
    if (copy === undefined) {
      copy = stageVerifiedFile(file, { executable: true });
      staging.set(file, copy);
    }
    return copy;
  };
  const source = options.file ?? "tools.yaml";
  const stagingProblem = needsStaging(options) ? checkStagingPlace(options.workspace) : undefined;
  if (stagingProblem !== undefined) {
    throw new ConfigError(
      [{ field: "TMPDIR", value: stagingDirectory(), message: stagingProblem }],
      "peergate cannot start: a declared command tool cannot run",
    );
  }
  for (const [index, tool] of options.commands.entries()) {
    const where = `commands[${index}] (${tool.name})`;
    const fail = (field: string, value: unknown, message: string, expected?: string) =>
      problems.push({
        field: `${source}: ${where}.${field}`,
        value,
        ...(expected === undefined ? {} : { expected }),
        message: `${source}: command tool ${tool.name}, field ${field} = ${quoteUntrusted(value, 120)}: ${message}`,
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
      const pinned = alias?.sha256 ?? (tool.mode === "fixed" ? tool.sha256 : undefined);
      const place = checkProgramPlace(resolved.path, pinned !== undefined, options.workspace);
      if (place !== undefined) {
        fail(field, name, place);
        continue;
      }
      let actual: string;
      let staged: string | undefined;
      if (pinned === undefined) actual = await hashOnce(resolved.path);
      else {
        const copy = await stageOnce(resolved.path);
        if (typeof copy === "string") {
          fail(field, name, `${copy}; fix the path or the pin`);
          continue;
        }
        actual = copy.sha256;
        staged = copy.staged;
      }
      if (pinned !== undefined && actual !== pinned) {
        fail(
          alias === undefined ? "sha256" : `executables ${alias.id}.sha256`,
          pinned,
          `${resolved.path} has SHA-256 ${actual}, not the pinned ${pinned} (the program changed); update the pin after checking the program`,
          pinned,
        );
      }
      programs.set(name, { path: resolved.path, sha256: actual, pinned, staged });
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
      const place = liesWithin(file, options.workspace.dataDir)
        ? `${file} is in peergate's data directory, which no tool reads`
        : undefined;
      const read =
        place ??
        (await stageVerifiedFile(file, {
          noFollow: true,
          maxBytes,
          executable: tool.executable === true,
        }));
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
      } else script = { path: file, sha256: read.sha256, maxBytes, staged: read.staged };
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
  return prepared;
}

/**
 * Where a program may be, judged by its real location: never in the data directory, and in the
 * workspace (however it is named: an absolute path, a PATH entry, a symlink) only when pinned,
 * since commands can write there.
 */
function checkProgramPlace(
  file: string,
  pinned: boolean,
  workspace: Workspace,
): string | undefined {
  if (liesWithin(file, workspace.dataDir)) {
    return `${file} is in peergate's data directory, which no tool reads; fix the path`;
  }
  if (!pinned && liesWithin(file, workspace.root)) {
    return `${file} is in the workspace, where commands can change it; pin it (sha256 under executables) or install it outside the workspace`;
  }
  return undefined;
}

/** True when some declared tool runs a staged copy (a script or a pin). */
function needsStaging(options: CreateCommandToolsOptions): boolean {
  const pinned = new Set(
    (options.executables ?? []).filter((e) => e.sha256 !== undefined).map((e) => e.id),
  );
  return options.commands.some(
    (tool) =>
      tool.mode === "script" ||
      (tool.mode === "fixed" && tool.sha256 !== undefined) ||
      declaredPrograms(tool).some((name) => pinned.has(name)),
  );
}

/** The staging directory must not be where commands or the data directory are. */
function checkStagingPlace(workspace: Workspace): string | undefined {
  const dir = stagingDirectory();
  if (liesWithin(dir, workspace.root) || liesWithin(dir, workspace.dataDir)) {
    return `the staging directory ${dir} for verified scripts and programs is in the workspace or the data directory: set TMPDIR to a directory outside both`;
  }
  return undefined;
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
