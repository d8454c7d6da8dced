// Exporting traces: the OpenTelemetry SDK, loaded only when an OTLP endpoint is configured
// (src/server.ts imports this file dynamically; `tracing` in src/config.ts says when). It
// registers a tracer provider, the AsyncLocalStorage context manager (so a span started in a
// request is the parent of what the request awaits) and batches spans to OTLP/HTTP as JSON.
// `shutdown` exports what is left, bounded in time, and puts the no-op API back.
//
// Every span is recorded whatever the incoming `traceparent`'s sampled flag says: a sender
// (authenticated or not) must not be able to keep its own requests out of the operator's traces.
// The exporter itself still reads the standard OTEL_EXPORTER_OTLP_* headers, certificate,
// timeout and compression variables from the environment (docs/operating.md, "Traces").
import { context, DiagLogLevel, diag, trace } from "@opentelemetry/api";
import type { TracingConfig } from "./config.ts";
import type { Logger } from "./log.ts";
import { setTracing } from "./trace.ts";

export type TraceExport = {
  /** Exports what is buffered and stops; waits at most `timeoutMs`. */
  shutdown(timeoutMs: number): Promise<void>;
};

export async function startTraceExport(
  config: TracingConfig,
  logger: Logger,
  version: string,
): Promise<TraceExport> {
  const [sdk, { AsyncLocalStorageContextManager }, { resourceFromAttributes }, otlp, semconv] =
    await Promise.all([
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/semantic-conventions"),
    ]);
  // The SDK's own complaints (a collector that refuses or cannot be reached) as warnings: traces
  // that do not arrive must not fail silently. Its message only, never its arguments.
  const warn = (message: string) =>
    logger.warn("traces: the OpenTelemetry SDK reports a problem", { message });
  diag.setLogger(
    { error: warn, warn, info: () => {}, debug: () => {}, verbose: () => {} },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const exporter = new otlp.OTLPTraceExporter({ url: config.url, timeoutMillis: 10_000 });
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({
      [semconv.ATTR_SERVICE_NAME]: config.serviceName,
      [semconv.ATTR_SERVICE_VERSION]: version,
    }),
    sampler: new sdk.AlwaysOnSampler(),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter,
        // Enough for a burst of runs; past it spans are dropped, never memory grown.
        maxQueueSize: 4_096,
        exportTimeoutMillis: 10_000,
      }),
    ],
  });
  const contexts = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contexts);
  trace.setGlobalTracerProvider(provider);
  setTracing(true, { content: config.content });
  logger.info("exporting traces", {
    endpoint: new URL(config.url).origin,
    service: config.serviceName,
    ...(config.content ? { content: "prompts, answers and tool arguments included" } : {}),
  });
  let stopped: Promise<void> | undefined;
  return {
    shutdown(timeoutMs) {
      stopped ??= (async () => {
        setTracing(false);
        const done = await Promise.race([
          provider.shutdown().then(
            () => true,
            (error: unknown) => {
              logger.warn("the last spans could not be exported", { error });
              return true;
            },
          ),
          new Promise<false>((resolve) => setTimeout(resolve, timeoutMs, false).unref()),
        ]);
        if (!done) logger.warn("the last spans were not exported in time", { timeoutMs });
        trace.disable();
        context.disable();
        diag.disable();
      })();
      return stopped;
    },
  };
}
