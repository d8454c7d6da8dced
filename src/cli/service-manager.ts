// Readiness for systemd (`Type=notify`, docs/peergate.service). When the service manager started
// peergate with NOTIFY_SOCKET set, peergate says READY=1 once it serves requests (database
// migrated, sandbox probed, listening) and STOPPING=1 when it begins to stop, so `systemctl start`
// returns when the server answers and dependants start after it, not after the process exists.
//
// Node cannot send on a Unix datagram socket, so `systemd-notify` (shipped with systemd, present
// wherever NOTIFY_SOCKET is) sends the message. It waits until the manager has processed it (a
// barrier), so the sender exiting at once cannot lose the message; the unit says
// `NotifyAccess=all` so a message from this child is accepted. A failure is logged and never
// stops the server: the unit's start timeout then says what happened.
import { spawn } from "node:child_process";
import type { Logger } from "../log.ts";
import type { Env } from "./command.ts";

export type ServiceState = { readonly state: "ready" | "stopping"; readonly status: string };

/** Tells the service manager `state`; resolves when told (or when it could not be). */
export function notifyServiceManager(
  env: Env,
  { state, status }: ServiceState,
  logger: Logger,
): Promise<void> {
  const socket = env.NOTIFY_SOCKET;
  if (!socket) return Promise.resolve();
  const args = [state === "ready" ? "--ready" : "STOPPING=1", `--status=${status}`];
  return new Promise((resolve) => {
    let stderr = "";
    const child = spawn("systemd-notify", args, {
      env: { NOTIFY_SOCKET: socket, PATH: env.PATH ?? "/usr/bin:/bin" },
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 30_000,
    });
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 1000) stderr += chunk.toString("utf8");
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      logger.warn("could not tell the service manager", {
        state,
        problem: `systemd-notify could not be started (${error.code})`,
      });
      resolve();
    });
    child.on("close", (code) => {
      if (code !== 0) {
        logger.warn("could not tell the service manager", {
          state,
          problem: stderr.trim() || `systemd-notify exited with ${code}`,
        });
      }
      resolve();
    });
  });
}
