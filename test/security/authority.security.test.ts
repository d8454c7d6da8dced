// Attacking the two keys on a real server on the embedded database. The attacker is a caller's
// process that can read what a tool could read on this machine — the admin token in
// `<data dir>/admin-token` — but not the operator token, which peergate never writes to a file.
// With that it must not be able to widen any caller, mint an operator token over HTTP, or get one
// out of the control socket by speaking HTTP to it.
import fs from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { controlSocketPath } from "../../src/control/protocol.ts";
import { requestControl } from "../../src/control/request-control.ts";
import { createLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { hasOperatorToken } from "../../src/services/admin-credentials.ts";
import { repoPoliciesDir } from "../support/app.ts";

/** Sends raw bytes to a Unix socket or TCP port and returns everything it answers. */
function exchange(target: net.NetConnectOpts, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(target);
    let received = "";
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(received));
  });
}

describe("authority on a real server (embedded database)", () => {
  let dir: string;
  let dataDir: string;
  let server: RunningServer;
  let stolenAdminToken: string;
  const admin = async (method: string, pathname: string, body?: unknown, token?: string) => {
    const res = await fetch(`${server.url}/admin/v1${pathname}`, {
      method,
      headers: {
        authorization: `Bearer ${stolenAdminToken}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...(token ? { "x-peergate-operator-token": token } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "pg-auth-"));
    dataDir = path.join(dir, "d");
    const env = {
      PEERGATE_DATA_DIR: dataDir,
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_HOST: "127.0.0.1",
      PEERGATE_PORT: "0",
    };
    server = await startServer(
      loadConfig(env, dir),
      createLogger({ level: "silent", write: () => {} }),
    );
    // What an unconfined command could do: read the generated admin token next to the database.
    stolenAdminToken = (await readFile(path.join(dataDir, "admin-token"), "utf8")).trim();
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("the stolen admin token creates a caller at the floor, and widens nothing", async () => {
    const created = await admin("POST", "/callers", { name: "mole", kind: "peer" });
    expect(created.status).toBe(201);
    const before = (await admin("GET", "/callers/mole")).body.caller;
    const attempts: [string, string, unknown][] = [
      ["PATCH", "/callers/mole", { tier: "private" }],
      ["PATCH", "/callers/mole", { allow: ["execute_command", "write_file"] }],
      ["PATCH", "/callers/mole", { approvalPolicy: "auto", allow: ["write_file"] }],
      ["PATCH", "/callers/mole", { budgets: {} }],
      ["PATCH", "/callers/mole", { budgets: { ...before.budgets, daily: {} } }],
      ["POST", "/callers", { name: "mole-2", kind: "peer", allow: ["execute_command"] }],
      ["POST", "/callers", { name: "mole-3", kind: "peer", tier: "private" }],
      ["POST", "/callers", { name: "mole-4", kind: "peer", budgets: { costUsd: 1_000_000 } }],
    ];
    for (const [method, pathname, body] of attempts) {
      const res = await admin(method, pathname, body);
      expect(res.status, `${method} ${pathname} ${JSON.stringify(body)}`).toBe(403);
      expect(res.body.code).toBe("operator-token-required");
    }
    // A guessed operator token is a failed login, not a way in.
    const guessed = await admin("PATCH", "/callers/mole", { tier: "private" }, "pgo_guess");
    expect(guessed.status).toBe(401);
    expect((await admin("GET", "/callers/mole")).body.caller).toEqual(before);
    const listed = (await admin("GET", "/callers")).body.callers.map((c: any) => c.name);
    expect(listed).toEqual(["mole"]);
  });

  it("no HTTP route mints an operator token, whatever it is called", async () => {
    for (const pathname of [
      "/operator-token",
      "/operator-tokens",
      "/operator-token/create",
      "/control",
      "/tokens/operator",
    ]) {
      const res = await admin("POST", pathname, { force: true });
      expect(res.status, pathname).toBe(404);
    }
    expect(server.hono.routes.some((r) => /operator|control/i.test(r.path))).toBe(false);
    // The control protocol sent to the HTTP port is just a bad HTTP request.
    const port = Number(new URL(server.url).port);
    const answer = await exchange(
      { host: "127.0.0.1", port },
      `${JSON.stringify({ verb: "operator-token.create", force: true })}\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).not.toContain("pgo_");
    expect(await hasOperatorToken(server.database.db)).toBe(false);
  });

  it("the control socket is owner-only in an owner-only directory", () => {
    const socket = fs.statSync(controlSocketPath(dataDir));
    expect(socket.isSocket()).toBe(true);
    expect(socket.mode & 0o777).toBe(0o600);
    expect(fs.statSync(dataDir).mode & 0o777).toBe(0o700);
  });

  it("the control socket answers only its verbs: HTTP and anything else are refused, nothing minted", async () => {
    const target = { path: controlSocketPath(dataDir) };
    const attempts = [
      // An HTTP request, even one whose body is a valid control request.
      `POST /operator-token.create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n${JSON.stringify({ verb: "operator-token.create" })}\n`,
      "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
      `${JSON.stringify({ verb: "operator-token.list" })}\n`,
      `${JSON.stringify({ verb: "admin-token.create" })}\n`,
      `${JSON.stringify({ verb: "operator-token.create", force: true, extra: 1 })}\n`,
      `${JSON.stringify({ verb: "operator-token.create", user: "x\u001b[2J" })}\n`,
      `${JSON.stringify([{ verb: "operator-token.create" }])}\n`,
      `${"x".repeat(4096)}`,
    ];
    for (const bytes of attempts) {
      const answer = await exchange(target, bytes);
      expect(JSON.parse(answer), bytes.slice(0, 60)).toMatchObject({ ok: false, code: "refused" });
      expect(answer).not.toContain("pgo_");
    }
    expect(await hasOperatorToken(server.database.db)).toBe(false);
    expect(await requestControl(dataDir, { verb: "ping" })).toMatchObject({ ok: true });
  });

  it("the operator, with the data directory, mints one through the socket; then widening works", async () => {
    const created = await requestControl(dataDir, { verb: "operator-token.create" });
    if (!created?.ok || created.verb !== "operator-token.create") throw new Error("not created");
    const again = await requestControl(dataDir, { verb: "operator-token.create" });
    expect(again).toMatchObject({ ok: false, code: "exists" });
    const widened = await admin(
      "PATCH",
      "/callers/mole",
      { tier: "private" },
      created.operatorToken,
    );
    expect(widened.status).toBe(200);
    expect(widened.body.caller.tier).toBe("private");
  });
});
