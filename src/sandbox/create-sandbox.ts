// The backend a configuration names.
import { createBwrapBackend } from "./bwrap.ts";
import { createNoneBackend } from "./none.ts";
import type { SandboxBackend, SandboxKind } from "./types.ts";

export function createSandboxBackend(kind: SandboxKind): SandboxBackend {
  return kind === "bwrap" ? createBwrapBackend() : createNoneBackend();
}
