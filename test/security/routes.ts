// Every authenticated route of the app, with how to build a request that passes authentication.
// routes.security.test.ts runs each through the shared attack suite, and fails if the app serves
// a route that is in neither this table nor `publicRoutes`: a new route cannot skip the checks.
import { createHmac } from "node:crypto";
import type { RawRequest } from "./support.ts";

/** How a route is authenticated, i.e. where its credential travels. */
export type CredentialKind =
  /** Authorization: Bearer <admin token> */
  | "admin"
  /** The admin token, and the operator token in X-Peergate-Operator-Token. */
  | "admin+operator"
  /** Authorization: Bearer <peer token or JWT> */
  | "peer"
  /** Authorization: Bearer <that webhook caller's token> */
  | "webhook"
  /** X-Hub-Signature-256: HMAC of the body under the caller's secret */
  | "github"
  /** The caller's secret as the last path segment */
  | "ifttt";

export type Secret = { name: string; secret: string };

/** What the route suite sets up once; builders read from it. */
export type RouteFixtures = {
  adminToken(): string;
  operatorToken: string;
  peer: Secret;
  webhook: Secret;
  github: Secret;
  ifttt: Secret;
  /** A fresh peer caller (for routes that change or revoke the caller they name). */
  freshPeer(): Promise<string>;
  /** A fresh peer caller, already revoked (for restore). */
  revokedPeer(): Promise<string>;
  /** A string no other request of the run has used (webhook bodies are deduplicated). */
  unique(): string;
};

/** A request before its credential is put in: IFTTT paths end with `/` where the secret goes. */
export type UnsignedRequest = {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
};

export type AuthenticatedRoute = {
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  /** Exactly as the app's `routes` list it. */
  pattern: string;
  credential: CredentialKind;
  /** A request for this route, to be completed with a credential. */
  build(f: RouteFixtures): Promise<UnsignedRequest>;
  /** Statuses the handler answers an authenticated request with (so: authentication passed). */
  accepted: readonly number[];
  /**
   * admin+operator routes: the status without a usable operator token. 401 (the default) for
   * approvals; 403 `operator-token-required` for caller writes that widen, which name the token.
   */
  withoutOperator?: number;
};

/** Where a credential is put; `undefined` leaves that place empty. */
export type Presentation = {
  authorization?: string | string[];
  operatorToken?: string | string[];
  signature?: string | string[];
  pathSecret?: string;
  /** Appended to the path after `?`. */
  query?: string;
};

