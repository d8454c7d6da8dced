// One server span per HTTP request (src/trace.ts), named `METHOD route` by the HTTP semantic
// conventions once the route is known, the child of the `traceparent` the request arrived with.
// Everything the request does (authentication, the run, the access log line) happens inside it,
// so it all carries one trace id. The path itself is never recorded: an IFTTT secret travels in
// it; the route pattern says which surface was asked. Headers are never recorded either.
// While tracing is off this is one branch per request. The attribute names are the stable HTTP
// conventions, written out so that an instance without traces loads nothing of OpenTelemetry but
// the API.
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import { failSpan, inSpan, remoteContext, SpanKind, tracing } from "../../trace.ts";

/**
 * @example
 * app.use(traceRequests());
 */
export function traceRequests(): MiddlewareHandler {
  return async function traceRequest(c, next) {
    if (!tracing()) return next();
    const parent = remoteContext(c.req.header("traceparent"), c.req.header("tracestate"));
    const method = c.req.method;
    await inSpan(
      method,
      { "http.request.method": method, "url.scheme": "http" },
      async (span) => {
        try {
          await next();
        } finally {
          const pattern = routePath(c, -1);
          const matched = !(pattern === "" || pattern === "*" || pattern === "/*");
          if (matched) {
            span.updateName(`${method} ${pattern}`);
            span.setAttribute("http.route", pattern);
          }
          span.setAttribute("http.response.status_code", c.res.status);
          if (c.res.status >= 500) failSpan(span, undefined, String(c.res.status));
        }
      },
      { kind: SpanKind.SERVER, ...(parent ? { parent } : {}) },
    );
  };
}

/**
 * Authentication as a span of its own: the surface, and on success the caller's name and id
 * (never what the request presented). A refusal is an error span with the refusal's code.
 */
export function traceAuthentication<T extends { caller: { id: string; name: string } }>(
  surface: string,
  authenticate: () => Promise<T>,
): Promise<T> {
  return inSpan("peergate.authenticate", { "peergate.surface": surface }, async (span) => {
    const found = await authenticate();
    span.setAttributes({
      "peergate.caller.id": found.caller.id,
      "peergate.caller.name": found.caller.name,
    });
    return found;
  });
}
