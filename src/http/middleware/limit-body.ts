// Body size limit per route. Wraps Hono's bodyLimit (which counts streamed bytes when there is
// no Content-Length, or when Transfer-Encoding is also present) so an oversized body becomes our
// PayloadTooLargeError and goes through the one error mapper.
import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { PayloadTooLargeError } from "../../errors.ts";

export function limitBody(maxBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new PayloadTooLargeError(maxBytes);
    },
  });
}
