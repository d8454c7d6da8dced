// Choosing and checking the sandbox at start. The sandbox is required only when the agent can
// start a process for a run: it offers execute_command, or tools.yaml declares a command tool or
// a stdio MCP server (which tools do is the tools' knowledge, src/tools/starts-processes.ts: the
// caller passes the answer in). Then a backend that does not work stops start-up with the fix;
// without such a tool the server starts anywhere (bubblewrap absent, macOS) and says so in /readyz.
// `none` is only ever the operator's explicit choice, and is logged as a warning every start.

import { ConfigError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { createSandboxBackend } from "./create-sandbox.ts";
import { probeSandbox } from "./probe.ts";
import type { SandboxBackend, SandboxKind, SandboxProbe } from "./types.ts";

/** What /readyz shows about the sandbox. */
export type SandboxStatus = { readonly ok: boolean; readonly detail: string };

export const sandboxFix =
  "install bubblewrap and util-linux (Debian/Ubuntu: `apt-get install bubblewrap util-linux`; it needs unprivileged user namespaces and seccomp); as root, give the workspace to an unprivileged user; or, knowing that processes then run unconfined as the server's user, set PEERGATE_SANDBOX=none";

export async function prepareSandbox(options: {
  readonly kind: SandboxKind;
  /** Whether the agent's tools can start a process for a run (tools/starts-processes.ts). */
  readonly processTools: boolean;
  readonly logger: Logger;
  /** peergate's data directory: the backend never binds it into a sandbox. */
  readonly dataDir?: string;
  /** The workspace: the probe runs there (a root server runs commands as its owner). */
  readonly workspace?: string;
  /** For tests: the backend to use instead of the one `kind` names. */
  readonly backend?: SandboxBackend;
  readonly probe?: (backend: SandboxBackend) => Promise<SandboxProbe>;
}): Promise<{ backend: SandboxBackend; status: SandboxStatus }> {
  const backend =
    options.backend ??
    createSandboxBackend(
      options.kind,
      options.dataDir === undefined ? {} : { dataDir: options.dataDir },
    );
  const needed = options.processTools;
  if (backend.kind === "none") {
    options.logger.warn(
      "PEERGATE_SANDBOX=none: processes started for runs are NOT confined (they run as this server's user and can read its files, environment and network)",
      { processTools: needed },
    );
    return {
      backend,
      status: { ok: true, detail: "none: processes run unconfined (PEERGATE_SANDBOX=none)" },
    };
  }
  const probe = options.probe
    ? await options.probe(backend)
    : await probeSandbox(
        backend,
        options.workspace === undefined ? {} : { workspace: options.workspace },
      );
  if (probe.ok) {
    options.logger.info("sandbox ready", { backend: backend.kind });
    return { backend, status: { ok: true, detail: `${backend.kind}: works` } };
  }
  if (needed) {
    throw new ConfigError(
      [
        {
          field: "PEERGATE_SANDBOX",
          value: backend.kind,
          message: `PEERGATE_SANDBOX=${backend.kind}: the agent can start processes (execute_command, a declared command tool or a stdio MCP server), but the sandbox does not work here: ${probe.problem}. Fix: ${sandboxFix}`,
        },
      ],
      "peergate cannot start: processes cannot be confined",
    );
  }
  options.logger.warn("the sandbox does not work here; no tool starts processes, so that is fine", {
    backend: backend.kind,
    problem: probe.problem,
  });
  return {
    backend,
    status: {
      ok: true,
      detail: `${backend.kind}: not working (${probe.problem}); not needed, no tool starts processes`,
    },
  };
}
