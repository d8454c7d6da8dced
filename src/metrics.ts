// Prometheus metrics. One registry per running server (not prom-client's global one), so two
// app instances in one test process never share counters. Labels carry route patterns, never raw
// paths: a raw path could hold an IFTTT secret and would explode the series count.
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

export type Metrics = {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route" | "status">;
  render(): Promise<{ contentType: string; body: string }>;
};

export function createMetrics(options: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: "peergate_" });
  const httpRequests = new Counter({
    name: "peergate_http_requests_total",
    help: "HTTP requests answered, by method, route pattern and status.",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: "peergate_http_request_duration_seconds",
    help: "Time to answer HTTP requests, by method, route pattern and status.",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    registry,
    httpRequests,
    httpDuration,
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
