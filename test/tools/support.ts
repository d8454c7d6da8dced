// Shared set-up for the tool tests: a temp directory holding a workspace and a data directory,
// a runtime built from real policy parsing, and helpers to call tools the way the run engine
// does (validate with inputSchema, then execute; for a proposal, run its hidden half).
import { createHash } from "node:crypto";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { createLogger } from "../../src/log.ts";
import { listPolicyTools, type ToolsPolicy } from "../../src/policy/policy-files.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createToolRuntime, type ToolRuntimeOptions } from "../../src/tools/runtime.ts";
import {
  type ApprovalRequest,
  type CallOwner,
  isApprovalRequest,
  type ToolCallContext,
  type ToolResult,
  type ToolRuntime,
} from "../../src/tools/types.ts";

export const silentLogger = createLogger({ level: "silent", write: () => {} });

export type Sandbox = {
  /** The temp directory holding everything (realpath). */
  readonly base: string;
  /** The workspace root (realpath). */
  readonly workspace: string;
  readonly dataDir: string;
  /** A directory outside the workspace with a secret file in it. */
  readonly outside: string;
  cleanup(): Promise<void>;
};

export async function createSandbox(options: { dataInside?: boolean } = {}): Promise<Sandbox> {
  const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-tools-")));
  const workspace = path.join(base, "workspace");
  const dataDir = options.dataInside ? path.join(workspace, ".peergate") : path.join(base, "data");
  const outside = path.join(base, "outside");
  await mkdir(workspace, { recursive: true });
  await mkdir(dataDir, { recursive: true });
  await mkdir(outside, { recursive: true });
  return {
    base,
    workspace,
    dataDir,
    outside,
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
}

export const emptyToolsPolicy: ToolsPolicy = { commands: [], mcpServers: [] };

export function buildPolicies(toolsPolicy: ToolsPolicy = emptyToolsPolicy) {
  const built = createInventory(listPolicyTools(toolsPolicy, builtinDescriptors), "test");
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return { inventory: built.inventory, toolsPolicy };
}

/** The environment commands inherit in tests: enough to find programs, nothing else. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: os.homedir(),
    LANG: "C.UTF-8",
    ...extra,
  };
}

export async function startRuntime(
  sandbox: Sandbox,
  overrides: Partial<ToolRuntimeOptions> = {},
): Promise<ToolRuntime> {
  return createToolRuntime({
    policies: buildPolicies(),
    workspace: sandbox.workspace,
    dataDir: sandbox.dataDir,
    env: baseEnv(),
    logger: silentLogger,
    ...overrides,
  });
}

/** The caller and run a test's calls belong to unless it names others. */
export const testOwner: CallOwner = { callerId: "caller-1", runId: "run-1" };

export function makeContext(
  runtime: ToolRuntime,
  signal?: AbortSignal,
  run: CallOwner = testOwner,
): ToolCallContext {
  return {
    signal: signal ?? new AbortController().signal,
    workspace: runtime.workspace ?? "",
    callId: "call-1",
    now: () => new Date("2026-01-02T03:04:05.000Z"),
    run,
  };
}

/** Calls a tool as the engine does: schema first (a schema rejection throws), then execute. */
export async function callTool(
  runtime: ToolRuntime,
  name: string,
  args: unknown,
  signal?: AbortSignal,
  run?: CallOwner,
): Promise<ToolResult> {
  const tool = runtime.tools.get(name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const parsed = tool.inputSchema.parse(args);
  return tool.execute(parsed, makeContext(runtime, signal, run));
}

/** Runs the hidden half of `tool` with a proposal's args, as the approval path does. */
export async function runHalf(
  runtime: ToolRuntime,
  name: string,
  request: ApprovalRequest,
  signal?: AbortSignal,
): Promise<ToolResult> {
  const tool = runtime.tools.get(name);
  if (tool?.executeHalf === undefined) throw new Error(`${name} has no hidden half`);
  expect(request.executeToolName).toBe(tool.executeHalf.name);
  const parsed = tool.executeHalf.inputSchema.parse(request.executeArgs);
  return tool.executeHalf.execute(parsed, makeContext(runtime, signal));
}

export function expectApproval(result: ToolResult): ApprovalRequest {
  if (!isApprovalRequest(result))
    throw new Error(`expected an approval request, got ${JSON.stringify(result)}`);
  return result;
}

export function expectSuccess(result: ToolResult): Record<string, unknown> {
  if (isApprovalRequest(result) || !result.ok) {
    throw new Error(`expected success, got ${JSON.stringify(result)}`);
  }
  return result.content as Record<string, unknown>;
}

export function expectFailure(result: ToolResult, code: string): string {
  if (isApprovalRequest(result) || result.ok) {
    throw new Error(`expected failure ${code}, got ${JSON.stringify(result)}`);
  }
  expect(result.code, result.error).toBe(code);
  return result.error;
}

/** Proposes and, as an approving operator would, runs the half. */
export async function approveAndRun(
  runtime: ToolRuntime,
  name: string,
  args: unknown,
  signal?: AbortSignal,
): Promise<ToolResult> {
  return runHalf(runtime, name, expectApproval(await callTool(runtime, name, args)), signal);
}

/**
 * A digest of a directory tree: every entry's relative path, type, mode, size, mtime, and a
 * regular file's bytes or a symlink's target. Equal digests mean nothing was created, removed,
 * renamed, written or touched.
 */
export async function hashTree(root: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (dir: string, rel: string): Promise<void> => {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const full = path.join(dir, name);
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const stats = await lstat(full);
      hash.update(`${childRel}\0${stats.mode}\0${stats.size}\0${stats.mtimeMs}\0`);
      if (stats.isSymbolicLink()) hash.update(await readlink(full));
      else if (stats.isFile()) hash.update(await readFile(full));
      else if (stats.isDirectory()) await walk(full, childRel);
    }
  };
  await walk(root, "");
  return hash.digest("hex");
}
