// The shared suite every authenticated route must pass (issue 7), run against the real server over
// real sockets: each route in ./routes.ts gets every way of presenting a wrong credential — absent,
// empty, malformed, doubled, of another kind, revoked, rotated out, in the query string — and must
// answer each with the one 401 (WWW-Authenticate, identical body but for the request id) having
// changed nothing. Then method tricks, encoded and doubled slashes, and timing: an unknown caller
// name and a known one with a bad credential take the same time.
//
// The attacks are per kind of credential; what is specific to one transport is proven elsewhere
// and not repeated here: every GitHub signature variant and tampered body, IFTTT secret variants,
// redelivery (test/http/webhooks.security.test.ts), the throttle and Origin refusal
// (test/http/admin.security.test.ts), JWT verification (test/auth/jwt.security.test.ts and, through
// /a2a, ./jwt.security.test.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordCase } from "./cases.ts";
import {
  type AuthenticatedRoute,
  authenticatedRoutes,
  type CredentialKind,
  type Presentation,
  present,
  publicRoutes,
  type RouteFixtures,
  type Secret,
  signGithub,
  type UnsignedRequest,
  validPresentation,
} from "./routes.ts";
import {
  compareTiming,
  describeTiming,
  type Reply,
  readStateFingerprint,
  type SecurityServer,
  send,
  startSecurityServer,
  type TimingComparison,
  withoutRequestId,
} from "./support.ts";

let s: SecurityServer;
let f: RouteFixtures;
/** Credentials that were valid once, or belong to callers that are revoked. */
let retired: {
  adminToken: string;
  operatorToken: string;
  peer: string;
  webhook: string;
  github: string;
  ifttt: string;
};
let revoked: { peer: Secret; webhook: Secret; github: Secret; ifttt: Secret };
let others: { peer: Secret; webhook: Secret; github: Secret; ifttt: Secret };
/** Every 401 body seen, without its request id. */
const unauthorizedBodies = new Set<string>();

let counter = 0;
const unique = () => `${Date.now().toString(36)}-${(counter++).toString(36)}`;

async function addCaller(body: Record<string, unknown>): Promise<Secret> {
  const res = await s.admin("POST", "/callers", body);
  if (res.status !== 201) throw new Error(`add ${body.name}: ${res.status} ${res.text}`);
  return { name: String(body.name), secret: res.json.credential.secret as string };
}

const kinds = {
  peer: (name: string) => ({ name, kind: "peer" }),
  webhook: (name: string) => ({ name, kind: "webhook", promptTemplate: "CI said {{payload}}" }),
  github: (name: string) => ({ name, kind: "github", promptTemplate: "GitHub: {{payload}}" }),
  ifttt: (name: string) => ({ name, kind: "ifttt", promptTemplate: "Note: {{payload}}" }),
} as const;
type CallerKind = keyof typeof kinds;

/** A caller whose first secret was rotated out: the old one is returned as `retired`. */
async function addRotated(kind: CallerKind, name: string) {
  const first = await addCaller(kinds[kind](name));
  const rotated = await s.admin("POST", `/callers/${name}/rotate`);
  if (rotated.status !== 200) throw new Error(`rotate ${name}: ${rotated.text}`);
  return { current: { name, secret: rotated.json.credential.secret as string }, retired: first };
}

async function addRevoked(kind: CallerKind, name: string): Promise<Secret> {
  const caller = await addCaller(kinds[kind](name));
  const res = await s.admin("POST", `/callers/${name}/revoke`, { reason: "security suite" });
  if (res.status !== 200) throw new Error(`revoke ${name}: ${res.text}`);
  return caller;
}

