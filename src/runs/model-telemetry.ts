// One model call as a span with the OpenTelemetry GenAI semantic conventions, fed by the AI SDK's
// own telemetry hooks (`telemetry.integrations` on the call: its lifecycle events, not a wrapper
// of ours around the provider). The SDK's OpenTelemetry integration lives in a package peergate
// does not ship (@ai-sdk/otel), so this file is that integration, cut to what a run needs:
// `chat <model>`, provider, model, token usage, finish reason, response id.
//
// The SDK is told `recordInputs`/`recordOutputs` false unless the operator turned
// PEERGATE_TRACE_CONTENT on, so prompts and answers do not even reach the hooks; only then are
// they written, as `gen_ai.input.messages` / `gen_ai.output.messages`. With tracing off nothing
// is passed to the SDK at all.
import type { LanguageModelCallEndEvent, LanguageModelCallStartEvent, Telemetry } from "ai";
import { failSpan, type Span, SpanKind, startSpan, traceContent, tracing } from "../trace.ts";

/** Longest content attribute written when content is allowed; the rest is cut. */
const contentLimit = 64 * 1024;

export type ModelCallTelemetry = {
  /** Spread into the `generateText`/`streamText` options. */
  readonly options: {
    telemetry?: { recordInputs: boolean; recordOutputs: boolean; integrations: Telemetry };
  };
  /** Ends a span the SDK left open (an abort it reported nowhere). */
  close(): void;
};

const off: ModelCallTelemetry = { options: {}, close: () => {} };

/** The telemetry of one model step (one AI SDK call with one model call). */
export function modelCallTelemetry(): ModelCallTelemetry {
  if (!tracing()) return off;
  const content = traceContent();
  let span: Span | undefined;
  const end = (error?: unknown) => {
    if (!span) return;
    if (error !== undefined) failSpan(span, error);
    span.end();
    span = undefined;
  };
  const integration: Telemetry = {
    onLanguageModelCallStart(event: LanguageModelCallStartEvent) {
      end();
      span = startSpan(
        `chat ${event.modelId}`,
        {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": providerName(event.provider),
          "gen_ai.request.model": event.modelId,
          ...(event.maxOutputTokens === undefined
            ? {}
            : { "gen_ai.request.max_tokens": event.maxOutputTokens }),
          ...(content && event.messages
            ? { "gen_ai.input.messages": cut(JSON.stringify(event.messages)) }
            : {}),
        },
        { kind: SpanKind.CLIENT },
      );
    },
    onLanguageModelCallEnd(event: LanguageModelCallEndEvent) {
      if (!span) return;
      const usage = event.usage;
      span.setAttributes({
        "gen_ai.response.model": event.modelId,
        "gen_ai.response.finish_reasons": [String(event.finishReason)],
        ...(event.responseId ? { "gen_ai.response.id": event.responseId } : {}),
        ...(usage.inputTokens === undefined
          ? {}
          : { "gen_ai.usage.input_tokens": usage.inputTokens }),
        ...(usage.outputTokens === undefined
          ? {}
          : { "gen_ai.usage.output_tokens": usage.outputTokens }),
        ...(content ? { "gen_ai.output.messages": cut(JSON.stringify(event.content)) } : {}),
      });
      end();
    },
    onStepError: (event) => end(event.error),
    onAbort: () => end(new DOMException("aborted", "AbortError")),
    onError: (error) => end(error),
  };
  return {
    options: {
      telemetry: { recordInputs: content, recordOutputs: content, integrations: integration },
    },
    close: () => end(),
  };
}

/** `openai.chat` → `openai`: the GenAI conventions name the provider, not the API. */
function providerName(provider: string): string {
  return provider.split(".")[0] ?? provider;
}

function cut(text: string): string {
  return text.length > contentLimit ? `${text.slice(0, contentLimit)}…` : text;
}
