import { afterEach, beforeEach, expect, it } from "vitest";
import { adminRequest, createTestApp, operatorRequest, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

type Json = Record<string, any>;

describeEachDatabase("admin API: bad input", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database);
  });
  afterEach(() => app.close());

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await adminRequest(app, method, path, body);
    return { status: res.status, body: (await res.json()) as Json };
  };

  it("names every bad field, its value and what is expected", async () => {
    const res = await call("POST", "/callers", {
      name: "Bad Name",
      kind: "robot",
      tier: "none",
      allow: ["ok", "bad name"],
      budgets: { steps: -1 },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid-input");
    const fields = (res.body.problems as Json[]).map((p) => p.field).sort();
    expect(fields).toEqual(["allow.1", "budgets.steps", "kind", "name", "tier"]);
    const message = JSON.stringify(res.body.problems);
    expect(message).toContain('name: got \\"Bad Name\\"');
    expect(message).toContain(
      'kind: got \\"robot\\"; expected one of peer, github, ifttt, webhook',
    );
  });

  it("refuses unknown fields rather than ignoring them", async () => {
    const res = await call("POST", "/callers", {
      name: "a",
      kind: "peer",
      tier: "public",
      admin: true,
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body.problems)).toContain("unknown field(s) admin");
  });

  it("enforces the rules of each kind", async () => {
    const noTemplate = await call("POST", "/callers", { name: "gh", kind: "github" });
    expect(noTemplate.status).toBe(400);
    expect(noTemplate.body.detail).toContain("promptTemplate");
    const peerTemplate = await call("POST", "/callers", {
      name: "p",
      kind: "peer",
      promptTemplate: "x",
    });
    expect(peerTemplate.status).toBe(400);
    const jwtWithSecret = await call("POST", "/callers", {
      name: "p",
      kind: "peer",
      jwt: {
        issuer: "i",
        audience: "a",
        algorithms: ["HS256"],
        jwk: { kty: "oct", k: "c2VjcmV0" },
      },
    });
    expect(jwtWithSecret.status).toBe(400);
    expect(JSON.stringify(jwtWithSecret.body.problems)).toContain("jwt.algorithms.0");
  });

  it("answers a duplicate name with 409 and an unknown name with 404", async () => {
    expect((await call("POST", "/callers", { name: "a", kind: "peer" })).status).toBe(201);
    const again = await call("POST", "/callers", { name: "a", kind: "peer" });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe("conflict");
    expect((await call("GET", "/callers/nobody")).status).toBe(404);
    expect((await call("POST", "/callers/nobody/revoke")).status).toBe(404);
  });

  it("refuses a stale compare-and-set version", async () => {
    await call("POST", "/callers", { name: "a", kind: "peer" });
    const operate = async (method: string, path: string, body?: unknown) => {
      const res = await operatorRequest(app, method, path, body);
      return { status: res.status, body: (await res.json()) as Json };
    };
    await operate("PATCH", "/callers/a", { allow: ["x"] });
    const stale = await operate("PATCH", "/callers/a", { allow: ["y"], expectedVersion: 1 });
    expect(stale.status).toBe(409);
    expect(stale.body.detail).toContain("version 2, not 1");
  });

  it("requires JSON bodies to be application/json, valid, and without repeated keys", async () => {
    const send = (body: string, type = "application/json") =>
      app.hono.request("/admin/v1/callers", {
        method: "POST",
        headers: { authorization: `Bearer ${app.adminToken}`, "content-type": type },
        body,
      });
    expect((await send('{"name":"a","kind":"peer"}', "text/plain")).status).toBe(415);
    expect((await send('{"name":"a",')).status).toBe(400);
    const dup = await send('{"name":"a","kind":"peer","tier":"public","tier":"private"}');
    expect(dup.status).toBe(400);
    expect(await dup.text()).toContain("repeats the key");
    const proto = await send('{"name":"a","kind":"peer","__proto__":{"tier":"private"}}');
    expect(proto.status).toBe(400);
    expect((await send("1e400")).status).toBe(400);
  });
});
