// The admin API attacked: every way of presenting a wrong credential gets the same 401 (and the
// real reason lands in the audit trail); browsers, query-string tokens and guessing are refused.
import { afterEach, beforeEach, expect, it } from "vitest";
import { createRateLimiter } from "../../src/auth/rate-limit.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { adminRequest, createTestApp, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

describeEachDatabase("admin API under attack", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database, {
      limiter: createRateLimiter({ maxFailures: 12, windowMs: 60_000 }),
    });
  });
  afterEach(() => app.close());

  const get = (headers: Record<string, string>, path = "/admin/v1/callers") =>
    Promise.resolve(app.hono.request(path, { headers }));

  it("answers every wrong credential with one identical 401", async () => {
    const peer = (await (
      await adminRequest(app, "POST", "/callers", { name: "alice", kind: "peer" })
    ).json()) as any;
    const operator = await createOperatorToken({ services: app.services, actor: "cli:test" });
    const attempts: Record<string, Record<string, string>> = {
      missing: {},
      empty: { authorization: "" },
      malformed: { authorization: `Bearer${app.adminToken}` },
      basic: {
        authorization: `Basic ${Buffer.from(`admin:${app.adminToken}`).toString("base64")}`,
      },
      doubled: { authorization: `Bearer ${app.adminToken}, Bearer ${app.adminToken}` },
      truncated: { authorization: `Bearer ${app.adminToken.slice(0, -1)}` },
      peerToken: { authorization: `Bearer ${peer.credential.secret}` },
      operatorToken: { authorization: `Bearer ${operator}` },
    };
    const bodies = new Set<string>();
    for (const [name, headers] of Object.entries(attempts)) {
      const res = await get(headers);
      expect(res.status, name).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="peergate"');
      const body = (await res.json()) as any;
      delete body.requestId;
      bodies.add(JSON.stringify(body));
    }
    expect(bodies.size).toBe(1);
    // The scheme is case-insensitive (RFC 7235), so a lowercase one is simply accepted.
    expect((await get({ authorization: `bearer ${app.adminToken}` })).status).toBe(200);
    const audit = (await (
      await adminRequest(app, "GET", "/audit?kind=auth.failed&limit=100")
    ).json()) as any;
    const reasons = audit.events.map((e: any) => e.data.reason).sort();
    expect(reasons).toEqual(
      [
        "admin-authorization-empty",
        "admin-authorization-malformed",
        "admin-authorization-malformed",
        "admin-authorization-missing",
        "admin-authorization-not-bearer",
        "admin-token-wrong",
        "admin-token-wrong",
        "admin-token-wrong",
      ].sort(),
    );
    expect(JSON.stringify(audit)).not.toContain(app.adminToken);
  });

  it("refuses a browser Origin and a token in the query string before looking at credentials", async () => {
    const origin = await get({
      authorization: `Bearer ${app.adminToken}`,
      origin: "https://evil.example",
    });
    expect(origin.status).toBe(403);
    const query = await get({}, `/admin/v1/callers?token=${app.adminToken}`);
    expect(query.status).toBe(400);
    expect(await query.text()).not.toContain(app.adminToken);
  });

  it("throttles guessing: past the limit, 429 with Retry-After for a wrong token, never for the right one", async () => {
    for (let i = 0; i < 12; i++) {
      expect((await get({ authorization: `Bearer pga_guess${i}` })).status).toBe(401);
    }
    // Throttle the failures, not the good requests: the right token still passes.
    expect((await get({ authorization: `Bearer ${app.adminToken}` })).status).toBe(200);
    const limited = await get({ authorization: "Bearer pga_guess-past-the-limit" });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await limited.json()) as any).toMatchObject({ code: "rate-limited" });
  });

  it("does not answer HEAD, OPTIONS or a method override with data", async () => {
    const head = await app.hono.request("/admin/v1/callers", { method: "HEAD" });
    expect(head.status).toBe(401);
    const options = await app.hono.request("/admin/v1/callers", { method: "OPTIONS" });
    expect([401, 404]).toContain(options.status);
    const override = await app.hono.request("/admin/v1/callers/alice", {
      method: "POST",
      headers: { "x-http-method-override": "DELETE", authorization: "Bearer nope" },
    });
    expect(override.status).toBe(401);
  });
});