export function signGithub(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** The presentation that authenticates `route` correctly. */
export function validPresentation(
  route: AuthenticatedRoute,
  f: RouteFixtures,
  request: UnsignedRequest,
): Presentation {
  switch (route.credential) {
    case "admin":
      return { authorization: `Bearer ${f.adminToken()}` };
    case "admin+operator":
      return { authorization: `Bearer ${f.adminToken()}`, operatorToken: f.operatorToken };
    case "peer":
      return { authorization: `Bearer ${f.peer.secret}` };
    case "webhook":
      return { authorization: `Bearer ${f.webhook.secret}` };
    case "github":
      return { signature: signGithub(f.github.secret, request.body ?? "") };
    case "ifttt":
      return { pathSecret: f.ifttt.secret };
  }
}

/** The request with `presentation` put in. */
export function present(request: UnsignedRequest, presentation: Presentation): RawRequest {
  const headers: Record<string, string | string[]> = { ...request.headers };
  if (presentation.authorization !== undefined) headers.authorization = presentation.authorization;
  if (presentation.operatorToken !== undefined)
    headers["x-peergate-operator-token"] = presentation.operatorToken;
  if (presentation.signature !== undefined) headers["x-hub-signature-256"] = presentation.signature;
  let path = request.path;
  if (presentation.pathSecret !== undefined) path += presentation.pathSecret;
  if (presentation.query !== undefined) path += `?${presentation.query}`;
  return {
    method: request.method,
    path,
    headers,
    ...(request.body === undefined ? {} : { body: request.body }),
  };
}

const json = { "content-type": "application/json" };
const noRun = "00000000-0000-4000-8000-000000000000";
const digest = "0".repeat(64);

const a2aJson = { "content-type": "application/a2a+json", "a2a-version": "1.0" };
const a2aGet = { "a2a-version": "1.0" };

function httpJsonRoutes(): AuthenticatedRoute[] {
  const follow = JSON.stringify({
    message: { messageId: "sec-m1", role: "ROLE_USER", parts: [{ text: "x" }], taskId: noRun },
  });
  const configs = `/tasks/${noRun}/pushNotificationConfigs`;
  const route = (
    method: AuthenticatedRoute["method"],
    pattern: string,
    path: string,
    accepted: readonly number[],
    body?: string,
  ): AuthenticatedRoute => ({
    method,
    pattern,
    credential: "peer",
    accepted,
    build: async () => ({
      method,
      path,
      headers: body === undefined ? a2aGet : a2aJson,
      ...(body === undefined ? {} : { body }),
    }),
  });
  return [
    route("POST", "/message:send", "/message:send", [404], follow),
    route("POST", "/message:stream", "/message:stream", [404], follow),
    route("GET", "/tasks", "/tasks?pageSize=1", [200]),
    route("GET", "/tasks/:target", `/tasks/${noRun}`, [404]),
    route("POST", "/tasks/:target", `/tasks/${noRun}:cancel`, [404]),
    route(
      "POST",
      "/tasks/:taskId/pushNotificationConfigs",
      configs,
      [400, 404],
      JSON.stringify({ url: "https://push.example/hook" }),
    ),
    route("GET", "/tasks/:taskId/pushNotificationConfigs", configs, [400, 404]),
    route("GET", "/tasks/:taskId/pushNotificationConfigs/:configId", `${configs}/c1`, [400, 404]),
    route(
      "DELETE",
      "/tasks/:taskId/pushNotificationConfigs/:configId",
      `${configs}/c1`,
      [400, 404],
    ),
    route("GET", "/extendedAgentCard", "/extendedAgentCard", [200]),
  ];
}

export const authenticatedRoutes: readonly AuthenticatedRoute[] = [
  {
    method: "POST",
    pattern: "/admin/v1/callers",
    credential: "admin",
    accepted: [201],
    build: async (f) => ({
      method: "POST",
      path: "/admin/v1/callers",
      headers: json,
      body: JSON.stringify({ name: `made-${f.unique()}`, kind: "peer" }),
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/callers",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/callers", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/callers/:name",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({ method: "GET", path: `/admin/v1/callers/${f.peer.name}`, headers: {} }),
  },
  {
    method: "PATCH",
    pattern: "/admin/v1/callers/:name",
    // Raising the tier widens: it needs the operator too (src/services/widening.ts).
    credential: "admin+operator",
    withoutOperator: 403,
    accepted: [200],
    build: async (f) => ({
      method: "PATCH",
      path: `/admin/v1/callers/${await f.freshPeer()}`,
      headers: json,
      body: JSON.stringify({ tier: "internal" }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/callers/:name/revoke",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({
      method: "POST",
      path: `/admin/v1/callers/${await f.freshPeer()}/revoke`,
      headers: json,
      body: JSON.stringify({ reason: "security suite" }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/callers/:name/restore",
    // Restoring widens (from tier none): it needs the operator too (src/services/widening.ts).
    credential: "admin+operator",
    withoutOperator: 403,
    accepted: [200],
    build: async (f) => ({
      method: "POST",
      path: `/admin/v1/callers/${await f.revokedPeer()}/restore`,
      headers: json,
      body: JSON.stringify({ tier: "public" }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/callers/:name/rotate",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({
      method: "POST",
      path: `/admin/v1/callers/${await f.freshPeer()}/rotate`,
      headers: {},
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/admin-token/rotate",
    // A new admin token for the whole cluster: the operator too (src/services/rotate-admin-token.ts).
    // The old token keeps working for an hour, so the suite's own admin token stays good.
    credential: "admin+operator",
    withoutOperator: 403,
    accepted: [200],
    build: async () => ({
      method: "POST",
      path: "/admin/v1/admin-token/rotate",
      headers: json,
      body: JSON.stringify({ graceSeconds: 3600 }),
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/callers/:name/push-hosts",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({
      method: "GET",
      path: `/admin/v1/callers/${f.peer.name}/push-hosts`,
      headers: {},
    }),
  },
  {
    // Removing push hosts needs only the admin token; adding one also the operator token.
    method: "PUT",
    pattern: "/admin/v1/callers/:name/push-hosts",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({
      method: "PUT",
      path: `/admin/v1/callers/${await f.freshPeer()}/push-hosts`,
      headers: json,
      body: JSON.stringify({ hosts: [] }),
    }),
  },
  {
    // A dry run of an empty file: the whole apply runs in a transaction and is rolled back.
    method: "POST",
    pattern: "/admin/v1/callers/apply",
    credential: "admin",
    accepted: [200],
    build: async () => ({
      method: "POST",
      path: "/admin/v1/callers/apply",
      headers: json,
      body: JSON.stringify({ callers: [], dryRun: true }),
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/callers/:name/ceiling",
    credential: "admin",
    accepted: [200],
    build: async (f) => ({
      method: "GET",
      path: `/admin/v1/callers/${f.peer.name}/ceiling`,
      headers: {},
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/tools",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/tools", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/overview",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/overview?hours=1", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/audit",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/audit?limit=1", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/audit/verify",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/audit/verify", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/doctor",
    // The server's own checks (src/services/server-doctor.ts): names and states, never a key.
    credential: "admin",
    accepted: [200],
    build: async () => ({
      method: "GET",
      path: "/admin/v1/doctor?modelCall=false",
      headers: {},
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/audit/checkpoints",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/audit/checkpoints", headers: {} }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/prune",
    // Deleting past-retention rows: the operator too (src/services/prune-tables.ts); a dry run
    // needs only the admin token.
    credential: "admin+operator",
    withoutOperator: 403,
    accepted: [200],
    build: async () => ({
      method: "POST",
      path: "/admin/v1/prune",
      headers: json,
      body: JSON.stringify({ apply: true }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/ceiling/preview",
    credential: "admin",
    accepted: [200],
    build: async () => ({
      method: "POST",
      path: "/admin/v1/ceiling/preview",
      headers: json,
      body: JSON.stringify({ tier: "internal", allow: ["bash"] }),
    }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/events",
    credential: "admin",
    accepted: [200],
    // `once` ends the stream after its first look, so the reply is complete.
    build: async () => ({ method: "GET", path: "/admin/v1/events?once", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/runs",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "GET", path: "/admin/v1/runs", headers: {} }),
  },
  {
    method: "GET",
    pattern: "/admin/v1/runs/:id",
    credential: "admin",
    // No such run: the handler's 404 is only reached once authenticated.
    accepted: [404],
    build: async () => ({ method: "GET", path: `/admin/v1/runs/${noRun}`, headers: {} }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/runs/:id/approve",
    credential: "admin+operator",
    accepted: [404],
    build: async () => ({
      method: "POST",
      path: `/admin/v1/runs/${noRun}/approve`,
      headers: json,
      body: JSON.stringify({ callId: "c1", argsDigest: digest }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/runs/:id/reject",
    credential: "admin",
    accepted: [404],
    build: async () => ({
      method: "POST",
      path: `/admin/v1/runs/${noRun}/reject`,
      headers: json,
      body: JSON.stringify({ reason: "no" }),
    }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/runs/:id/cancel",
    credential: "admin",
    accepted: [200],
    build: async () => ({ method: "POST", path: `/admin/v1/runs/${noRun}/cancel`, headers: {} }),
  },
  {
    method: "POST",
    pattern: "/admin/v1/runs/:id/retry",
    credential: "admin",
    // No such run: the handler's 404 is only reached once authenticated.
    accepted: [404],
    build: async () => ({ method: "POST", path: `/admin/v1/runs/${noRun}/retry`, headers: {} }),
  },
  {
    method: "POST",
    pattern: "/a2a",
    credential: "peer",
    accepted: [200],
    build: async () => ({
      method: "POST",
      path: "/a2a",
      headers: { ...json, "a2a-version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
    }),
  },
  // The A2A HTTP+JSON binding: requests that authentication lets through and the handler then
  // answers without a write (a task that does not exist: 404; push configs: 400 when push is off).
  ...httpJsonRoutes(),
  {
    method: "POST",
    pattern: "/webhooks/github/:name",
    credential: "github",
    // 202 a run started; 200 a duplicate or an event the caller's filter ignores.
    accepted: [200, 202],
    build: async (f) => ({
      method: "POST",
      path: `/webhooks/github/${f.github.name}`,
      headers: {
        ...json,
        "x-github-event": "issues",
        "x-github-delivery": f.unique(),
      },
      body: JSON.stringify({ action: "opened", issue: { title: f.unique() } }),
    }),
  },
  {
    method: "POST",
    pattern: "/webhooks/ifttt/:name/:secret",
    credential: "ifttt",
    accepted: [200, 202],
    build: async (f) => ({
      method: "POST",
      path: `/webhooks/ifttt/${f.ifttt.name}/`,
      headers: { "content-type": "text/plain" },
      body: `note ${f.unique()}`,
    }),
  },
  {
    method: "POST",
    pattern: "/webhooks/:name",
    credential: "webhook",
    accepted: [200, 202],
    build: async (f) => ({
      method: "POST",
      path: `/webhooks/${f.webhook.name}`,
      headers: json,
      body: JSON.stringify({ build: f.unique() }),
    }),
  },
];

/** Routes anyone may call, on purpose. */
export const publicRoutes: readonly { method: string; pattern: string }[] = [
  { method: "GET", pattern: "/healthz" },
  { method: "GET", pattern: "/readyz" },
  { method: "GET", pattern: "/metrics" },
  { method: "GET", pattern: "/.well-known/agent-card.json" },
  { method: "GET", pattern: "/.well-known/agent.json" },
  { method: "GET", pattern: "/.well-known/jwks.json" },
  { method: "GET", pattern: "/admin/v1/openapi.json" },
  // The console's page, stylesheet and script: static, no data; the script asks for the token.
  { method: "GET", pattern: "/console" },
  { method: "GET", pattern: "/console/console.js" },
  { method: "GET", pattern: "/console/console.css" },
  // uPlot (MIT), the console's charting library, served by peergate itself: no CDN.
  { method: "GET", pattern: "/console/uplot.js" },
  { method: "GET", pattern: "/console/uplot.css" },
];
