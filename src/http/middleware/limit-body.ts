// Body size limits. The route's limit is enforced as the handler reads, never ahead of it: a
// declared Content-Length over the limit is refused before a byte is read, and a streamed body
// (no Content-Length, or Transfer-Encoding as well) errors with PayloadTooLargeError the moment
// it passes the limit. Nothing is buffered here, so a handler that refuses a request before
// reading its body (an unknown name, a bad bearer) reads none of it — Hono's own bodyLimit reads
// the whole body first, which let an unauthenticated sender make the server read 25 MiB.
import type { Context, MiddlewareHandler } from "hono";
import { PayloadTooLargeError } from "../../errors.ts";

/** The limit of routes that set none. */
export const defaultMaxBodyBytes = 1024 * 1024;
/** GitHub sends payloads of up to 25 MB. */
export const githubMaxBodyBytes = 25 * 1024 * 1024;

/** What is read of a body before its sender is authenticated (an unknown name, a throttled source). */
export const unauthenticatedBodyBytes = 64 * 1024;

/** The declared length when it binds the body (Content-Length without Transfer-Encoding). */
function declaredLength(request: Request): number | undefined {
  const length = request.headers.get("content-length");
  if (length === null || request.headers.has("transfer-encoding")) return undefined;
  const value = Number.parseInt(length, 10);
  return Number.isFinite(value) ? value : undefined;
}

function countBytes(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
): ReadableStream<Uint8Array> {
  let size = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        size += chunk.byteLength;
        if (size > maxBytes) controller.error(new PayloadTooLargeError(maxBytes));
        else controller.enqueue(chunk);
      },
    }),
  );
}

export function limitBody(maxBytes: number): MiddlewareHandler {
  return async function limitBodySize(c, next) {
    // A declared length within the limit binds the body (the HTTP parser reads no further), so
    // the body is not looked at: on the Node server, touching `raw.body` turns the lightweight
    // request into a full one with a web stream, which the handler's read then goes through.
    const declared = declaredLength(c.req.raw);
    if (declared !== undefined && declared <= maxBytes) return next();
    const body = c.req.raw.body;
    if (!body) return next();
    if (declared !== undefined) throw new PayloadTooLargeError(maxBytes);
    c.req.raw = new Request(c.req.raw, { body: countBytes(body, maxBytes), duplex: "half" });
    await next();
  };
}

/**
 * Reads the body if it is at most `maxBytes`, else reads no further than that and returns
 * undefined (the connection is then closed after the answer: see closeUnreadBodies).
 */
export async function readBodyUpTo(c: Context, maxBytes: number): Promise<Uint8Array | undefined> {
  const declared = declaredLength(c.req.raw);
  if (declared !== undefined && declared > maxBytes) return undefined;
  const body = c.req.raw.body;
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

/**
 * An answer sent before the request's body was received says `Connection: close`, so the
 * server closes the connection cleanly after it instead of reading (or timing out on) the rest,
 * and the client knows to send its next request on a new connection.
 */
export function closeUnreadBodies(): MiddlewareHandler {
  return async function closeUnreadBody(c, next) {
    await next();
    const incoming = (c.env as { incoming?: { complete?: boolean } } | undefined)?.incoming;
    if (incoming?.complete !== false) return;
    // Bytes that arrived with the request may not be parsed yet when the answer is ready (the
    // handler can finish within the tick that parsed the headers): give the parser that tick.
    await new Promise((resolve) => setImmediate(resolve));
    if (incoming.complete === false) c.res.headers.set("Connection", "close");
  };
}
