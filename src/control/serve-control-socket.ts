// The running server's control socket (see protocol.ts). Served only on the embedded database:
// PGlite admits one process, so while the server runs, `peergate operator-token create` cannot
// open the database and asks the server through this socket instead. With PostgreSQL the CLI
// writes to the database itself and no socket is needed.
//
// The socket is created inside the data directory (0700) and chmod-ed to 0600 before it accepts
// anything. A socket file left by a crashed server is removed first: the caller holds the data
// directory's lock, so no other server can own it.
import fs from "node:fs";
import net from "node:net";
import { ConflictError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { createOperatorToken, hasOperatorToken } from "../services/admin-credentials.ts";
import type { ServiceContext } from "../services/context.ts";
import {
  type ControlResponse,
  controlRequestSchema,
  controlSocketPath,
  controlVerbs,
  maxRequestBytes,
  maxSocketPathBytes,
} from "./protocol.ts";

export type ControlSocket = { path: string; close(): Promise<void> };

/** How long a client may take to send its one line. */
const requestTimeoutMs = 5_000;

export async function serveControlSocket({
  dataDir,
  services,
  logger,
}: {
  dataDir: string;
  services: Pick<ServiceContext, "db" | "now">;
  logger: Logger;
}): Promise<ControlSocket | undefined> {
  const socketPath = controlSocketPath(dataDir);
  if (Buffer.byteLength(socketPath) > maxSocketPathBytes) {
    logger.warn(
      "no control socket: the data directory's path is too long for a Unix socket; `peergate operator-token create` needs the server stopped",
      { path: socketPath },
    );
    return undefined;
  }
  fs.rmSync(socketPath, { force: true });

  const server = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let answered = false;
    socket.setTimeout(requestTimeoutMs, () => socket.destroy());
    const answer = (response: ControlResponse) => {
      answered = true;
      socket.end(`${JSON.stringify(response)}\n`);
    };
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk: Buffer) => {
      if (answered) return;
      buffered = Buffer.concat([buffered, chunk]);
      const newline = buffered.indexOf(0x0a);
      if (newline === -1) {
        if (buffered.length > maxRequestBytes) {
          answer({ ok: false, code: "refused", message: "not a control request" });
        }
        return;
      }
      const line = buffered.subarray(0, newline).toString("utf8");
      handle(line, services)
        .then(answer)
        .catch((error: unknown) => {
          logger.error("control request failed", { error });
          answer({ ok: false, code: "failed", message: "the request failed; see the server log" });
        });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // Owner-only before anything can matter; the directory (0700) already keeps others out.
  fs.chmodSync(socketPath, 0o600);
  logger.info("control socket", { path: socketPath });

  return {
    path: socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        fs.rmSync(socketPath, { force: true });
      }),
  };
}

async function handle(
  line: string,
  services: Pick<ServiceContext, "db" | "now">,
): Promise<ControlResponse> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return { ok: false, code: "refused", message: "not a control request" };
  }
  const request = controlRequestSchema.safeParse(parsed);
  if (!request.success) {
    return {
      ok: false,
      code: "refused",
      message: `not a control request; this socket answers only: ${controlVerbs.join(", ")}`,
    };
  }
  const data = request.data;
  if (data.verb === "ping") return { ok: true, verb: "ping", pid: process.pid };
  const replaced = await hasOperatorToken(services.db);
  try {
    const operatorToken = await createOperatorToken({
      services,
      actor: `cli:${data.user ?? "operator"}`,
      replace: data.force,
    });
    return { ok: true, verb: "operator-token.create", operatorToken, replaced };
  } catch (error) {
    if (error instanceof ConflictError)
      return { ok: false, code: "exists", message: error.message };
    throw error;
  }
}
