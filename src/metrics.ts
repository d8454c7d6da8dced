// Prometheus metrics. One registry per running server (not prom-client's global one), so two
// app instances in one test process never share counters. Labels carry route patterns, never raw
// paths: a raw path could hold an IFTTT secret and would explode the series count.
//
// By convention: cumulative counts are counters named `_total`; Node's process metrics keep
// prom-client's standard names (process_cpu_seconds_total, nodejs_heap_size_used_bytes …) so stock
// dashboards find them; `peergate_build_info{version,node} 1` says what runs.
//
// The domain counters (runs, tool calls, authentication failures, revocations, tokens and cost by
// model) are kept in this process, told as the events happen (src/metrics-events.ts): a scrape
// reads memory. They count this instance's events since it started: sum them across instances.
// The two gauges of shared state (runs waiting for an operator, the unchained audit tail) are
// read from the database at most once a minute, however often /metrics is scraped.
//
// /metrics needs `Authorization: Bearer <PEERGATE_METRICS_TOKEN>` when that is set, and is
// refused on a listener other than loopback without one (it tells who calls and how often).
import { monitorEventLoopDelay } from "node:perf_hooks";
import { sql } from "drizzle-orm";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { safeEqual } from "./auth/secrets.ts";
import { readUnchainedTail } from "./db/audit.ts";
import { type DbOrTx, selectRows } from "./db/client.ts";
import type { InstanceEvents } from "./metrics-events.ts";
import type { ModelCallLog } from "./metrics-model.ts";

export type Metrics = {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route" | "status">;
  render(): Promise<{ contentType: string; body: string }>;
  /** Whether a scrape carrying `authorization` may read the metrics, and why not. */
  admit(
    authorization: string | undefined,
  ): { ok: true } | { ok: false; status: 401 | 403; reason: string };
};

export type MetricsOptions = {
  processMetrics?: boolean;
  /** The database the shared-state gauges are read from (at most once a minute). */
  db?: DbOrTx;
  /** This instance's events, counted as they happen (the domain counters). */
  events?: InstanceEvents;
  /** `peergate_build_info`'s labels. */
  build?: { version: string; node: string };
  /** The clock of the gauges' cache (tests). */
  clock?: () => number;
  /** PEERGATE_METRICS_TOKEN. */
  token?: string | undefined;
  /** The host the server listens on: without a token, only loopback may scrape. */
  host?: string;
  /** Timed model calls (src/metrics-model.ts), for the model latency histogram. */
  modelCalls?: ModelCallLog;
  /** The run engine's start queue (src/runs/start-queue.ts): its length and waits. */
  runStarts?: RunStartsView;
  /** The event loop's recent stalls (createEventLoopLag). */
  eventLoopLag?: EventLoopLag;
};

const loopback = new Set(["127.0.0.1", "::1", "localhost"]);

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  if (options.build) registerBuildInfo(registry, options.build);
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
  if (options.events) registerDomainCounters(registry, options.events);
  if (options.db) registerSharedGauges(registry, options.db, options.clock);
  if (options.runStarts) registerRunStartMetrics(registry, options.runStarts);
  if (options.eventLoopLag) registerEventLoopLag(registry, options.eventLoopLag);
  if (options.modelCalls) {
    const modelLatency = new Histogram({
      name: "peergate_model_call_duration_seconds",
      help: "Time from a model request until its answer starts (streamed) or ends, by model and outcome (ok, error).",
      labelNames: ["model", "outcome"] as const,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    });
    options.modelCalls.subscribe((model, seconds, outcome) =>
      modelLatency.observe({ model, outcome }, seconds),
    );
  }
  const token = options.token || undefined;
  return {
    registry,
    httpRequests,
    httpDuration,
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
    admit(authorization) {
      if (!token) {
        if (options.host === undefined || loopback.has(options.host)) return { ok: true };
        return {
          ok: false,
          status: 403,
          reason:
            "/metrics is off on a listener other than loopback until PEERGATE_METRICS_TOKEN is set",
        };
      }
      const presented = /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
      if (presented && safeEqual(presented, token)) return { ok: true };
      return {
        ok: false,
        status: 401,
        reason: "/metrics needs Authorization: Bearer <PEERGATE_METRICS_TOKEN>",
      };
    },
  };
}

function registerBuildInfo(registry: Registry, build: { version: string; node: string }): void {
  new Gauge({
    name: "peergate_build_info",
    help: "Always 1; the labels say which peergate and which Node run here.",
    labelNames: ["version", "node"] as const,
    registers: [registry],
  }).set(build, 1);
}

function registerDomainCounters(registry: Registry, events: InstanceEvents): void {
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter({ name, help, labelNames, registers: [registry] });
  const runs = counter(
    "peergate_runs_total",
    "Run segments ended on this instance, by origin (a2a, webhook) and how they left the run (completed, failed, parked …); a resumed run counts again.",
    ["origin", "status"] as const,
  );
  const toolCalls = counter(
    "peergate_tool_calls_total",
    "Tool call records given a status (completed, refused, parked, rejected …), by status and refusal or failure code; a parked call later answered counts once more.",
    ["status", "code"] as const,
  );
  const authFailures = counter(
    "peergate_auth_failures_total",
    "Failed authentications, by surface (peer, webhook, admin, operator …).",
    ["surface"] as const,
  );
  const revocations = counter(
    "peergate_revocations_total",
    "Callers revoked through this instance.",
    [] as const,
  );
  const tokens = counter(
    "peergate_model_tokens_total",
    "Tokens used by runs on this instance, by model.",
    ["model"] as const,
  );
  const cost = counter(
    "peergate_model_cost_usd_total",
    "US dollars charged to runs on this instance, by model (from policies/models.yaml prices).",
    ["model"] as const,
  );
  events.subscribe((event) => {
    switch (event.kind) {
      case "segment-ended": {
        const { ended } = event;
        runs.inc({ origin: ended.origin, status: ended.status });
        const model = ended.model ?? "none";
        tokens.inc({ model }, ended.tokens);
        cost.inc({ model }, ended.costUsd);
        break;
      }
      case "tool-call":
        toolCalls.inc({ status: event.status, code: event.code ?? "" });
        break;
      case "auth-failure":
        authFailures.inc({ surface: event.surface });
        break;
      case "revocation":
        revocations.inc();
        break;
    }
  });
}

