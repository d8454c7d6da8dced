// Start-up check that a backend really confines: run `true` through it, as a tool would, and
// see it exit 0. bubblewrap can be installed and still fail (no user namespaces in a container,
// a missing prlimit or setpriv, a kernel without seccomp, a root server whose workspace is
// root's), and finding that out on the first tool call would be too late. It runs in the real
// workspace when there is one (a root server runs commands as its owner), else in a temp one.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  defaultSandboxLimits,
  type SandboxBackend,
  type SandboxCommand,
  type SandboxProbe,
} from "./types.ts";

export async function probeSandbox(
  backend: SandboxBackend,
  {
    timeoutMs = 10_000,
    workspace: given,
  }: {
    timeoutMs?: number;
    /** The server's workspace; a root server's probe needs it even when it does not exist. */
    workspace?: string;
  } = {},
): Promise<SandboxProbe> {
  const temporary =
    given === undefined || (!existsSync(given) && process.geteuid?.() !== 0)
      ? await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-probe-")))
      : undefined;
  const workspace = temporary ?? (await realpath(given as string).catch(() => given as string));
  try {
    let command: SandboxCommand;
    try {
      command = backend.wrap({
        argv: ["true"],
        workspace,
        cwd: workspace,
        env: { PATH: "/usr/bin:/bin" },
        egress: false,
        limits: defaultSandboxLimits,
      });
    } catch (error) {
      // The backend refuses every command here (a root server without a pids cgroup).
      const detail = (error as { detail?: unknown }).detail;
      return { ok: false, problem: typeof detail === "string" ? detail : (error as Error).message };
    }
    return await new Promise<SandboxProbe>((resolve) => {
      let stderr = "";
      const child = spawn(command.command, [...command.args], {
        cwd: command.cwd,
        env: command.env,
        stdio: ["ignore", "ignore", "pipe"],
        timeout: timeoutMs,
      });
      child.stderr.on("data", (chunk: Buffer) => {
        if (stderr.length < 2000) stderr += chunk.toString("utf8");
      });
      child.on("error", (error: NodeJS.ErrnoException) =>
        resolve({ ok: false, problem: `${command.command} could not be started (${error.code})` }),
      );
      child.on("close", (code, signal) => {
        if (code === 0) resolve({ ok: true });
        else {
          const why = stderr.trim() || (signal ? `killed by ${signal}` : `exit code ${code}`);
          resolve({ ok: false, problem: `running \`true\` in the sandbox failed: ${why}` });
        }
      });
    });
  } finally {
    if (temporary !== undefined) await rm(temporary, { recursive: true, force: true });
  }
}
