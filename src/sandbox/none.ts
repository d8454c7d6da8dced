// The `none` backend: today's plain spawn, chosen only by an explicit PEERGATE_SANDBOX=none.
// Processes run as the server's user, in its PID namespace and on its network; only the
// allowlisted environment and the resource limits (when prlimit is there) still apply.
import type { SandboxBackend, SandboxCommand, SandboxRequest } from "./types.ts";

export function createNoneBackend(): SandboxBackend {
  return {
    kind: "none",
    confines: false,
    wrap(request: SandboxRequest): SandboxCommand {
      const [program, ...args] = request.argv;
      return {
        command: program,
        args,
        cwd: request.cwd,
        env: { HOME: request.workspace, ...request.env },
      };
    },
  };
}
