// The admin API's contract: the OpenAPI document is public, valid OpenAPI 3.1, holds no secret,
// and lists every admin route the real server serves (a route mounted without a schema fails).
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminApi } from "../../src/http/routes/admin-api.ts";
import { type SecurityServer, send, startSecurityServer } from "../security/support.ts";

let s: SecurityServer;
beforeAll(async () => {
  s = await startSecurityServer();
});
afterAll(() => s?.stop());

/** `/admin/v1/callers/:name` → `/callers/{name}`, as the document's paths are relative to the server URL. */
const documentPath = (served: string) =>
  served.replace(/^\/admin\/v1/, "").replace(/:(\w+)/g, "{$1}");

const fetchDocument = async () => {
  const reply = await send(s.port, { method: "GET", path: "/admin/v1/openapi.json" });
  expect(reply.status).toBe(200);
  return { reply, doc: JSON.parse(reply.text) };
};

describe("GET /admin/v1/openapi.json", () => {
  it("answers without credentials, and validates against the OpenAPI 3.1 schema", async () => {
    const { doc } = await fetchDocument();
    expect(doc.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("documents every admin route the server serves, with a request and a response schema", async () => {
    const { doc } = await fetchDocument();
    const served = s.server.hono.routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/admin/v1/"))
      .map((r) => `${r.method.toLowerCase()} ${documentPath(r.path)}`)
      .filter((r) => r !== "get /openapi.json");
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, item]) => Object.keys(item).map((method) => `${method} ${path}`),
    );
    expect(served.length).toBeGreaterThan(15);
    expect(
      served.filter((r) => !documented.includes(r)),
      "served without a schema",
    ).toEqual([]);
    expect(
      documented.filter((r) => !served.includes(r)),
      "documented but not served",
    ).toEqual([]);
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(item)) {
        const ok = op.responses["200"] ?? op.responses["201"] ?? op.responses["202"];
        expect(ok?.content, `${method} ${path} has a success schema`).toBeDefined();
        const body = Object.values(ok.content as Record<string, { schema?: unknown }>)[0];
        expect(body?.schema, `${method} ${path}`).toBeDefined();
        // Cancel and retry name their run in the path and take no body.
        const takesBody = ["post", "patch"].includes(method) && !/\/(cancel|retry)$/.test(path);
        if (takesBody) {
          expect(
            op.requestBody?.content?.["application/json"]?.schema,
            `${method} ${path}`,
          ).toBeDefined();
        }
      }
    }
  });

  it("documents the services' own request fields and messages (one source of truth)", async () => {
    const { doc } = await fetchDocument();
    const create = doc.paths["/callers"].post.requestBody.content["application/json"].schema;
    const props =
      create.properties ?? doc.components?.schemas?.[create.$ref?.split("/").pop()]?.properties;
    expect(Object.keys(props)).toEqual(
      expect.arrayContaining(["name", "kind", "tier", "allow", "approvalPolicy", "budgets"]),
    );
    expect(doc.paths["/runs"].get.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(["caller", "status", "limit", "before"]),
    );
    expect(Object.keys(adminApi).length).toBeGreaterThan(15);
  });

  it("holds no secret: not the admin token, nor anything it was served with", async () => {
    const { reply } = await fetchDocument();
    expect(reply.text).not.toContain(s.adminToken);
    expect(reply.text).not.toMatch(/pg[a-z]?_[A-Za-z0-9_-]{30,}/);
  });

  it("still refuses every other admin route without the admin token", async () => {
    const reply = await send(s.port, { method: "GET", path: "/admin/v1/callers" });
    expect(reply.status).toBe(401);
  });
});
