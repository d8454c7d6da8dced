// The unauthenticated path, attacked through the real server: the failed-authentication throttle
// never refuses a request whose credential verifies (neither by name nor behind a shared
// address), the body of an unknown name or a throttled source is not read past a small limit,
// and an answer sent before the body was read leaves the connection in a state a client can use.
//
// Each attacker and each good caller connects from its own loopback address (127.0.0.0/8 is all
// local on Linux), so "the same address" and "another address" are real TCP sources.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signGithub } from "./routes.ts";
import { type SecurityServer, startSecurityServer } from "./support.ts";

const maxFailures = 5;
let s: SecurityServer;
let githubSecret = "";
let hookToken = "";
let peerToken = "";
let counter = 0;

beforeAll(async () => {
  s = await startSecurityServer({ authThrottle: { maxFailures, windowMs: 600_000 } });
  const add = async (input: Record<string, unknown>) => {
    const reply = await s.admin("POST", "/callers", input);
    if (reply.status !== 201) throw new Error(`add caller: ${reply.status} ${reply.text}`);
    return reply.json.credential.secret as string;
  };
  githubSecret = await add({ name: "repo", kind: "github", promptTemplate: "{{payload}}" });
  hookToken = await add({ name: "ci", kind: "webhook", promptTemplate: "{{payload}}" });
  peerToken = await add({ name: "alice", kind: "peer" });
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

type Answer = { status: number; head: string; body: string };

/** Parses one HTTP/1.1 response with a Content-Length from the start of `text`, if complete. */
function parseAnswer(text: string): { answer: Answer; rest: string } | undefined {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const head = text.slice(0, end);
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? "0");
  const bodyEnd = end + 4 + length;
  if (Buffer.byteLength(text.slice(end + 4)) < length) return undefined;
  return {
    answer: {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
      head,
      body: text.slice(end + 4, bodyEnd),
    },
    rest: text.slice(bodyEnd),
  };
}

/**
 * A raw keep-alive connection from `localAddress`: `request` writes bytes and resolves with the
 * next whole response; `closed` resolves once the server has ended the connection ("end" for a
 * clean close, "reset" for an error).
 */
async function connect(localAddress: string) {
  const socket = net.connect({ host: "127.0.0.1", port: s.port, localAddress });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let buffered = "";
  let waiter: (() => void) | undefined;
  let ended: "end" | "reset" | undefined;
  const closed = new Promise<"end" | "reset">((resolve) => {
    socket.on("end", () => {
      ended ??= "end";
      resolve(ended);
    });
    socket.on("error", () => {
      ended ??= "reset";
      resolve(ended);
    });
    socket.on("close", () => resolve(ended ?? "end"));
  });
  socket.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("latin1");
    waiter?.();
  });
  socket.on("close", () => waiter?.());
  const next = () =>
    new Promise<Answer>((resolve, reject) => {
      const check = () => {
        const parsed = parseAnswer(buffered);
        if (parsed) {
          buffered = parsed.rest;
          waiter = undefined;
          resolve(parsed.answer);
        } else if (socket.destroyed || socket.readableEnded) {
          reject(new Error(`connection closed before a whole response: ${buffered.slice(0, 200)}`));
        }
      };
      waiter = check;
      check();
    });
  return {
    socket,
    closed,
    /** Writes `bytes` (if any) and waits for the next response. */
    request(bytes?: string | Buffer): Promise<Answer> {
      if (bytes !== undefined) socket.write(bytes);
      return next();
    },
  };
}