/** How long a shared-state gauge's reading serves scrapes. */
const sharedGaugeMaxAgeMs = 60_000;

/** A gauge of state shared by every instance, read from the database at most once a minute. */
function cachedGauge(
  registry: Registry,
  spec: { name: string; help: string },
  read: () => Promise<number>,
  clock: () => number,
): void {
  let value: number | undefined;
  let readAt = Number.NEGATIVE_INFINITY;
  new Gauge({
    ...spec,
    registers: [registry],
    async collect() {
      if (value === undefined || clock() - readAt >= sharedGaugeMaxAgeMs) {
        value = await read();
        readAt = clock();
      }
      this.set(value);
    },
  });
}

function registerSharedGauges(
  registry: Registry,
  db: DbOrTx,
  clock: () => number = () => performance.now(),
): void {
  cachedGauge(
    registry,
    {
      name: "peergate_runs_parked",
      help: "Runs waiting for an operator, in the database (read at most once a minute).",
    },
    async () => {
      const [r] = await selectRows<{ n: number }>(
        db,
        sql`select count(*)::int as n from runs where status = 'parked'`,
      );
      return r?.n ?? 0;
    },
    clock,
  );
  cachedGauge(
    registry,
    {
      name: "peergate_audit_unchained",
      help: "Audit events written but not chained yet (read at most once a minute); it grows while chaining fails.",
    },
    async () => (await readUnchainedTail(db)).count,
    clock,
  );
}

// ---------------------------------------------------------------- load: starts and the event loop
// Issue 28: what an operator needs to see a stall and its cause. The start queue's length and
// waits (src/runs/start-queue.ts) and the event loop's delay over a recent window.

/** What the metrics read of the run engine's start queue. */
export type RunStartsView = {
  stats(): { readonly waiting: number; readonly inFlight: number };
  onWaited(listener: (seconds: number) => void): () => void;
};

function registerRunStartMetrics(registry: Registry, starts: RunStartsView): void {
  new Gauge({
    name: "peergate_run_starts_waiting",
    help: "Run starts waiting for a place (PEERGATE_RUN_STARTS_AT_ONCE) on this instance.",
    registers: [registry],
    collect() {
      this.set(starts.stats().waiting);
    },
  });
  new Gauge({
    name: "peergate_run_starts_in_flight",
    help: "Run starts in flight (caller re-read, admission, run row and audit) on this instance.",
    registers: [registry],
    collect() {
      this.set(starts.stats().inFlight);
    },
  });
  const waited = new Histogram({
    name: "peergate_run_start_wait_seconds",
    help: "Time a run start waited for a place among the starts in flight on this instance.",
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  starts.onWaited((seconds) => waited.observe(seconds));
}

/** The event loop's delay over the current and the last completed window. */
export type EventLoopLagReading = {
  /** The longest stall seen in the window, in milliseconds. */
  readonly maxMs: number;
  readonly p99Ms: number;
  /** How far back the reading reaches, in seconds. */
  readonly windowSeconds: number;
};

export type EventLoopLag = {
  read(): EventLoopLagReading;
  stop(): void;
};

/**
 * Watches the event loop (perf_hooks' monitorEventLoopDelay) in windows of `windowMs`: a reading
 * covers the window in progress and the last completed one, so a stall is visible for one to two
 * windows after it, whoever asks (a scrape, /readyz) and however often.
 */
export function createEventLoopLag(options: { readonly windowMs?: number } = {}): EventLoopLag {
  const windowMs = options.windowMs ?? 10_000;
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  let windowStart = performance.now();
  let last = { maxMs: 0, p99Ms: 0 };
  const current = () => ({
    // Empty until the first sample: max and percentiles are then meaningless.
    maxMs: histogram.count === 0 ? 0 : histogram.max / 1e6,
    p99Ms: histogram.count === 0 ? 0 : histogram.percentile(99) / 1e6,
  });
  // A stalled loop runs this late, never early: the stall is in the window it ends.
  const rotate = setInterval(() => {
    last = current();
    histogram.reset();
    windowStart = performance.now();
  }, windowMs);
  rotate.unref();
  return {
    read() {
      const recent = current();
      return {
        maxMs: Math.max(recent.maxMs, last.maxMs),
        p99Ms: Math.max(recent.p99Ms, last.p99Ms),
        windowSeconds: (performance.now() - windowStart + windowMs) / 1000,
      };
    },
    stop() {
      clearInterval(rotate);
      histogram.disable();
    },
  };
}

function registerEventLoopLag(registry: Registry, lag: EventLoopLag): void {
  new Gauge({
    name: "peergate_event_loop_lag_max_seconds",
    help: "The longest the event loop was held (every request waited at least this long) over the last 10 to 20 seconds.",
    registers: [registry],
    collect() {
      this.set(lag.read().maxMs / 1000);
    },
  });
  new Gauge({
    name: "peergate_event_loop_lag_p99_seconds",
    help: "The 99th percentile of the event loop's delay over the last 10 to 20 seconds.",
    registers: [registry],
    collect() {
      this.set(lag.read().p99Ms / 1000);
    },
  });
}