beforeAll(async () => {
  s = await startSecurityServer();
  const operatorRetired = await s.newOperatorToken();
  const operatorToken = await s.newOperatorToken();
  const admin = await s.replaceAdminToken(operatorToken);
  const peer = await addRotated("peer", "sec-peer");
  const webhook = await addRotated("webhook", "sec-hook");
  const github = await addRotated("github", "sec-github");
  const ifttt = await addRotated("ifttt", "sec-ifttt");
  retired = {
    adminToken: admin.old,
    operatorToken: operatorRetired,
    peer: peer.retired.secret,
    webhook: webhook.retired.secret,
    github: github.retired.secret,
    ifttt: ifttt.retired.secret,
  };
  revoked = {
    peer: await addRevoked("peer", "sec-peer-revoked"),
    webhook: await addRevoked("webhook", "sec-hook-revoked"),
    github: await addRevoked("github", "sec-github-revoked"),
    ifttt: await addRevoked("ifttt", "sec-ifttt-revoked"),
  };
  others = {
    peer: await addCaller(kinds.peer("sec-peer-other")),
    webhook: await addCaller(kinds.webhook("sec-hook-other")),
    github: await addCaller(kinds.github("sec-github-other")),
    ifttt: await addCaller(kinds.ifttt("sec-ifttt-other")),
  };
  f = {
    adminToken: () => s.adminToken,
    operatorToken,
    peer: peer.current,
    webhook: webhook.current,
    github: github.current,
    ifttt: ifttt.current,
    freshPeer: async () => (await addCaller(kinds.peer(`sec-fresh-${unique()}`))).name,
    revokedPeer: async () => (await addRevoked("peer", `sec-gone-${unique()}`)).name,
    unique,
  };
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

// ---------------------------------------------------------------- the attacks

type Attack = {
  name: string;
  /** The credential to present, given the valid one. */
  presentation(valid: Presentation, req: UnsignedRequest): Presentation;
  /** Build the request for another caller than the fixture's (a revoked one). */
  fixtures?: () => RouteFixtures;
  /** The statuses that mean "refused" for this attack; default 401 only. */
  refusedWith?: readonly number[];
};

const swapCase = (t: string) =>
  [...t].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join("");

/** Attacks on a bearer credential `token`, carried in Authorization. */
function bearerAttacks(token: () => string): Attack[] {
  const withAuth = (name: string, value: (t: string) => string | string[] | undefined): Attack => ({
    name,
    presentation: (valid) => {
      const { authorization: _, ...rest } = valid;
      const v = value(token());
      return v === undefined ? rest : { ...rest, authorization: v };
    },
  });
  return [
    withAuth("missing Authorization", () => undefined),
    withAuth("empty Authorization", () => ""),
    withAuth("blank Authorization", () => "   "),
    withAuth("scheme only", () => "Bearer"),
    withAuth("scheme and a space", () => "Bearer "),
    withAuth("no space after the scheme", (t) => `Bearer${t}`),
    withAuth("two spaces after the scheme", (t) => `Bearer  ${t}`),
    withAuth("a tab after the scheme", (t) => `Bearer\t${t}`),
    withAuth("bare token without a scheme", (t) => t),
    withAuth("Basic scheme", (t) => `Basic ${Buffer.from(`admin:${t}`).toString("base64")}`),
    withAuth("Token scheme", (t) => `Token ${t}`),
    withAuth("quoted token", (t) => `Bearer "${t}"`),
    withAuth("trailing garbage", (t) => `Bearer ${t} x`),
    withAuth("comma-joined list", (t) => `Bearer ${t}, Bearer ${t}`),
    withAuth("doubled header, both valid", (t) => [`Bearer ${t}`, `Bearer ${t}`]),
    withAuth("doubled header, valid first", (t) => [`Bearer ${t}`, "Bearer pg_wrong"]),
    withAuth("doubled header, valid last", (t) => ["Bearer pg_wrong", `Bearer ${t}`]),
    withAuth("truncated token", (t) => `Bearer ${t.slice(0, -1)}`),
    withAuth("extended token", (t) => `Bearer ${t}A`),
    withAuth("case-swapped token", (t) => `Bearer ${swapCase(t)}`),
    withAuth(
      "percent-encoded token",
      (t) => `Bearer %${t.charCodeAt(0).toString(16)}${t.slice(1)}`,
    ),
    withAuth("scheme-less prefix of the token", (t) => `Bearer ${t.slice(0, 12)}`),
  ];
}

/** The token moved into the query string, under names that look like credentials and not. */
function queryAttacks(token: () => string, strip: (p: Presentation) => Presentation): Attack[] {
  return ["access_token", "token", "api_key", "auth", "key", "q"].map((param) => ({
    name: `token in the query string (?${param}=)`,
    presentation: (valid) => ({
      ...strip(valid),
      query: `${param}=${encodeURIComponent(token())}`,
    }),
    // A credential-looking name is refused before anything is looked at (400); any other
    // parameter is ignored and the request has no credential (401).
    refusedWith: [400, 401],
  }));
}

/** Every credential of a kind other than `own`, as a bearer token. */
function foreignTokens(own: CredentialKind): { name: string; token: () => string }[] {
  const all: { kind: CredentialKind | "operator" | "other-webhook"; token: () => string }[] = [
    { kind: "admin", token: () => f.adminToken() },
    { kind: "operator", token: () => f.operatorToken },
    { kind: "peer", token: () => f.peer.secret },
    { kind: "webhook", token: () => f.webhook.secret },
    { kind: "other-webhook", token: () => others.webhook.secret },
    { kind: "github", token: () => f.github.secret },
    { kind: "ifttt", token: () => f.ifttt.secret },
  ];
  return all
    .filter((c) => c.kind !== own && !(own === "admin+operator" && c.kind === "admin"))
    .map((c) => ({ name: `${c.kind} credential`, token: c.token }));
}

function attacksFor(route: AuthenticatedRoute): Attack[] {
  const bearer = (name: string, token: () => string, fixtures?: () => RouteFixtures): Attack => ({
    name,
    presentation: (valid) => ({ ...valid, authorization: `Bearer ${token()}` }),
    ...(fixtures ? { fixtures } : {}),
  });
  const stripAuthorization = ({ authorization: _, ...rest }: Presentation) => rest;
  switch (route.credential) {
    case "admin":
      return [
        ...bearerAttacks(() => f.adminToken()),
        ...foreignTokens("admin").map((t) => bearer(t.name, t.token)),
        bearer("replaced admin token", () => retired.adminToken),
        ...queryAttacks(() => f.adminToken(), stripAuthorization),
      ];
    case "admin+operator": {
      const op = (
        name: string,
        presentation: (valid: Presentation) => Presentation,
        refusedWith?: readonly number[],
      ): Attack => ({ name, presentation, ...(refusedWith ? { refusedWith } : {}) });
      const admin = () => `Bearer ${f.adminToken()}`;
      return [
        ...bearerAttacks(() => f.adminToken()),
        ...foreignTokens("admin+operator").map((t) => bearer(t.name, t.token)),
        bearer("replaced admin token", () => retired.adminToken),
        ...queryAttacks(() => f.adminToken(), stripAuthorization),
        // Approving needs both tokens, each in its own place.
        op("admin token without the operator token", () => ({ authorization: admin() }), [
          route.withoutOperator ?? 401,
        ]),
        op("empty operator token", () => ({ authorization: admin(), operatorToken: "" }), [
          route.withoutOperator ?? 401,
        ]),
        op("operator token alone, in Authorization", () => ({
          authorization: `Bearer ${f.operatorToken}`,
        })),
        op("operator token in both places", () => ({
          authorization: `Bearer ${f.operatorToken}`,
          operatorToken: f.operatorToken,
        })),
        op("operator header without Authorization", () => ({ operatorToken: f.operatorToken })),
        op("admin token in both places", () => ({
          authorization: admin(),
          operatorToken: f.adminToken(),
        })),
        op("replaced operator token", (v) => ({ ...v, operatorToken: retired.operatorToken })),
        op("peer token as the operator token", (v) => ({ ...v, operatorToken: f.peer.secret })),
        op("operator token with a Bearer scheme", (v) => ({
          ...v,
          operatorToken: `Bearer ${f.operatorToken}`,
        })),
        op("doubled operator header", (v) => ({
          ...v,
          operatorToken: [f.operatorToken, f.operatorToken],
        })),
        op(
          "operator token in the query string",
          ({ operatorToken: _, ...v }) => ({ ...v, query: `operator_token=${f.operatorToken}` }),
          [400],
        ),
      ];
    }
    case "peer":
      return [
        ...bearerAttacks(() => f.peer.secret),
        ...foreignTokens("peer").map((t) => bearer(t.name, t.token)),
        bearer("rotated-out peer token", () => retired.peer),
        bearer("revoked peer's token", () => revoked.peer.secret),
        ...queryAttacks(() => f.peer.secret, stripAuthorization),
      ];
    case "webhook":
      return [
        ...bearerAttacks(() => f.webhook.secret),
        ...foreignTokens("webhook").map((t) => bearer(t.name, t.token)),
        bearer(
          "another webhook's token at its own name",
          () => f.webhook.secret,
          () => ({
            ...f,
            webhook: others.webhook,
          }),
        ),
        bearer("rotated-out webhook token", () => retired.webhook),
        bearer(
          "revoked webhook's token",
          () => revoked.webhook.secret,
          () => ({
            ...f,
            webhook: revoked.webhook,
          }),
        ),
        ...queryAttacks(() => f.webhook.secret, stripAuthorization),
      ];
    case "github": {
      const sig = (
        name: string,
        signature: (body: string) => string | string[] | undefined,
        extra: Partial<Attack> = {},
      ): Attack => ({
        name,
        presentation: (_valid, req) => {
          const value = signature(req.body ?? "");
          return value === undefined ? {} : { signature: value };
        },
        ...extra,
      });
      return [
        sig("missing signature", () => undefined),
        sig("empty signature", () => ""),
        sig("scheme without a digest", () => "sha256="),
        sig("upper-case scheme", (b) => signGithub(f.github.secret, b).replace("sha256", "SHA256")),
        sig("doubled header, both valid", (b) => [
          signGithub(f.github.secret, b),
          signGithub(f.github.secret, b),
        ]),
        sig("doubled header, valid first", (b) => [
          signGithub(f.github.secret, b),
          `sha256=${"0".repeat(64)}`,
        ]),
        sig("another GitHub caller's secret", (b) => signGithub(others.github.secret, b)),
        sig("keyed with the caller's name", (b) => signGithub(f.github.name, b)),
        sig("rotated-out secret", (b) => signGithub(retired.github, b)),
        sig("revoked caller's secret", (b) => signGithub(revoked.github.secret, b), {
          fixtures: () => ({ ...f, github: revoked.github }),
        }),
        ...foreignTokens("github").flatMap((t) => [
          sig(`signed with the ${t.name}`, (b) => signGithub(t.token(), b)),
          {
            name: `${t.name} as a bearer token, unsigned`,
            presentation: () => ({ authorization: `Bearer ${t.token()}` }),
          },
        ]),
        {
          name: "the secret itself as a bearer token, unsigned",
          presentation: () => ({ authorization: `Bearer ${f.github.secret}` }),
        },
        {
          name: "signature in the query string",
          presentation: (_v, req) => ({
            query: `signature=${encodeURIComponent(signGithub(f.github.secret, req.body ?? ""))}`,
          }),
          refusedWith: [400],
        },
      ];
    }
    case "ifttt": {
      const inPath = (name: string, secret: () => string, extra: Partial<Attack> = {}): Attack => ({
        name,
        presentation: () => ({ pathSecret: secret() }),
        ...extra,
      });
      const t = () => f.ifttt.secret;
      return [
        // No secret segment at all: the route does not match.
        inPath("no secret segment", () => "", { refusedWith: [404] }),
        inPath("malformed secret", () => "not-a-secret"),
        inPath("truncated secret", () => t().slice(0, -1)),
        inPath("extended secret", () => `${t()}A`),
        inPath("short prefix of the secret", () => t().slice(0, 12)),
        inPath("case-swapped secret", () => swapCase(t())),
        inPath(
          "percent-encoded character",
          () => `%${t().charCodeAt(0).toString(16)}${t().slice(1)}`,
        ),
        inPath("secret followed by a slash", () => `${t()}/`, { refusedWith: [404] }),
        inPath("secret doubled", () => `${t()}/${t()}`, { refusedWith: [404] }),
        inPath("another IFTTT caller's secret", () => others.ifttt.secret),
        inPath("the secret at another IFTTT caller's name", t, {
          fixtures: () => ({ ...f, ifttt: others.ifttt }),
        }),
        inPath("rotated-out secret", () => retired.ifttt),
        inPath("revoked caller's secret", () => revoked.ifttt.secret, {
          fixtures: () => ({ ...f, ifttt: revoked.ifttt }),
        }),
        ...foreignTokens("ifttt").map((c) => inPath(`${c.name} in the path`, c.token)),
        {
          name: "the secret as a bearer token, bogus path secret",
          presentation: () => ({ pathSecret: "pgi_bogus", authorization: `Bearer ${t()}` }),
        },
        {
          name: "the secret in the query string, bogus path secret",
          presentation: () => ({ pathSecret: "pgi_bogus", query: `secret=${t()}` }),
          refusedWith: [400],
        },
        {
          name: "the secret in an innocuous query parameter, bogus path secret",
          presentation: () => ({ pathSecret: "pgi_bogus", query: `q=${t()}` }),
        },
      ];
    }
  }
}

const routeName = (r: AuthenticatedRoute) => `${r.method} ${r.pattern}`;

/**
 * Sends `attack` against `route`. Requests are built once per route (a builder may create a caller
 * to act on; refused attacks leave it as it was), or afresh when the attack names other fixtures.
 */
async function attempt(route: AuthenticatedRoute, attack: Attack, built?: UnsignedRequest) {
  const fixtures = attack.fixtures?.() ?? f;
  const request = attack.fixtures || !built ? await route.build(fixtures) : built;
  const valid = validPresentation(route, fixtures, request);
  return send(s.port, present(request, attack.presentation(valid, request)));
}

function noteUnauthorized(reply: Reply) {
  expect(reply.headers["www-authenticate"]).toBe('Bearer realm="peergate"');
  expect(reply.headers["content-type"]).toBe("application/problem+json");
  unauthorizedBodies.add(withoutRequestId(reply.text));
}

// ---------------------------------------------------------------- the suite

describe("the route table", () => {
  it("lists every authenticated route the server serves, and only those", () => {
    const served = s.server.hono.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${r.path}`);
    const listed = new Set([
      ...authenticatedRoutes.map(routeName),
      ...publicRoutes.map((r) => `${r.method} ${r.pattern}`),
    ]);
    const missing = served.filter((r) => !listed.has(r));
    expect(missing, "routes served but not in test/security/routes.ts").toEqual([]);
    const stale = [...listed].filter((r) => !served.includes(r));
    expect(stale, "routes in the table the server does not serve").toEqual([]);
    // Middleware registered for every method cannot hide a handler from this check.
    const allHandlers = s.server.hono.routes.filter(
      (r) => r.method === "ALL" && !r.path.endsWith("*") && r.path !== "/a2a",
    );
    expect(allHandlers.map((r) => r.path)).toEqual([]);
  });

  it("answers the public routes without credentials", async () => {
    for (const r of publicRoutes) {
      const reply = await send(s.port, { method: r.method, path: r.pattern });
      expect(reply.status, r.pattern).toBe(200);
    }
  });
});

describe("credentials", () => {
  for (const route of authenticatedRoutes) {
    it(`${routeName(route)}: a valid credential passes; every attack gets the one 401 and changes nothing`, async () => {
      const ok = await attempt(route, { name: "valid", presentation: (v) => v });
      expect(route.accepted, `valid request answered ${ok.status}: ${ok.text}`).toContain(
        ok.status,
      );

      const request = await route.build(f);
      const before = await readStateFingerprint(s.server);
      const admitted: string[] = [];
      for (const attack of attacksFor(route)) {
        const reply = await attempt(route, attack, request);
        const refusedWith = attack.refusedWith ?? [401];
        const wasAdmitted = !refusedWith.includes(reply.status);
        recordCase("auth", `${routeName(route)}: ${attack.name}`, wasAdmitted);
        if (wasAdmitted)
          admitted.push(`${attack.name} → ${reply.status} ${reply.text.slice(0, 200)}`);
        if (reply.status === 401) noteUnauthorized(reply);
      }
      expect(admitted).toEqual([]);
      expect(await readStateFingerprint(s.server)).toBe(before);
    });
  }

  it("accepts the Bearer scheme in any letter case (RFC 7235 §2.1), as the README documents", async () => {
    const bearerRoutes = authenticatedRoutes.filter((r) =>
      ["admin", "admin+operator", "peer", "webhook"].includes(r.credential),
    );
    for (const route of bearerRoutes) {
      for (const scheme of ["bearer", "BEARER", "bEaReR"]) {
        const reply = await attempt(route, {
          name: scheme,
          presentation: (v) => ({
            ...v,
            authorization: String(v.authorization).replace(/^Bearer/, scheme),
          }),
        });
        expect(route.accepted, `${routeName(route)} with ${scheme}: ${reply.status}`).toContain(
          reply.status,
        );
      }
    }
  });

  it("gave every refusal on every route the same 401 body (request id aside)", () => {
    expect(unauthorizedBodies.size).toBeGreaterThan(0);
    expect([...unauthorizedBodies]).toEqual([
      JSON.stringify({
        type: "https://peergate.dev/problems/unauthenticated",
        title: "Unauthorized",
        status: 401,
        code: "unauthenticated",
        detail: "missing or invalid credentials",
      }),
    ]);
  });
});

function withoutBody({ body: _, ...request }: UnsignedRequest): UnsignedRequest {
  return request;
}

describe("methods and paths", () => {
  /** The route's request with a credential that fails (or none), as a path-trick baseline. */
  async function unauthenticated(route: AuthenticatedRoute): Promise<UnsignedRequest> {
    const request = await route.build(f);
    // IFTTT's credential is in the path: put a well-formed secret there that belongs to no one.
    return route.credential === "ifttt"
      ? { ...request, path: `${request.path}pgi_${"A".repeat(43)}` }
      : request;
  }

  /** Builds every route's request first: builders may create callers, attacks must not. */
  async function buildAll(
    build: (route: AuthenticatedRoute) => Promise<UnsignedRequest>,
  ): Promise<[AuthenticatedRoute, UnsignedRequest][]> {
    const out: [AuthenticatedRoute, UnsignedRequest][] = [];
    for (const route of authenticatedRoutes) out.push([route, await build(route)]);
    return out;
  }

  it("HEAD, OPTIONS and method overrides reach no handler without credentials, and change nothing with them", async () => {
    const requests = await buildAll(unauthenticated);
    const before = await readStateFingerprint(s.server);
    const admitted: string[] = [];
    const check = (name: string, reply: Reply, refusedWith: readonly number[]) => {
      const wasAdmitted = !refusedWith.includes(reply.status);
      recordCase("auth", name, wasAdmitted);
      if (wasAdmitted) admitted.push(`${name} → ${reply.status}`);
      // No CORS pre-flight answer: a browser page gets no permission to call.
      if (reply.headers["access-control-allow-origin"] !== undefined)
        admitted.push(`${name}: CORS`);
    };
    for (const [route, request] of requests) {
      const name = routeName(route);
      const onGetRoute = route.method === "GET";
      // HEAD is GET without a body: on a GET route it is authenticated like GET; elsewhere no route.
      check(
        `${name}: HEAD without credentials`,
        await send(s.port, { ...withoutBody(request), method: "HEAD" }),
        onGetRoute ? [401] : [401, 404],
      );
      check(
        `${name}: OPTIONS without credentials`,
        await send(s.port, {
          method: "OPTIONS",
          path: request.path,
          headers: {
            origin: "https://evil.example",
            "access-control-request-method": route.method,
          },
        }),
        [401, 403, 404],
      );
      for (const header of ["x-http-method-override", "x-method-override", "x-http-method"]) {
        // Another method, asking to be taken for this route's method: without credentials...
        const other = route.method === "GET" ? "POST" : "GET";
        const trick = {
          ...request,
          method: other,
          headers: { ...request.headers, [header]: route.method },
          ...(other === "GET" ? { body: undefined } : {}),
        };
        check(
          `${name}: ${other} with ${header}: ${route.method}, no credentials`,
          await send(s.port, trick as never),
          [401, 404],
        );
      }
    }
    expect(await readStateFingerprint(s.server)).toBe(before);
    // ...and with valid credentials the override is not honoured: a GET that asks to be a POST (or
    // PATCH) stays a GET, so no caller is created, changed, revoked, restored or rotated.
    for (const route of authenticatedRoutes.filter((r) => r.method !== "GET")) {
      const request = await route.build(f);
      const valid = validPresentation(route, f, request);
      const unchanged = await readStateFingerprint(s.server);
      const tricks: { name: string; headers: Record<string, string>; query?: string }[] = [
        { name: "X-HTTP-Method-Override", headers: { "x-http-method-override": route.method } },
        { name: "X-Method-Override", headers: { "x-method-override": route.method } },
        { name: "?_method=", headers: {}, query: `_method=${route.method}` },
      ];
      for (const trick of tricks) {
        const sent = present(
          {
            ...withoutBody(request),
            method: "GET",
            headers: { ...request.headers, ...trick.headers },
          },
          { ...valid, ...(trick.query ? { query: trick.query } : {}) },
        );
        const reply = await send(s.port, sent);
        const name = `${routeName(route)}: GET posing as ${route.method} (${trick.name}), valid credentials`;
        // A GET twin of the path may exist (GET /admin/v1/callers); what matters is no write.
        const wasAdmitted = (await readStateFingerprint(s.server)) !== unchanged;
        recordCase("auth", name, wasAdmitted);
        if (wasAdmitted) admitted.push(`${name} → ${reply.status}`);
      }
    }
    expect(admitted).toEqual([]);
  });

  /** Ways of writing `path` that a lax router might still match. */
  function pathVariants(path: string): { name: string; path: string }[] {
    const [bare = path, query] = path.split("?");
    const q = query === undefined ? "" : `?${query}`;
    const segments = bare.split("/").slice(1);
    const first = segments[0] ?? "";
    const rest = segments.slice(1).join("/");
    const tail = rest ? `/${rest}` : "";
    const variants = [
      { name: "leading double slash", path: `/${bare}` },
      { name: "double slash inside", path: `/${first}/${tail}` },
      { name: "trailing slash", path: `${bare}/` },
      { name: "trailing dot segment", path: `${bare}/.` },
      { name: "encoded slash", path: tail ? `/${first}%2F${rest}` : `${bare}%2F` },
      { name: "encoded slash, lower case", path: tail ? `/${first}%2f${rest}` : `${bare}%2f` },
      {
        name: "encoded first letter",
        path: `/%${first.charCodeAt(0).toString(16)}${first.slice(1)}${tail}`,
      },
      { name: "encoded dot-dot from a public route", path: `/.well-known/%2e%2e${bare}` },
      { name: "encoded dot-dot, upper case", path: `/healthz/%2E%2E${bare}` },
      { name: "dot-dot from another prefix", path: `/webhooks/x/..${bare}` },
      { name: "upper-case path", path: bare.toUpperCase() },
      { name: "matrix parameter", path: `${bare};x=1` },
      { name: "encoded NUL", path: `${bare}%00` },
      { name: "encoded space", path: `${bare}%20` },
      { name: "backslash", path: `/${first}\\${rest}` },
      { name: "encoded backslash", path: `/${first}%5C${rest}` },
    ];
    return variants.map((v) => ({ ...v, path: `${v.path}${q}` }));
  }

  // Sixteen variants of every route's path: a few hundred requests, more than a loaded machine
  // sends in the default 30 s.
  it("encoded, doubled and dotted paths reach no handler without credentials", async () => {
    const requests = await buildAll(unauthenticated);
    const before = await readStateFingerprint(s.server);
    const admitted: string[] = [];
    for (const [route, request] of requests) {
      for (const variant of pathVariants(request.path)) {
        const reply = await send(s.port, { ...request, path: variant.path });
        // 401 once routed to the authenticated handler, 404 when no route matches, 400 when the
        // path cannot be parsed. Never an answer from a handler.
        const wasAdmitted = ![400, 401, 404].includes(reply.status);
        recordCase("auth", `${routeName(route)}: ${variant.name}`, wasAdmitted);
        if (wasAdmitted) admitted.push(`${routeName(route)} ${variant.path} → ${reply.status}`);
        if (reply.status === 401) noteUnauthorized(reply);
      }
    }
    expect(admitted).toEqual([]);
    expect(await readStateFingerprint(s.server)).toBe(before);
  }, 120_000);
});

describe("timing", () => {
  /** Records the case and fails when the two sides are distinguishable (see compareTiming). */
  function expectIndistinguishable(name: string, t: TimingComparison) {
    const admitted = Math.abs(t.shift) >= t.bound;
    recordCase("auth", `timing: ${name} (${describeTiming(t)})`, admitted);
    expect(Math.abs(t.shift), `${name}: ${describeTiming(t)}`).toBeLessThan(t.bound);
  }

  const post = (path: string, headers: Record<string, string>, body = '{"n":1}') =>
    send(s.port, {
      method: "POST",
      path,
      headers: { "content-type": "application/json", ...headers },
      body,
    });

  // GitHub keeps a steady residual of about 0.1 ms (fetching the known caller's credential row
  // and opening its sealed secret), well under the bound; the case name reports it.
  it("GitHub: a known name with a bad signature takes as long as an unknown name", async () => {
    const body = JSON.stringify({ action: "opened" });
    const wrong = signGithub("not-the-secret", body);
    const headers = { "x-hub-signature-256": wrong, "x-github-event": "issues" };
    const m = await compareTiming(
      () => post(`/webhooks/github/${f.github.name}`, headers, body),
      () => post("/webhooks/github/sec-github-nobody", headers, body),
    );
    expectIndistinguishable("GitHub signature", m);
  });

  it("generic webhook: a known name with a bad token takes as long as an unknown name", async () => {
    const headers = { authorization: `Bearer pgw_${"B".repeat(43)}` };
    const m = await compareTiming(
      () => post(`/webhooks/${f.webhook.name}`, headers),
      () => post("/webhooks/sec-hook-nobody", headers),
    );
    expectIndistinguishable("webhook token", m);
  });

  it("IFTTT: a known name with a bad secret takes as long as an unknown name", async () => {
    const secret = `pgi_${"C".repeat(43)}`;
    const m = await compareTiming(
      () => post(`/webhooks/ifttt/${f.ifttt.name}/${secret}`, {}),
      () => post(`/webhooks/ifttt/sec-ifttt-nobody/${secret}`, {}),
    );
    expectIndistinguishable("IFTTT secret", m);
  });
});
