// The shape of a built-in tool: one file exports its descriptor (what the ceiling reasons about,
// and the one description the model and the operator read) together with the factory that builds
// its implementation. src/tools/builtin-tools.ts lists them; the loader hands their descriptors
// to src/policy/, which never imports this folder.
import { describeTool, type ToolDeclaration, type ToolDescriptor } from "../policy/tools.ts";
import type { Redactor } from "../sandbox/redact.ts";
import type { SandboxBackend } from "../sandbox/types.ts";
import type { WebFetchOptions } from "./net/web-fetch.ts";
import type { ToolImplementation } from "./types.ts";
import type { Workspace } from "./workspace.ts";

/** The operator's settings the built-ins read (a subset of the runtime's options). */
export type BuiltinOptions = {
  readonly webFetch?: WebFetchOptions;
  /** find's deadline for one call (default 10 s). */
  readonly find?: { readonly timeMs?: number };
  /** grep's deadline for one call (default 10 s). */
  readonly grep?: { readonly timeMs?: number };
  /** SIGTERM → SIGKILL grace for commands (default 3 s; tests shorten it). */
  readonly killGraceMs?: number;
};

/** What the runtime gives a built-in's factory, built once at start-up. */
export type BuiltinContext = {
  readonly workspace: Workspace;
  /** The environment commands inherit, already scrubbed. */
  readonly env: Record<string, string>;
  readonly options: BuiltinOptions;
  /** How processes are confined; absent only in tool unit tests (then spawned plainly). */
  readonly sandbox?: SandboxBackend;
  /** Replaces every secret peergate holds in process output. */
  readonly redactor?: Redactor;
};

export type BuiltinTool = {
  readonly descriptor: ToolDescriptor;
  /**
   * Builds the implementation from the inventory's descriptor (the same tool). Absent for tools
   * that never reach caller runs: they need a person or write the operator's own state.
   */
  readonly create?: (context: BuiltinContext, descriptor: ToolDescriptor) => ToolImplementation;
};

/** Declares a built-in: its descriptor, frozen, and its factory. */
export function defineBuiltin(
  declaration: ToolDeclaration,
  create?: BuiltinTool["create"],
): BuiltinTool {
  const descriptor = Object.freeze(describeTool(declaration));
  return Object.freeze(create === undefined ? { descriptor } : { descriptor, create });
}

/** The hidden half's name of a two-phase built-in (its descriptor must declare one). */
export function requireHalf(descriptor: ToolDescriptor): string {
  if (descriptor.executeHalf === undefined) {
    throw new Error(
      `${descriptor.name} is implemented as two-phase but its descriptor has no hidden half`,
    );
  }
  return descriptor.executeHalf;
}
