// Prometheus metrics. One registry per running server (not prom-client's global one), so two
// app instances in one test process never share counters. Labels carry route patterns, never raw
// paths: a raw path could hold an IFTTT secret and would explode the series count.
//
// The domain gauges (runs, parked runs, tool calls, authentication failures, revocations, tokens
// and cost by model, the unchained audit tail) are read from the database at each scrape, so they are the same on every
// instance sharing it and survive restarts: scrape one instance, or take max() across them.
//
// /metrics needs `Authorization: Bearer <PEERGATE_METRICS_TOKEN>` when that is set, and is
// refused on a listener other than loopback without one (it tells who calls and how often).
import { monitorEventLoopDelay } from "node:perf_hooks";
import { sql } from "drizzle-orm";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { safeEqual } from "./auth/secrets.ts";
import { readUnchainedTail } from "./db/audit.ts";
import { type DbOrTx, selectRows } from "./db/client.ts";
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
  /** The database the domain gauges are read from; without it only HTTP and process metrics. */
  db?: DbOrTx;
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
  if (options.db) registerDomainGauges(registry, options.db);
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

/** A gauge whose series are set from one query at each scrape. */
function gaugeFromQuery<L extends string>(
  registry: Registry,
  spec: { name: string; help: string; labelNames: readonly L[] },
  read: () => Promise<{ labels: Record<L, string>; value: number }[]>,
): void {
  new Gauge({
    ...spec,
    registers: [registry],
    async collect() {
      this.reset();
      for (const row of await read()) this.set(row.labels, row.value);
    },
  });
}

function registerDomainGauges(registry: Registry, db: DbOrTx): void {
  const rows = <R extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
    selectRows<R>(db, query);
  gaugeFromQuery(
    registry,
    {
      name: "peergate_runs",
      help: "Runs in the database, by origin (a2a, webhook) and state (completed, failed, parked …).",
      labelNames: ["origin", "status"] as const,
    },
    async () =>
      (
        await rows<{ origin: string; status: string; n: number }>(
          sql`select origin, status, count(*)::int as n from runs group by origin, status`,
        )
      ).map((r) => ({ labels: { origin: r.origin, status: r.status }, value: r.n })),
  );
  gaugeFromQuery(
    registry,
    { name: "peergate_runs_parked", help: "Runs waiting for an operator.", labelNames: [] },
    async () => {
      const [r] = await rows<{ n: number }>(
        sql`select count(*)::int as n from runs where status = 'parked'`,
      );
      return [{ labels: {}, value: r?.n ?? 0 }];
    },
  );
  gaugeFromQuery(
    registry,
    {
      name: "peergate_tool_calls",
      help: "Tool calls, by how they ended (completed, refused, parked, rejected …) and the refusal or failure code.",
      labelNames: ["status", "code"] as const,
    },
    async () =>
      (
        await rows<{ status: string; code: string | null; n: number }>(
          sql`select status, code, count(*)::int as n from tool_calls group by status, code`,
        )
      ).map((r) => ({ labels: { status: r.status, code: r.code ?? "" }, value: r.n })),
  );
  gaugeFromQuery(
    registry,
    {
      name: "peergate_auth_failure_events",
      help: "Authentication failures recorded in the audit trail (one per source and window), by surface (peer, webhook, admin, operator …).",
      labelNames: ["surface"] as const,
    },
    async () =>
      (
        await rows<{ surface: string | null; n: number }>(
          sql`select data->>'surface' as surface, count(*)::int as n from audit_events where kind = 'auth.failed' group by 1`,
        )
      ).map((r) => ({ labels: { surface: r.surface ?? "unknown" }, value: r.n })),
  );
  gaugeFromQuery(
    registry,
    { name: "peergate_revocations", help: "Callers revoked (audit events).", labelNames: [] },
    async () => {
      const [r] = await rows<{ n: number }>(
        sql`select count(*)::int as n from audit_events where kind = 'caller.revoked'`,
      );
      return [{ labels: {}, value: r?.n ?? 0 }];
    },
  );
  gaugeFromQuery(
    registry,
    {
      name: "peergate_audit_unchained",
      help: "Audit events written but not chained yet; it grows while chaining fails (an append itself fails with the change it records).",
      labelNames: [],
    },
    async () => {
      return [{ labels: {}, value: (await readUnchainedTail(db)).count }];
    },
  );
  const usage = async () =>
    rows<{ model: string | null; tokens: number; cost: number }>(
      sql`select model_id as model, coalesce(sum((budget_used->>'tokens')::numeric), 0)::float8 as tokens, coalesce(sum((budget_used->>'costUsd')::numeric), 0)::float8 as cost from runs group by model_id`,
    );
  gaugeFromQuery(
    registry,
    {
      name: "peergate_model_tokens",
      help: "Tokens used by runs, by model.",
      labelNames: ["model"] as const,
    },
    async () =>
      (await usage()).map((r) => ({ labels: { model: r.model ?? "none" }, value: r.tokens })),
  );
  gaugeFromQuery(
    registry,
    {
      name: "peergate_model_cost_usd",
      help: "US dollars charged to runs, by model (from policies/models.yaml prices).",
      labelNames: ["model"] as const,
    },
    async () =>
      (await usage()).map((r) => ({ labels: { model: r.model ?? "none" }, value: r.cost })),
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
