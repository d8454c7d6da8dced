// Traces through the OpenTelemetry API only (docs/operating.md, "Traces"). Until
// src/trace-export.ts registers the SDK (an OTLP endpoint is configured) nothing here records:
// `inSpan` calls its function straight through and `startSpan` hands back one shared span that
// drops everything, so an instance without an endpoint pays a branch per span and loads no SDK.
//
// What a span may carry: names, ids, counts, statuses, durations. Never a credential, a header
// value, a prompt, an answer or tool arguments; the last three only when the operator turned
// PEERGATE_TRACE_CONTENT on (`traceContent()`), and credentials never.
import {
  type Attributes,
  type Context,
  context,
  createTraceState,
  INVALID_SPAN_CONTEXT,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

export type { Attributes, Context, Span };
export { ROOT_CONTEXT, SpanKind };

const tracer = trace.getTracer("peergate");
/** What a span is while tracing is off: records nothing, costs nothing. */
const idle: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

const state = { on: false, content: false };

/** Set by src/trace-export.ts once spans are exported (and back when it stops). */
export function setTracing(on: boolean, options: { content?: boolean } = {}): void {
  state.on = on;
  state.content = on && options.content === true;
}

/** Spans are being recorded and exported. */
export function tracing(): boolean {
  return state.on;
}

/** The operator allowed prompts, answers and tool arguments in spans (PEERGATE_TRACE_CONTENT=1). */
export function traceContent(): boolean {
  return state.content;
}

export type SpanOptions = { kind?: SpanKind; parent?: Context };

/**
 * Runs `fn` inside a new span (the active one while it runs, so what it calls nests under it).
 * A throw marks the span as an error with the error's class name, not its message (a message may
 * quote what a caller sent), and is thrown on.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T> | T,
  options: SpanOptions = {},
): Promise<T> {
  // Off: the function's own promise, not one more around it.
  if (!state.on) {
    try {
      return Promise.resolve(fn(idle));
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return tracer.startActiveSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes },
    options.parent ?? context.active(),
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        failSpan(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** A span the caller ends itself (one that starts and ends in different callbacks). */
export function startSpan(name: string, attributes: Attributes, options: SpanOptions = {}): Span {
  if (!state.on) return idle;
  return tracer.startSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes },
    options.parent ?? context.active(),
  );
}

/** Runs `fn` with `span` active, so spans started inside it are its children. */
export function withSpan<T>(span: Span, fn: () => T): T {
  if (!state.on) return fn();
  return context.with(trace.setSpan(context.active(), span), fn);
}

/** Marks a span failed: `error.type` is the error's class or code, never its message. */
export function failSpan(span: Span, error: unknown, type?: string): void {
  if (!state.on) return;
  const named =
    type ??
    (typeof (error as { code?: unknown })?.code === "string"
      ? String((error as { code: string }).code)
      : error instanceof Error
        ? error.name
        : "error");
  span.setAttribute("error.type", named);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** The trace and span ids of the active span, for a log line; undefined outside one. */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  if (!state.on) return undefined;
  const ids = trace.getActiveSpan()?.spanContext();
  if (!ids || ids.traceId === INVALID_SPAN_CONTEXT.traceId) return undefined;
  return { trace_id: ids.traceId, span_id: ids.spanId };
}

const traceparentPattern = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The context of a W3C `traceparent` (and `tracestate`) a request arrived with, or undefined when
 * there is none or it is malformed (then the request starts a trace of its own). Only the ids are
 * taken: the sampled flag decides nothing here (src/trace-export.ts records every request).
 */
export function remoteContext(
  traceparent: string | undefined,
  tracestate: string | undefined,
): Context | undefined {
  if (!state.on || traceparent === undefined) return undefined;
  const m = traceparentPattern.exec(traceparent.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as string[];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  const parent = {
    traceId: traceId as string,
    spanId: spanId as string,
    traceFlags: Number.parseInt(flags as string, 16) & 1,
    isRemote: true,
    ...(tracestate && tracestate.length <= 512 ? { traceState: createTraceState(tracestate) } : {}),
  };
  if (!isSpanContextValid(parent)) return undefined;
  return trace.setSpanContext(ROOT_CONTEXT, parent);
}

/** `traceparent` of the active span, for a request peergate sends; empty outside a span. */
export function traceHeaders(): Record<string, string> {
  if (!state.on) return {};
  const ids = trace.getActiveSpan()?.spanContext();
  if (!ids || !isSpanContextValid(ids)) return {};
  const flags = (ids.traceFlags & 1).toString(16).padStart(2, "0");
  return { traceparent: `00-${ids.traceId}-${ids.spanId}-${flags}` };
}
