// web_fetch: one HTTP(S) GET, bounded in bytes and time, through the egress guard (src/net/
// egress.ts: only public addresses, each hop resolved once and the connected peer checked), with
// at most 5 redirects, followed here, never by the client, each checked against the URL grants.
import { TextDecoder } from "node:util";
import { z } from "zod";
import {
  createEgress,
  defaultEgressMaxBytes,
  EgressError,
  type EgressOptions,
  type HopResponse,
} from "../../net/egress.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import { checkUrlGrant } from "../../policy/url-grants.ts";
import { defineBuiltin } from "../builtin.ts";
import { describeBinary, isBinary, sniffBytes } from "../text.ts";
import { runGuarded, ToolCallError } from "../tool-call-error.ts";
import { outsideUrlGrantCode, type ToolImplementation } from "../types.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const webFetchTool = defineBuiltin(
  {
    name: "web_fetch",
    category: "web",
    risk: "read-only",
    disclosure: "public",
    egress: true,
    // The gate reads the URL: the caller's URL grants bind it, and every redirect hop.
    reads: { url: (args) => readUrlArgument(args) },
    description:
      "Fetch a public http(s) URL with GET and return its text (HTML, JSON, plain text). Private, loopback and metadata addresses are refused; large pages are cut.",
  },
  ({ options }) => createWebFetchTool(options.webFetch ?? {}),
);

function readUrlArgument(args: unknown): string {
  const url = (args as { url?: unknown } | null)?.url;
  return typeof url === "string" ? url : "";
}

export type WebFetchOptions = Omit<EgressOptions, "purpose"> & {
  /** Whole call, redirects included (default 15 s). */
  readonly timeoutMs?: number;
};

export const webFetchDefaults = {
  maxBytes: defaultEgressMaxBytes,
  timeoutMs: 15_000,
  maxRedirects: 5,
};

const inputSchema = z.strictObject({
  url: z.string().min(1).max(8192).describe("An http:// or https:// URL."),
});

const redirectStatuses = new Set([301, 302, 303, 307, 308]);

const textualType =
  /^(text\/|application\/(json|xml|xhtml\+xml|javascript|ecmascript|x-javascript|ld\+json|rss\+xml|atom\+xml)|[a-z]+\/[a-z0-9.+-]*\+(json|xml)\b)/i;

function refuse(message: string): ToolCallError {
  return new ToolCallError("refused", message);
}

export function createWebFetchTool(options: WebFetchOptions = {}): ToolImplementation {
  const timeoutMs = options.timeoutMs ?? webFetchDefaults.timeoutMs;
  const { planHop, fetchHop } = createEgress({ ...options, purpose: webFetchTool.descriptor.name });

  return {
    name: "web_fetch",
    description: webFetchTool.descriptor.description,
    inputSchema,
    timeoutMs: timeoutMs + 5_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        const input = inputSchema.parse(args);
        let url: URL;
        try {
          url = new URL(input.url);
        } catch {
          throw new ToolCallError("invalid-input", `${quoteUntrusted(input.url)} is not a URL.`);
        }
        const deadline = AbortSignal.timeout(timeoutMs);
        const signal = AbortSignal.any([invocation.signal, deadline]);
        const redirects: string[] = [];
        try {
          for (;;) {
            const hop = await planHop(url, signal);
            const response = await fetchHop(hop, signal);
            const location = response.headers.location;
            if (redirectStatuses.has(response.status) && typeof location === "string") {
              if (redirects.length >= webFetchDefaults.maxRedirects) {
                throw refuse(
                  `More than ${webFetchDefaults.maxRedirects} redirects; stopped at ${quoteUntrusted(url.href)}.`,
                );
              }
              let next: URL;
              try {
                next = new URL(location, url);
              } catch {
                throw new ToolCallError(
                  "failed",
                  `The redirect target ${quoteUntrusted(location)} is not a URL.`,
                );
              }
              if (invocation.urlGrants !== undefined) {
                const granted = checkUrlGrant(next, invocation.urlGrants);
                if (!granted.granted) {
                  throw new ToolCallError(
                    outsideUrlGrantCode,
                    `Redirect ${redirects.length + 1} to ${quoteUntrusted(next.href)} leaves the URL grants: ${granted.reason}`,
                  );
                }
              }
              redirects.push(next.href);
              url = next;
              continue;
            }
            return { ok: true as const, ...describeResponse(url, response, redirects) };
          }
        } catch (error) {
          if (error instanceof ToolCallError) throw error;
          if (error instanceof EgressError) throw new ToolCallError(error.code, error.message);
          if (invocation.signal.aborted)
            throw new ToolCallError("interrupted", "The call was stopped.");
          if (deadline.aborted) {
            throw new ToolCallError("timeout", `The fetch took longer than ${timeoutMs} ms.`);
          }
          const code = (error as NodeJS.ErrnoException).code ?? "an error";
          throw new ToolCallError(
            "failed",
            `The fetch of ${quoteUntrusted(url.href)} failed: ${code}.`,
          );
        }
      }),
  };
}

function describeResponse(url: URL, response: HopResponse, redirects: readonly string[]) {
  const contentType = String(response.headers["content-type"] ?? "");
  const encoding = String(response.headers["content-encoding"] ?? "identity").toLowerCase();
  const sample = response.body.subarray(0, sniffBytes);
  const base = {
    url: url.href,
    status: response.status,
    contentType,
    bytes: response.body.length,
    ...(redirects.length > 0 ? { redirects: [...redirects] } : {}),
  };
  const textual =
    encoding === "identity" &&
    (textualType.test(contentType) || (contentType === "" && !isBinary(sample)));
  if (!textual || sample.includes(0)) {
    return {
      content: {
        ...base,
        note: `Not text (${encoding === "identity" ? describeBinary(sample) : `${encoding}-encoded`}); contents not shown.`,
      },
      truncated: response.truncated,
    };
  }
  const charset = /charset=["']?([\w.:-]+)/i.exec(contentType)?.[1] ?? "utf-8";
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset);
  } catch {
    decoder = new TextDecoder("utf-8");
  }
  return {
    content: { ...base, text: decoder.decode(response.body) },
    truncated: response.truncated,
  };
}
