// The backend a configuration names.
import { createBwrapBackend } from "./bwrap.ts";
import { createNoneBackend } from "./none.ts";
import type { SandboxBackend, SandboxKind } from "./types.ts";

export function createSandboxBackend(
  kind: SandboxKind,
  options: { readonly dataDir?: string } = {},
): SandboxBackend {
  return kind === "bwrap"
    ? createBwrapBackend(options.dataDir === undefined ? {} : { hiddenPaths: [options.dataDir] })
    : createNoneBackend();
}
