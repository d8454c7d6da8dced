// The A2A surface on Hono: the public agent card and the JSON-RPC endpoint. The protocol lives in
// src/a2a/service.ts; this file only moves HTTP in and out of it.
//
// - GET /.well-known/agent-card.json (and the v0.2 path /.well-known/agent.json): public; the
//   1.0 or v0.3 shape by `A2A-Version` (the header, else the `A2A-Version` query parameter);
//   ETag, Cache-Control (max-age), Vary: A2A-Version, 304 on an If-None-Match match (the spec's
//   §8.6 caching, the TCK's CARD-CACHE-001/002); Last-Modified (CARD-CACHE-003) is when this
//   server started serving the card. If-Modified-Since alone is not answered 304: instances
//   sharing a database started at different times, and only the ETag names the card's content.
// - GET /.well-known/jwks.json: public; the key the 1.0 card is signed with (src/a2a/card-signing.ts).
// - POST /a2a: the `authenticate` guard (src/http/middleware/a2a-auth.ts) runs first and throws
//   UnauthenticatedError for missing or bad credentials, which the app's error mapper answers 401 with WWW-Authenticate: Bearer — never a
//   JSON-RPC 200. An authenticated request gets JSON-RPC: one JSON response (errors included,
//   HTTP 200), or SSE for the streaming methods, each event `data: <JSON-RPC response>` (also an
//   error of a streaming method, when the client accepts text/event-stream; each task event with
//   its `id:`, which a client sends back as `Last-Event-ID` to resume), or HTTP 204 with no
//   body for a JSON-RPC notification (see src/a2a/json-rpc.ts).
//   RateLimitedError and UnavailableError thrown by the service go to the same mapper (429 with
//   Retry-After, 503).
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import { readRequestedVersion } from "../../a2a/json-rpc.ts";
import type { A2aService } from "../../a2a/service.ts";
import { streamEventId } from "../../a2a/task-events.ts";
import type { A2aEnv } from "../middleware/a2a-auth.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import { writeEventStream } from "../sse.ts";
import { a2aHttpJsonRoutes } from "./a2a-http-json.ts";

export type A2aRouteDeps = {
  a2a: A2aService;
  /**
   * Sets `caller` or throws UnauthenticatedError; nothing of the request is read before it
   * (the server's is `requireA2aCaller`).
   */
  authenticate: MiddlewareHandler<A2aEnv>;
  /** SSE comment sent while a stream is quiet, so idle proxies keep it open (default 15 s). */
  keepAliveMs?: number;
};

const cardCacheControl = "public, max-age=300";

const requestedVersion = (c: Context) =>
  readRequestedVersion(c.req.header("a2a-version"), c.req.query("A2A-Version"));

/** Whether an If-None-Match header matches `etag` (weak comparison, lists and `*`). */
export function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  const bare = (tag: string) => tag.trim().replace(/^W\//, "");
  return ifNoneMatch.split(",").some((tag) => tag.trim() === "*" || bare(tag) === bare(etag));
}

export function a2aRoutes(deps: A2aRouteDeps): Hono {
  const app = new Hono();
  const keepAliveMs = deps.keepAliveMs ?? 15_000;
  const cardLastModified = new Date().toUTCString();

  const serveCard = async (c: Context) => {
    const card = await deps.a2a.agentCard(requestedVersion(c));
    c.header("ETag", card.etag);
    c.header("Cache-Control", cardCacheControl);
    c.header("Vary", "A2A-Version");
    c.header("Last-Modified", cardLastModified);
    if (matchesEtag(c.req.header("if-none-match"), card.etag)) return c.body(null, 304);
    return c.body(card.body, 200, { "Content-Type": "application/json; charset=utf-8" });
  };
  app.get("/.well-known/agent-card.json", serveCard);
  app.get("/.well-known/agent.json", serveCard);
  app.get("/.well-known/jwks.json", (c) => {
    const jwks = deps.a2a.jwks();
    c.header("ETag", jwks.etag);
    c.header("Cache-Control", cardCacheControl);
    if (matchesEtag(c.req.header("if-none-match"), jwks.etag)) return c.body(null, 304);
    return c.body(jwks.body, 200, { "Content-Type": "application/jwk-set+json" });
  });

  // A browser page must not drive /a2a with ambient credentials; tokens never ride in a URL.
  app.use("/a2a", refuseBrowserOrigins(), refuseQueryCredentials());
  app.post("/a2a", deps.authenticate, async (c) => {
    const caller = c.get("caller");
    const reply = await deps.a2a.handleJsonRpc(await c.req.text(), {
      caller,
      version: requestedVersion(c),
      contentType: c.req.header("content-type"),
      accept: c.req.header("accept"),
      lastEventId: c.req.header("last-event-id"),
      extensions: c.req.header("a2a-extensions"),
    });
    if (reply.extensions && reply.extensions.length > 0) {
      c.header("A2A-Extensions", reply.extensions.join(", "));
    }
    if (reply.type === "none") return c.body(null, 204);
    if (reply.type === "json") return c.json(reply.response, 200);

    return writeEventStream(c, reply.stream, {
      keepAliveMs,
      toEvent: (event) => {
        // The event's id in the task's log: what a reconnecting client sends as Last-Event-ID.
        const id = streamEventId(event);
        return { data: JSON.stringify(event), ...(id === undefined ? {} : { id }) };
      },
    });
  });

  app.route("/", a2aHttpJsonRoutes({ ...deps, keepAliveMs }));

  return app;
}
