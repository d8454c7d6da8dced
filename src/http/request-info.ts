// Facts about the request the services need, read once from Hono and passed on as plain values.
import type { Context } from "hono";

/** The peer address of the TCP connection. Forwarding headers are not trusted: there is no proxy. */
export function readSourceAddress(c: Context): string {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)
    ?.incoming;
  return incoming?.socket?.remoteAddress ?? "unknown";
}
