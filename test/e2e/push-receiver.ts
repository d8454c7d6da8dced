// A push notification receiver for the e2e tests: an HTTP server on 127.0.0.1 that records every
// request, can answer the next ones with 500, and can hold a request open until released (to
// catch a delivery in flight).
import { once } from "node:events";
import http, { type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ReceivedPush = {
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
  /** What the receiver answered: 200, 500, or 0 for a request it held and never answered. */
  answered: number;
};

export type PushReceiver = {
  url: string;
  /** Base for a URL prefix grant: `http://127.0.0.1:<port>/`. */
  origin: string;
  received: ReceivedPush[];
  /** The next `count` requests get HTTP 500. */
  failNext(count: number): void;
  /** The next request is held open (never answered) until `releaseHeld()`. */
  holdNext(): void;
  releaseHeld(): void;
  close(): Promise<void>;
};

export async function startPushReceiver(): Promise<PushReceiver> {
  const received: ReceivedPush[] = [];
  let failures = 0;
  let hold = false;
  const held: ServerResponse[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const entry: ReceivedPush = { headers: request.headers, body, json, answered: 0 };
      received.push(entry);
      if (hold) {
        hold = false;
        held.push(response);
        return;
      }
      entry.answered = failures > 0 ? 500 : 200;
      if (failures > 0) failures -= 1;
      response.writeHead(entry.answered, { "content-type": "text/plain" }).end("ok");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}/`;
  return {
    url: `${origin}hooks/a2a`,
    origin,
    received,
    failNext: (count) => {
      failures = count;
    },
    holdNext: () => {
      hold = true;
    },
    releaseHeld: () => {
      for (const response of held.splice(0)) response.destroy();
    },
    async close() {
      for (const response of held.splice(0)) response.destroy();
      server.closeAllConnections();
      server.close();
      if (server.listening) await once(server, "close");
    },
  };
}

/** The task a 1.0 (`{"task": …}`) or v0.3 (Task with `kind`) push body carries. */
export function readPushedTask(push: ReceivedPush): { id: string; state: string } {
  const task = push.json?.task ?? push.json;
  return { id: String(task?.id), state: String(task?.status?.state) };
}

const terminal = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "completed",
  "failed",
  "canceled",
]);

export function isTerminalPush(push: ReceivedPush): boolean {
  return terminal.has(readPushedTask(push).state);
}
