// The console's one relaxation of the browser-Origin refusal, attacked through the real server:
// only the server's own host, only with an Authorization header, only on the admin routes; a
// cross-site fetch, a foreign page, a missing or wrong token and /a2a stay refused. And the page
// itself forbids inline script and framing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SecurityServer, send, startSecurityServer } from "../security/support.ts";

let s: SecurityServer;
let own: string;
let peerSecret: string;
beforeAll(async () => {
  s = await startSecurityServer();
  own = `http://127.0.0.1:${s.port}`;
  const made = await s.admin("POST", "/callers", { name: "origin-peer", kind: "peer" });
  peerSecret = made.json.credential.secret;
});
afterAll(() => s?.stop());

const callers = (headers: Record<string, string>) =>
  send(s.port, { method: "GET", path: "/admin/v1/callers", headers });

describe("the browser Origin on admin routes", () => {
  it("passes the console's own origin with the admin token", async () => {
    const reply = await callers({
      origin: own,
      "sec-fetch-site": "same-origin",
      authorization: `Bearer ${s.adminToken}`,
    });
    expect(reply.status, reply.text).toBe(200);
  });

  it("refuses its own origin without a token, and with a wrong one", async () => {
    expect((await callers({ origin: own })).status).toBe(403);
    expect((await callers({ origin: own, authorization: "Bearer pga_wrong" })).status).toBe(401);
  });

  it("refuses a foreign page even with the admin token", async () => {
    for (const origin of [
      "https://evil.example",
      `http://127.0.0.1:${s.port + 1}`,
      `http://localhost:${s.port}`,
      "null",
    ]) {
      const reply = await callers({ origin, authorization: `Bearer ${s.adminToken}` });
      expect(reply.status, origin).toBe(403);
    }
  });

  it("refuses its own origin when the browser says the fetch is cross-site", async () => {
    const reply = await callers({
      origin: own,
      "sec-fetch-site": "cross-site",
      authorization: `Bearer ${s.adminToken}`,
    });
    expect(reply.status).toBe(403);
  });

  it("does not relax /a2a at all", async () => {
    const reply = await send(s.port, {
      method: "POST",
      path: "/a2a",
      headers: {
        origin: own,
        authorization: `Bearer ${peerSecret}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
    });
    expect(reply.status).toBe(403);
  });
});

describe("the console page", () => {
  it("is served with a policy that allows no inline script, no other origin, no framing", async () => {
    const reply = await send(s.port, { method: "GET", path: "/console" });
    expect(reply.status).toBe(200);
    const csp = String(reply.headers["content-security-policy"]);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(reply.headers["set-cookie"]).toBeUndefined();
    expect(reply.text).not.toContain(s.adminToken);
    const script = await send(s.port, { method: "GET", path: "/console/console.js" });
    expect(script.headers["content-type"]).toMatch(/^text\/javascript/);
    expect(script.text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });
});