function requestText(
  method: string,
  path: string,
  headers: Record<string, string>,
  body = "",
): string {
  const lines = [`${method} ${path} HTTP/1.1`, "Host: 127.0.0.1", "Connection: keep-alive"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== "" || method === "POST") lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

/** One request on its own connection from `localAddress`. */
async function once(
  localAddress: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body = "",
): Promise<Answer> {
  const c = await connect(localAddress);
  try {
    return await c.request(requestText(method, path, headers, body));
  } finally {
    c.socket.destroy();
  }
}

const githubDelivery = (localAddress: string, body: string, signature: string) =>
  once(
    localAddress,
    "POST",
    "/webhooks/github/repo",
    {
      "content-type": "application/json",
      "x-github-event": "issues",
      "x-github-delivery": `d-${++counter}`,
      "x-hub-signature-256": signature,
    },
    body,
  );

const issueBody = () => JSON.stringify({ action: "opened", n: ++counter });
const retryAfterOf = (a: Answer) => Number(/\r\nretry-after: *(\d+)/i.exec(a.head)?.[1] ?? 0);

describe("the failed-authentication throttle", () => {
  it("a name failed into its limit from many addresses still takes a correctly signed delivery", async () => {
    // Attackers spread over addresses, each below its own limit, fail in the name "repo".
    const statuses: number[] = [];
    for (let i = 0; i < maxFailures * 2; i++) {
      const attacker = `127.0.1.${1 + (i % 3)}`;
      statuses.push((await githubDelivery(attacker, issueBody(), "sha256=00")).status);
    }
    // The first failures are 401; past the name's limit a failure is 429 …
    expect(statuses.slice(0, maxFailures)).toEqual(new Array(maxFailures).fill(401));
    expect(statuses.slice(maxFailures * 2 - 2)).toEqual([429, 429]);
    // … and GitHub's own delivery, signed with the caller's secret, passes.
    const body = issueBody();
    const good = await githubDelivery("127.0.2.1", body, signGithub(githubSecret, body));
    expect(good.status).toBe(202);
    // A bad signature from a fresh address is still throttled by the name.
    const bad = await githubDelivery("127.0.2.2", issueBody(), "sha256=00");
    expect(bad.status).toBe(429);
    expect(retryAfterOf(bad)).toBeGreaterThan(0);
  });

  it("an address past its limit keeps its valid A2A token and webhook token; its guesses get 429", async () => {
    const shared = "127.0.3.1";
    const a2a = (token: string) =>
      once(
        shared,
        "POST",
        "/a2a",
        {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "nope" } }),
      );
    for (let i = 0; i < maxFailures; i++) {
      expect((await a2a(`pg_${"x".repeat(42)}${i}`)).status).toBe(401);
    }
    const guess = await a2a(`pg_${"y".repeat(43)}`);
    expect(guess.status).toBe(429);
    expect(retryAfterOf(guess)).toBeGreaterThan(0);
    const valid = await a2a(peerToken);
    expect(valid.status).toBe(200);
    const hook = await once(
      shared,
      "POST",
      "/webhooks/ci",
      { authorization: `Bearer ${hookToken}` },
      "{}",
    );
    expect(hook.status).toBe(202);
    const admin = await once(shared, "GET", "/admin/v1/callers", {
      authorization: `Bearer ${s.adminToken}`,
    });
    expect(admin.status).toBe(200);
    // Another address is not affected by this one's failures.
    expect(
      (await once("127.0.3.2", "POST", "/webhooks/ci", { authorization: "Bearer pgw_nope" }, "{}"))
        .status,
    ).toBe(401);
  });
});

