// The CLI's side of the control socket: one request, one answer. `undefined` means no server is
// listening (no socket file, or one left by a server that is gone), so the caller may open the
// database itself.
import net from "node:net";
import { type ControlRequest, type ControlResponse, controlSocketPath } from "./protocol.ts";

export async function requestControl(
  dataDir: string,
  request: ControlRequest,
  timeoutMs = 10_000,
): Promise<ControlResponse | undefined> {
  const socketPath = controlSocketPath(dataDir);
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    let received = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server's control socket ${socketPath} did not answer`));
    }, timeoutMs);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (error.code === "ENOENT" || error.code === "ECONNREFUSED") resolve(undefined);
      else reject(new Error(`cannot use the control socket ${socketPath}: ${error.message}`));
    });
    socket.on("end", () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(received) as ControlResponse);
      } catch {
        reject(new Error(`the control socket ${socketPath} answered something unreadable`));
      }
    });
  });
}
