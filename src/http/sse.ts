// One SSE writer for the A2A streams (JSON-RPC and HTTP+JSON): events as they come, a comment
// while the stream is quiet so idle proxies keep it open, and the source closed however the
// response ends (the client gone, the stream done, revocation closing the source).
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";

export type SseSource<T> = AsyncIterable<T> & { close(): void };

/** Writes `source` as an SSE response; `toEvent` gives each item's `data` (and `event` name). */
export function writeEventStream<T>(
  c: Context,
  source: SseSource<T>,
  options: {
    keepAliveMs: number;
    /** Each item's `data`, and its `event` name and `id` (the `Last-Event-ID` a reconnect sends). */
    toEvent: (item: T) => { data: string; event?: string; id?: string };
  },
): Response {
  c.header("X-Accel-Buffering", "no");
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => source.close());
    const keepAlive = setInterval(() => {
      void sse.write(": keep-alive\n\n");
    }, options.keepAliveMs);
    try {
      for await (const item of source) {
        if (sse.aborted) break;
        await sse.writeSSE(options.toEvent(item));
      }
    } finally {
      clearInterval(keepAlive);
      source.close();
    }
  });
}
