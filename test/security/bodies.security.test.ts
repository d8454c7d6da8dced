// Hostile request bodies against the real server, over raw sockets where node:http would not send
// the request: oversized with and without Content-Length, chunked, both framing headers at once,
// trickled (slowloris); malformed JSON, repeated keys, __proto__/constructor/prototype keys, deep
// nesting, 1e400, wrong types; Unicode confusables in caller and tool names; CR/LF in names.
// Each is refused or read as plain data, changes nothing it should not, and forges no log line.
//
// Proven elsewhere, not repeated: the admin API's 415 and its field-by-field 400s
// (test/http/admin.error.test.ts), the JSON-RPC envelope errors (test/a2a/json-rpc.error.test.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultClientTimeouts } from "../../src/server.ts";
import { expectRefused, recordCase } from "./cases.ts";
import { signGithub } from "./routes.ts";
import {
  exchange,
  type Reply,
  readStateFingerprint,
  type SecurityServer,
  send,
  startSecurityServer,
} from "./support.ts";

let s: SecurityServer;
const secrets = { peer: "", webhook: "", github: "", ifttt: "" };
const limit = 1024 * 1024;

beforeAll(async () => {
  // Short slow-client limits so the slowloris test ends in seconds (production: 10 s / 30 s).
  s = await startSecurityServer({
    clientTimeouts: { headersMs: 1_000, requestMs: 1_500, checkIntervalMs: 100 },
  });
  const add = async (body: Record<string, unknown>) => {
    const res = await s.admin("POST", "/callers", body);
    if (res.status !== 201) throw new Error(res.text);
    return res.json.credential.secret as string;
  };
  secrets.peer = await add({ name: "alice", kind: "peer" });
  secrets.webhook = await add({ name: "ci", kind: "webhook", promptTemplate: "CI: {{payload}}" });
  secrets.github = await add({ name: "repo", kind: "github", promptTemplate: "GH {{payload}}" });
  secrets.ifttt = await add({ name: "phone", kind: "ifttt", promptTemplate: "Note {{payload}}" });
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

const a2a = (body: string) =>
  send(s.port, {
    method: "POST",
    path: "/a2a",
    headers: {
      authorization: `Bearer ${secrets.peer}`,
      "content-type": "application/json",
      "a2a-version": "1.0",
    },
    body,
  });

const iftttPath = () => `/webhooks/ifttt/phone/${secrets.ifttt}`;
const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
const lastChunk = "0\r\n\r\n";
const head = (path: string, headers: string[]) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${headers.join("\r\n")}\r\n\r\n`;

describe("size and framing", () => {
  it("takes a body of exactly the limit, and refuses one byte more, with or without Content-Length", async () => {
    const at = `a${"x".repeat(limit - 1)}`;
    const ok = await send(s.port, {
      method: "POST",
      path: iftttPath(),
      headers: { "content-type": "text/plain" },
      body: at,
    });
    expect(ok.status).toBe(202);
    const before = await readStateFingerprint(s.server);
    const over = `b${"x".repeat(limit)}`;
    const withLength = await send(s.port, {
      method: "POST",
      path: iftttPath(),
      headers: { "content-type": "text/plain" },
      body: over,
    });
    expectRefused("bodies", "limit + 1 byte with Content-Length", withLength.status !== 413);
    const chunked = await exchange(s.port, [
      head(iftttPath(), ["Content-Type: text/plain", "Transfer-Encoding: chunked"]),
      chunk(over),
      lastChunk,
    ]);
    expectRefused("bodies", "limit + 1 byte chunked", chunked.status !== 413);
    expect(await readStateFingerprint(s.server)).toBe(before);
  });

  it("refuses oversized bodies on every surface, however they are framed, before a run starts", async () => {
    const before = await readStateFingerprint(s.server);
    const big = "y".repeat(limit + 512 * 1024);
    const surfaces = [
      { name: "IFTTT (valid secret)", path: iftttPath(), auth: [] as string[] },
      {
        name: "IFTTT (wrong secret)",
        path: `/webhooks/ifttt/phone/pgi_${"Z".repeat(43)}`,
        auth: [],
      },
      { name: "webhook", path: "/webhooks/ci", auth: [`Authorization: Bearer ${secrets.webhook}`] },
      { name: "/a2a", path: "/a2a", auth: [`Authorization: Bearer ${secrets.peer}`] },
      {
        name: "admin API",
        path: "/admin/v1/callers",
        auth: [`Authorization: Bearer ${s.adminToken}`],
      },
    ];
    for (const surface of surfaces) {
      const type = "Content-Type: application/json";
      const cases: { name: string; chunks: string[]; refusedWith: number[] }[] = [
        {
          name: "Content-Length, whole body sent",
          chunks: [
            head(surface.path, [...surface.auth, type, `Content-Length: ${big.length}`]),
            big,
          ],
          refusedWith: [413],
        },
        {
          name: "Content-Length declared, body never sent",
          chunks: [head(surface.path, [...surface.auth, type, `Content-Length: ${big.length}`])],
          refusedWith: [413],
        },
        {
          name: "chunked, one chunk",
          chunks: [
            head(surface.path, [...surface.auth, type, "Transfer-Encoding: chunked"]),
            chunk(big),
            lastChunk,
          ],
          refusedWith: [413],
        },
        {
          name: "chunked, many small chunks",
          chunks: [
            head(surface.path, [...surface.auth, type, "Transfer-Encoding: chunked"]),
            Array.from({ length: 200 }, () => chunk(big.slice(0, 8 * 1024))).join(""),
            lastChunk,
          ],
          refusedWith: [413],
        },
        {
          // Request smuggling's classic: which framing wins? Node refuses the request outright.
          name: "small Content-Length and chunked",
          chunks: [
            head(surface.path, [
              ...surface.auth,
              type,
              "Content-Length: 5",
              "Transfer-Encoding: chunked",
            ]),
            chunk(big),
            lastChunk,
          ],
          refusedWith: [400, 413],
        },
        {
          name: "chunked then a small Content-Length",
          chunks: [
            head(surface.path, [
              ...surface.auth,
              type,
              "Transfer-Encoding: chunked",
              "Content-Length: 5",
            ]),
            chunk(big),
            lastChunk,
          ],
          refusedWith: [400, 413],
        },
        {
          name: "two Content-Length headers",
          chunks: [
            head(surface.path, [
              ...surface.auth,
              type,
              "Content-Length: 5",
              `Content-Length: ${big.length}`,
            ]),
            big,
          ],
          refusedWith: [400, 413],
        },
        {
          name: "Transfer-Encoding other than chunked",
          chunks: [
            head(surface.path, [...surface.auth, type, "Transfer-Encoding: gzip, chunked"]),
            chunk(big),
            lastChunk,
          ],
          refusedWith: [400, 413, 501],
        },
      ];
      for (const c of cases) {
        const reply = await exchange(s.port, c.chunks);
        // An oversized body without valid credentials may be refused as either.
        const refused = surface.name.includes("wrong") ? [...c.refusedWith, 401] : c.refusedWith;
        expectRefused(
          "bodies",
          `${surface.name}: oversized, ${c.name} (→ ${reply.status})`,
          !refused.includes(reply.status),
        );
      }
    }
    // The small body behind both framing headers is refused too: no reading of it is "the" one.
    const ambiguous = await exchange(s.port, [
      head(iftttPath(), [
        "Content-Type: text/plain",
        "Content-Length: 4",
        "Transfer-Encoding: chunked",
      ]),
      chunk("smuggled"),
      lastChunk,
    ]);
    expectRefused("bodies", "small body under both framing headers", ambiguous.status !== 400);
    expect(await readStateFingerprint(s.server)).toBe(before);
  });

  it("GitHub's 25 MB allowance stops at 25 MB, signed or not, framed either way", async () => {
    const before = await readStateFingerprint(s.server);
    const big = JSON.stringify({ action: "opened", pad: "z".repeat(25 * 1024 * 1024) });
    const sig = signGithub(secrets.github, big);
    const headers = [
      "Content-Type: application/json",
      "X-GitHub-Event: issues",
      `X-Hub-Signature-256: ${sig}`,
    ];
    const declared = await exchange(s.port, [
      head("/webhooks/github/repo", [...headers, `Content-Length: ${big.length}`]),
    ]);
    expectRefused("bodies", "GitHub: 25 MB + declared, signed", declared.status !== 413);
    const chunked = await exchange(
      s.port,
      [
        head("/webhooks/github/repo", [...headers, "Transfer-Encoding: chunked"]),
        chunk(big),
        lastChunk,
      ],
      { waitMs: 15_000 },
    );
    expectRefused("bodies", "GitHub: 25 MB + chunked, signed", chunked.status !== 413);
    expect(await readStateFingerprint(s.server)).toBe(before);
  });
});

describe("slow clients", () => {
  it("are cut off at the request timeout: a trickled body gets 408 and a closed connection, and starts nothing", async () => {
    // Production limits are finite and well under Node's 5 minutes.
    expect(defaultClientTimeouts.requestMs).toBeLessThanOrEqual(60_000);
    expect(defaultClientTimeouts.headersMs).toBeLessThanOrEqual(defaultClientTimeouts.requestMs);
    expect(defaultClientTimeouts.checkIntervalMs).toBeLessThanOrEqual(5_000);

    const before = await readStateFingerprint(s.server);
    // 400 chunks 150 ms apart: a minute to finish, so a cut-off is the server's doing however
    // loaded the machine is.
    const trickle = Array.from({ length: 400 }, () => "z");
    const [body, headers] = await Promise.all([
      // A valid secret: the handler is waiting for the body when the clock runs out.
      exchange(
        s.port,
        [head(iftttPath(), ["Content-Type: text/plain", "Content-Length: 1000"]), ...trickle],
        { gapMs: 150, waitMs: 40_000 },
      ),
      // Headers that never end.
      exchange(
        s.port,
        [
          "POST /webhooks/ci HTTP/1.1\r\nHost: 127.0.0.1\r\n",
          ...trickle.map(() => "X-Slow: 1\r\n"),
        ],
        { gapMs: 150, waitMs: 40_000 },
      ),
    ]);
    for (const [name, ex] of [
      ["slow body", body],
      ["slow headers", headers],
    ] as const) {
      // The server ended it with 408 (its 1.5 s limit), long before the trickle (60 s) could
      // finish: a request it waited out would have been answered by the handler instead.
      const held = !ex.closedByServer || ex.status !== 408;
      recordCase("bodies", `${name}: closed after ${Math.round(ex.ms)} ms`, held);
      expect(ex.closedByServer, name).toBe(true);
      expect(ex.status, name).toBe(408);
    }
    expect((await send(s.port, { method: "GET", path: "/healthz" })).status).toBe(200);
    expect(await readStateFingerprint(s.server)).toBe(before);
  }, 60_000);
});

describe("JSON that means something else", () => {
  const admin = (method: string, path: string, body: string, type = "application/json") =>
    send(s.port, {
      method,
      path: `/admin/v1${path}`,
      headers: { authorization: `Bearer ${s.adminToken}`, "content-type": type },
      body,
    });
  const rpcError = (reply: Reply) =>
    (JSON.parse(reply.text) as { error?: { code: number } }).error?.code;

  const deep = (n: number) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;
  const deepArray = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;

  it("refuses malformed JSON, repeated keys, prototype keys, 1e400, deep nesting and wrong types on the admin API", async () => {
    const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const before = await readStateFingerprint(s.server);
    const bodies: Record<string, string> = {
      "truncated JSON": '{"name":"m1","kind":',
      "single quotes": "{'name':'m1','kind':'peer'}",
      "trailing comma": '{"name":"m1","kind":"peer",}',
      NaN: '{"name":"m1","kind":"peer","budgets":{"tokens":NaN}}',
      "a comment": '{"name":"m1",/* x */"kind":"peer"}',
      "repeated name": '{"name":"m1","name":"m2","kind":"peer"}',
      "repeated kind": '{"name":"m1","kind":"peer","kind":"github","promptTemplate":"x"}',
      "repeated tier, the last one wider":
        '{"name":"m1","kind":"peer","tier":"public","tier":"private"}',
      "repeated key, escaped the second time":
        '{"name":"m1","kind":"peer","tier":"public","t\\u0069er":"private"}',
      "__proto__ carrying a tier":
        '{"name":"m1","kind":"peer","__proto__":{"tier":"private","allow":["execute_command"]}}',
      "constructor.prototype":
        '{"name":"m1","kind":"peer","constructor":{"prototype":{"tier":"private"}}}',
      prototype: '{"name":"m1","kind":"peer","prototype":{"tier":"private"}}',
      "__proto__ inside budgets":
        '{"name":"m1","kind":"peer","budgets":{"__proto__":{"tokens":1}}}',
      "1e400 tokens": '{"name":"m1","kind":"peer","budgets":{"tokens":1e400}}',
      "-1e400 cost": '{"name":"m1","kind":"peer","budgets":{"costUsd":-1e400}}',
      "1e-400 steps": '{"name":"m1","kind":"peer","budgets":{"steps":1e-400}}',
      "2^53 + 1 tokens": '{"name":"m1","kind":"peer","budgets":{"tokens":9007199254740993}}',
      "name as a number": '{"name":1,"kind":"peer"}',
      "kind as an array": '{"name":"m1","kind":["peer"]}',
      "tier as an operator object": '{"name":"m1","kind":"peer","tier":{"$ne":null}}',
      "allow as a string": '{"name":"m1","kind":"peer","allow":"execute_command"}',
      "allow of numbers": '{"name":"m1","kind":"peer","allow":[1,2]}',
      "approvalPolicy true": '{"name":"m1","kind":"peer","approvalPolicy":true}',
      "budgets as a string": '{"name":"m1","kind":"peer","budgets":"lots"}',
      "null body": "null",
      "array body": '[{"name":"m1","kind":"peer"}]',
      "string body": '"m1"',
      "10 000 levels of objects": `{"name":"m1","kind":"peer","jwt":{"issuer":"i","audience":"a","algorithms":["ES256"],"jwk":${deep(10_000)}}}`,
      "10 000 levels of arrays": deepArray(10_000),
      "65 levels": `{"name":"m1","kind":"peer","jwt":{"issuer":"i","audience":"a","algorithms":["ES256"],"jwk":${deep(65)}}}`,
    };
    for (const [name, body] of Object.entries(bodies)) {
      const reply = await admin("POST", "/callers", body);
      expectRefused("bodies", `admin create: ${name} (→ ${reply.status})`, reply.status !== 400);
    }
    // The same on a change to an existing caller.
    const patches: Record<string, string> = {
      "repeated tier": '{"tier":"public","tier":"private"}',
      "__proto__ tier": '{"__proto__":{"tier":"private"}}',
      "constructor.prototype allow": '{"constructor":{"prototype":{"allow":["execute_command"]}}}',
      "1e400 budget": '{"budgets":{"durationMs":1e400}}',
      "10 000 levels": `{"budgets":${deep(10_000)}}`,
    };
    for (const [name, body] of Object.entries(patches)) {
      const reply = await admin("PATCH", "/callers/alice", body);
      expectRefused("bodies", `admin change: ${name} (→ ${reply.status})`, reply.status !== 400);
    }
    const alice = await s.admin("GET", "/callers/alice");
    expect(alice.json.caller).toMatchObject({ tier: "public", allow: [] });
    expect(await readStateFingerprint(s.server)).toBe(before);
    // Nothing reached a shared prototype.
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
    const probe = {} as Record<string, unknown>;
    expect([probe.tier, probe.allow, probe.tokens]).toEqual([undefined, undefined, undefined]);
  });

  it("/a2a: repeated keys and deep nesting are not requests; __proto__ and 1e400 change nothing", async () => {
    const list = (params: string) =>
      a2a(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":${params}}`);
    const cases: { name: string; reply: Promise<Reply>; refused: (r: Reply) => boolean }[] = [
      {
        name: "repeated method",
        reply: a2a(
          '{"jsonrpc":"2.0","id":1,"method":"ListTasks","method":"SendMessage","params":{}}',
        ),
        refused: (r) => rpcError(r) === -32600,
      },
      {
        name: "repeated id",
        reply: a2a('{"jsonrpc":"2.0","id":1,"id":2,"method":"ListTasks","params":{}}'),
        refused: (r) => rpcError(r) === -32600,
      },
      {
        name: "repeated key inside params",
        reply: list('{"pageSize":5,"pageSize":500}'),
        refused: (r) => rpcError(r) === -32600,
      },
      {
        name: "10 000 levels in a message's data part",
        reply: a2a(
          `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":${deep(10_000)}}]}}}`,
        ),
        refused: (r) => rpcError(r) === -32600,
      },
      {
        name: "10 000 levels of arrays",
        reply: a2a(deepArray(10_000)),
        refused: (r) => rpcError(r) === -32600,
      },
      {
        name: "__proto__ setting pageSize",
        reply: list('{"__proto__":{"pageSize":1}}'),
        refused: (r) => JSON.parse(r.text).result?.pageSize !== 1,
      },
      {
        name: "constructor.prototype in params",
        reply: list('{"constructor":{"prototype":{"pageSize":1}}}'),
        refused: (r) => JSON.parse(r.text).result?.pageSize !== 1,
      },
      {
        name: "a NUL in a message's text and id",
        reply: a2a(
          JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "SendMessage",
            params: {
              message: { messageId: "m\u0000", role: "ROLE_USER", parts: [{ text: "a\u0000b" }] },
            },
          }),
        ),
        // Not an internal error: the task is created (the NUL kept as U+FFFD).
        refused: (r) => JSON.parse(r.text).result?.task !== undefined,
      },
      {
        name: "1e400 pageSize",
        reply: list('{"pageSize":1e400}'),
        refused: (r) => rpcError(r) === -32602,
      },
    ];
    for (const c of cases) {
      const reply = await c.reply;
      expect(reply.status).toBe(200);
      expectRefused("bodies", `/a2a: ${c.name} (→ ${reply.text.slice(0, 80)})`, !c.refused(reply));
    }
  });

  it("webhook payloads of any shape are data: deep, malformed or prototype-laden, they neither crash nor steer", async () => {
    const payloads: Record<string, string> = {
      "10 000 levels": deep(10_000),
      "malformed JSON": '{"action":',
      "__proto__ action": '{"__proto__":{"action":"closed"},"zen":"x","hook_id":1}',
      "repeated action": '{"action":"opened","action":"closed"}',
      // PostgreSQL cannot store U+0000: it must not turn a delivery into a 500.
      "a NUL byte": '{"action":"opened","note":"a\u0000b"}\u0000',
    };
    for (const [name, payload] of Object.entries(payloads)) {
      const replies = await Promise.all([
        send(s.port, {
          method: "POST",
          path: "/webhooks/ci",
          headers: {
            authorization: `Bearer ${secrets.webhook}`,
            "content-type": "application/json",
          },
          body: payload,
        }),
        send(s.port, {
          method: "POST",
          path: iftttPath(),
          headers: { "content-type": "application/json" },
          body: payload,
        }),
        send(s.port, {
          method: "POST",
          path: "/webhooks/github/repo",
          headers: {
            "content-type": "application/json",
            "x-github-event": "issues",
            "x-github-delivery": `d-${name}`,
            "x-hub-signature-256": signGithub(secrets.github, payload),
          },
          body: payload,
        }),
      ]);
      for (const [i, reply] of replies.entries()) {
        const surface = ["webhook", "IFTTT", "GitHub"][i];
        expectRefused(
          "bodies",
          `${surface} payload: ${name} (→ ${reply.status})`,
          reply.status >= 500,
        );
      }
    }
    expect((await send(s.port, { method: "GET", path: "/healthz" })).status).toBe(200);
    const crashed = s.logLines.filter((l) => /RangeError|Maximum call stack/.test(l));
    expect(crashed).toEqual([]);
  });
});