describe("bodies before authentication", () => {
  /** Sends the head of a request declaring `declared` bytes, then only `sent` of them. */
  const partial = async (
    localAddress: string,
    path: string,
    headers: Record<string, string>,
    declared: number,
    sent: number,
  ) => {
    const c = await connect(localAddress);
    const lines = [`POST ${path} HTTP/1.1`, "Host: 127.0.0.1", `Content-Length: ${declared}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    c.socket.write(`${lines.join("\r\n")}\r\n\r\n`);
    c.socket.write(Buffer.alloc(sent, 0x20));
    // The server answers although most of the body was never sent: it did not wait to read it.
    const answer = await c.request();
    const closed = await c.closed;
    c.socket.destroy();
    return { answer, closed };
  };

  it("a bad bearer or IFTTT secret is answered without waiting for a 900 KiB body", async () => {
    for (const path of ["/webhooks/ci", `/webhooks/ifttt/ci/pgi_${"z".repeat(43)}`]) {
      const { answer, closed } = await partial(
        "127.0.4.1",
        path,
        { authorization: "Bearer pgw_wrong" },
        900 * 1024,
        1024,
      );
      expect(answer.status, path).toBe(401);
      expect(answer.head).toMatch(/\r\nconnection: close/i);
      expect(closed).toBe("end");
    }
  });

  it("an unknown GitHub name is answered without waiting for a 20 MiB body", async () => {
    const { answer, closed } = await partial(
      "127.0.4.2",
      "/webhooks/github/nobody",
      { "x-hub-signature-256": "sha256=00", "x-github-event": "issues" },
      20 * 1024 * 1024,
      1024,
    );
    expect(answer.status).toBe(401);
    expect(answer.head).toMatch(/\r\nconnection: close/i);
    expect(closed).toBe("end");
  });

  it("a streamed body to an unknown GitHub name is read no further than 64 KiB", async () => {
    const c = await connect("127.0.4.3");
    c.socket.write(
      [
        "POST /webhooks/github/nobody HTTP/1.1",
        "Host: 127.0.0.1",
        "Transfer-Encoding: chunked",
        "X-Hub-Signature-256: sha256=00",
        "",
        "",
      ].join("\r\n"),
    );
    const chunk = Buffer.alloc(80 * 1024, 0x20);
    c.socket.write(`${chunk.length.toString(16)}\r\n`);
    c.socket.write(chunk);
    c.socket.write("\r\n");
    // No last chunk: a server reading to the end would never answer.
    const answer = await c.request();
    expect(answer.status).toBe(401);
    expect(answer.head).toMatch(/\r\nconnection: close/i);
    c.socket.destroy();
  });

  it("a throttled source cannot make the server read a large body for a known name, but its small signed delivery passes", async () => {
    const source = "127.0.4.4";
    for (let i = 0; i < maxFailures; i++) {
      await once(source, "POST", "/webhooks/ci", { authorization: "Bearer pgw_wrong" }, "{}");
    }
    const { answer } = await partial(
      source,
      "/webhooks/github/repo",
      { "x-hub-signature-256": "sha256=00", "x-github-event": "issues" },
      10 * 1024 * 1024,
      1024,
    );
    expect(answer.status).toBe(429);
    const body = issueBody();
    expect((await githubDelivery(source, body, signGithub(githubSecret, body))).status).toBe(202);
  });
});

describe("answers sent before the body was read", () => {
  it("a 413 says Connection: close and the server ends the connection cleanly", async () => {
    const c = await connect("127.0.5.1");
    const big = "x".repeat(2 * 1024 * 1024);
    const first = await c.request(
      requestText("POST", "/webhooks/ci", { authorization: `Bearer ${hookToken}` }, big),
    );
    expect(first.status).toBe(413);
    expect(first.head).toMatch(/\r\nconnection: close/i);
    expect(await c.closed).toBe("end");
    c.socket.destroy();
  });

  it("a 401 to a small body keeps the connection, and the next request on it is answered", async () => {
    const c = await connect("127.0.5.2");
    const first = await c.request(
      requestText("POST", "/webhooks/stranger", { authorization: "Bearer pgw_wrong" }, `{"a":1}`),
    );
    expect(first.status).toBe(401);
    expect(first.head).not.toMatch(/\r\nconnection: close/i);
    const second = await c.request(requestText("GET", "/healthz", {}));
    expect(second.status).toBe(200);
    const third = await c.request(
      requestText("POST", "/webhooks/ci", { authorization: `Bearer ${hookToken}` }, '{"b":2}'),
    );
    expect(third.status).toBe(202);
    c.socket.destroy();
  });
});

describe("the audit trail under a flood of failures", () => {
  it("gets one summary for the source, written when asked to (or when the window closes), not one event per failure", async () => {
    const source = "127.0.6.1";
    const countEvents = async () =>
      (await s.admin("GET", "/audit?kind=auth.failed&limit=500")).json.events.filter(
        (e: { data: { source?: string } }) => e.data.source === source,
      );
    const c = await connect(source);
    const rpc = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } });
    const statuses = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const a = await c.request(
        requestText(
          "POST",
          "/a2a",
          {
            authorization: `Bearer pg_${String(i).padStart(43, "g")}`,
            "content-type": "application/json",
          },
          rpc,
        ),
      );
      statuses.add(a.status);
    }
    const tokenAsName = `pgw_${"s".repeat(43)}`;
    await c.request(
      requestText("POST", `/webhooks/${tokenAsName}`, { authorization: "Bearer pgw_x" }, "{}"),
    );
    c.socket.destroy();
    expect([...statuses].sort()).toEqual([401, 429]);
    expect(await countEvents()).toEqual([]);

    await s.server.services.authFailures?.flushAll();
    const events = await countEvents();
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({
      source,
      count: 201,
      surfaces: { a2a: 200, webhook: 1 },
      credentialKinds: { "peer-token": 200, "webhook-token": 1 },
      claimedNames: { [`(not recorded: ${tokenAsName.length} characters)`]: 1 },
    });
    expect(JSON.stringify(events[0])).not.toContain(tokenAsName);
    expect(Date.parse(events[0].data.last)).toBeGreaterThanOrEqual(
      Date.parse(events[0].data.first),
    );
  });
});
