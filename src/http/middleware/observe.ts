// One middleware that times each request, counts it in the metrics by route pattern, logs one
// access line (at debug for health checks and metric scrapes, info for the rest), and tracks in-flight requests so shutdown can wait for them. Raw paths are not
// logged when a route matched; unmatched paths have long opaque segments (possible secrets)
// replaced, so a mistyped IFTTT URL cannot leak its secret into the log.
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import type { Logger } from "../../log.ts";
import type { Metrics } from "../../metrics.ts";
import type { OutageLog } from "../outage-log.ts";

export type InflightTracker = {
  readonly count: number;
  /** Resolves once no request is in flight. */
  drained(): Promise<void>;
};

export function createInflightTracker(): InflightTracker & { enter(): void; leave(): void } {
  let count = 0;
  let waiters: (() => void)[] = [];
  return {
    get count() {
      return count;
    },
    enter() {
      count += 1;
    },
    leave() {
      count -= 1;
      if (count === 0) {
        for (const w of waiters) w();
        waiters = [];
      }
    },
    drained() {
      return count === 0 ? Promise.resolve() : new Promise((resolve) => waiters.push(resolve));
    },
  };
}

const opaqueSegment = /\/[A-Za-z0-9_~.%-]{24,}/g;

/** Probes and scrapes, answered every few seconds by design: their access lines are debug. */
const quietRoutes = new Set(["/healthz", "/readyz", "/metrics"]);

export function redactPath(path: string): string {
  return path.replace(opaqueSegment, "/[redacted]");
}

export function observe(options: {
  logger: Logger;
  metrics: Metrics;
  inflight: ReturnType<typeof createInflightTracker>;
  /** Told of every answer, so a database outage's end is logged (src/http/outage-log.ts). */
  outage?: OutageLog;
  now?: () => number;
}): MiddlewareHandler {
  const now = options.now ?? (() => performance.now());
  return async function observeRequest(c, next) {
    const started = now();
    options.inflight.enter();
    try {
      await next();
    } finally {
      options.inflight.leave();
      const pattern = routePath(c, -1);
      const route = pattern === "" || pattern === "*" || pattern === "/*" ? "unmatched" : pattern;
      const status = String(c.res.status);
      const seconds = (now() - started) / 1000;
      const labels = { method: c.req.method, route, status };
      options.metrics.httpRequests.inc(labels);
      options.metrics.httpDuration.observe(labels, seconds);
      options.outage?.answered(route, c.res.status);
      const log = quietRoutes.has(route) ? options.logger.debug : options.logger.info;
      log.call(options.logger, "request", {
        requestId: c.get("requestId"),
        method: c.req.method,
        route,
        ...(route === "unmatched" ? { path: redactPath(c.req.path) } : {}),
        status: c.res.status,
        ms: Math.round(seconds * 1000 * 10) / 10,
      });
    }
  };
}