describe("names", () => {
  // Look-alikes of `alice` and `read_file`: Cyrillic а (U+0430) and е (U+0435), fullwidth letters,
  // a zero-width space, a combining accent, other letter cases.
  const nameLookalikes = {
    "Cyrillic a": "\u0430lice",
    "Cyrillic e": "alic\u0435",
    fullwidth: "\uff41\uff4c\uff49\uff43\uff45",
    "zero-width space": "alice\u200b",
    "combining accent": "alice\u0301",
    "upper case": "Alice",
    "trailing space": "alice ",
  };

  it("refuses Unicode look-alikes of caller names everywhere a name is given", async () => {
    const before = await readStateFingerprint(s.server);
    for (const [name, lookalike] of Object.entries(nameLookalikes)) {
      const created = await s.admin("POST", "/callers", { name: lookalike, kind: "peer" });
      expectRefused("bodies", `caller name look-alike (${name}) created`, created.status !== 400);
      const encoded = encodeURIComponent(lookalike);
      const revoked = await s.admin("POST", `/callers/${encoded}/revoke`, {});
      expectRefused("bodies", `caller name look-alike (${name}) revoked`, revoked.status !== 404);
      const hook = await send(s.port, {
        method: "POST",
        path: `/webhooks/${encodeURIComponent(lookalike.replace("alice", "ci"))}`,
        headers: { authorization: `Bearer ${secrets.webhook}`, "content-type": "application/json" },
        body: `{"n":"${name}"}`,
      });
      expectRefused("bodies", `webhook name look-alike (${name})`, hook.status !== 401);
      const ifttt = await send(s.port, {
        method: "POST",
        path: `/webhooks/ifttt/${encodeURIComponent(lookalike.replace("alice", "phone"))}/${secrets.ifttt}`,
        headers: { "content-type": "text/plain" },
        body: `look-alike ${name}`,
      });
      expectRefused("bodies", `IFTTT name look-alike (${name})`, ifttt.status !== 401);
    }
    expect((await s.admin("GET", "/callers/alice")).json.caller.revoked).toBe(false);
    expect(await readStateFingerprint(s.server)).toBe(before);
  });

  it("refuses look-alike tool names in an allow list, and admits nothing for case variants", async () => {
    const refusedNames = {
      "Cyrillic e": "r\u0435ad_file",
      fullwidth: "\uff52\uff45\uff41\uff44_file",
      "zero-width space": "read_file\u200b",
      "trailing space": "read_file ",
      "NUL byte": "read_file\u0000",
      "right-to-left mark": "\u200fexecute_command",
    };
    for (const [name, tool] of Object.entries(refusedNames)) {
      const res = await s.admin("POST", "/callers", {
        name: `tools-${Object.keys(refusedNames).indexOf(name)}`,
        kind: "peer",
        allow: [tool],
      });
      expectRefused("bodies", `allow entry look-alike (${name})`, res.status !== 400);
    }
    // Names of the right alphabet but the wrong case or separator are kept as unknown entries
    // (DESIGN §3) and admit nothing.
    const variants = [
      "Read_File",
      "READ_FILE",
      "read-file",
      "read.file",
      "Execute_Command",
      "WEB_FETCH",
    ];
    const res = await s.admin("POST", "/callers", {
      name: "tools-variants",
      kind: "peer",
      tier: "public",
      allow: variants,
    });
    expect(res.status).toBe(201);
    const ceiling = await s.admin("GET", "/callers/tools-variants/ceiling");
    const admitted = ceiling.json.admitted as string[];
    for (const v of variants) {
      const canonical = v.toLowerCase().replace(/[-.]/g, "_");
      expectRefused("bodies", `allow entry case variant ${v}`, admitted.includes(canonical));
    }
    expect(ceiling.json.unknownAllowEntries.map((e: { entry: string }) => e.entry).sort()).toEqual(
      [...variants].sort(),
    );
  });

  it("CR/LF and other control characters in names, ids and methods never forge a log line", async () => {
    const forged = '{"time":"2020-01-01T00:00:00.000Z","level":"error","msg":"forged"}';
    const nasty = [`evil\r\n${forged}`, `evil\n${forged}`, `evil\u2028${forged}`, "evil\u0000x"];
    const from = s.logLines.length;
    for (const name of nasty) {
      const enc = encodeURIComponent(name);
      const replies = await Promise.all([
        send(s.port, {
          method: "POST",
          path: `/webhooks/${enc}`,
          headers: { authorization: "Bearer pgw_x" },
          body: "{}",
        }),
        send(s.port, {
          method: "POST",
          path: `/webhooks/github/${enc}`,
          headers: { "x-hub-signature-256": "sha256=00" },
          body: "{}",
        }),
        send(s.port, {
          method: "POST",
          path: `/webhooks/ifttt/${enc}/${secrets.ifttt}`,
          body: "{}",
        }),
        s.admin("GET", `/callers/${enc}`),
        s.admin("POST", "/callers", { name, kind: "peer" }),
        a2a(JSON.stringify({ jsonrpc: "2.0", id: name, method: name, params: {} })),
        send(s.port, { method: "GET", path: `/no-such-route/${enc}` }),
      ]);
      for (const reply of replies) expect(reply.status).toBeLessThan(500);
    }
    // A request id of the client's choosing is kept only if it is plain word characters.
    const chosen = await send(s.port, {
      method: "GET",
      path: "/healthz",
      headers: { "x-request-id": 'x","level":"error","msg":"forged' },
    });
    expect(chosen.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);

    const lines = s.logLines.slice(from);
    expect(lines.length).toBeGreaterThan(nasty.length * 6);
    // The hostile text did reach the log (as data), so the check below has something to check.
    expect(lines.filter((l) => l.includes("forged")).length).toBeGreaterThan(0);
    const forgedLines = lines.filter((line) => {
      if (/[\r\n\u2028\u2029]/.test(line)) return true;
      const record = JSON.parse(line) as Record<string, unknown>;
      return record.msg === "forged" || typeof record.level !== "string";
    });
    recordCase(
      "bodies",
      `log injection through ${nasty.length} names × 7 surfaces`,
      forgedLines.length > 0,
    );
    expect(forgedLines).toEqual([]);
    // The refusals were audited, the hostile names kept only as their length. They are audited
    // as one summary per window and source: write the open windows' summaries now.
    await s.server.services.authFailures?.flushAll();
    const audit = await s.admin("GET", "/audit?kind=auth.failed&limit=500");
    const names = (
      audit.json.events as { data: { claimedNames?: Record<string, number> } }[]
    ).flatMap((e) =>
      Object.entries(e.data.claimedNames ?? {}).flatMap(([name, count]) =>
        new Array<string>(count).fill(name),
      ),
    );
    expect(names.filter((n) => n.includes("evil") || n.includes("forged"))).toEqual([]);
    expect(
      names.filter((n) => /^\(not recorded: \d+ characters\)$/.test(n)).length,
    ).toBeGreaterThanOrEqual(nasty.length * 3);
  });
});
