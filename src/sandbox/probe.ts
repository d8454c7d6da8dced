// Start-up check that a backend really confines: run `true` through it, as a tool would, and
// see it exit 0. bubblewrap can be installed and still fail (no user namespaces in a container,
// a missing prlimit), and finding that out on the first tool call would be too late.
import { spawn } from "node:child_process";
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
  { timeoutMs = 10_000 }: { timeoutMs?: number } = {},
): Promise<SandboxProbe> {
  const workspace = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-probe-")));
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
    await rm(workspace, { recursive: true, force: true });
  }
}
