// The A2A 1.0 HTTP+JSON binding (spec §11) as a transcoding of the JSON-RPC one: each route names
// the 1.0 method it stands for, its path and query parameters and its body become that method's
// params, and the answer goes back through the same service path /a2a takes (service.ts
// `handleHttpJson`). So both bindings share one request handler, one task store scoped to the
// caller, one set of checks, and one sanitising of internal errors; this file only reads the
// HTTP pieces and writes the HTTP answer. It knows no web framework.
//
// Decided here, where the spec leaves room:
// - Paths are the spec's tenant-less ones. `POST /tasks/{id}:subscribe` (spec §11.3.2) and
//   `GET /tasks/{id}:subscribe` (a2a.proto's http rule) are both served, as the SDK does.
// - The version: the binding speaks 1.0 only, and an absent `A2A-Version` means 0.3 (§3.6.2), so a
//   request must say 1.0 (header or `?A2A-Version=`); otherwise VERSION_NOT_SUPPORTED (400).
// - A path parameter and the same field in the body must agree (`taskId` of a push config, `id` of
//   a cancel): a disagreement is 400, never a silent choice between the two.
// - Query values are typed here (whole numbers, `true`/`false`); a known parameter given twice is
//   400. Unknown parameters are ignored, as ProtoJSON ignores unknown fields.
// - Media types: a body must be `application/a2a+json` or `application/json` (or carry no
//   Content-Type); anything else is CONTENT_TYPE_NOT_SUPPORTED (400, the spec's mapping). Answers
//   are `application/a2a+json`, or `application/json` for a client that accepts only that.
// - Errors of A2A operations are google.rpc.Status bodies with an ErrorInfo (§11.6), the HTTP
//   status from the spec's table (§5.4). Refusals made before the binding is reached (401, 403 for
//   a browser Origin, a credential in the query, 413, 429, 503) stay the server's one
//   problem+json, the same on every route (src/http/problem.ts).
import {
  A2A_ERROR_CODE,
  ContentTypeNotSupportedError,
  RequestMalformedError,
  VersionNotSupportedError,
} from "@a2a-js/sdk/errors";
import { findDuplicateKey, maxJsonDepth, nestsDeeperThan } from "../json-text.ts";
import type { JsonRpcError, JsonRpcResponse } from "./json-rpc.ts";
import { streamEventId } from "./task-events.ts";

export const a2aJsonMediaType = "application/a2a+json";

/** The operations of the binding, by the 1.0 JSON-RPC method each one is. */
export type HttpJsonMethod =
  | "SendMessage"
  | "SendStreamingMessage"
  | "GetTask"
  | "ListTasks"
  | "CancelTask"
  | "SubscribeToTask"
  | "CreateTaskPushNotificationConfig"
  | "GetTaskPushNotificationConfig"
  | "ListTaskPushNotificationConfigs"
  | "DeleteTaskPushNotificationConfig"
  | "GetExtendedAgentCard";

type QueryType = "string" | "integer" | "boolean";

type Operation = {
  /** Whether a body is read: required, optional (may be empty), or never. */
  body: "required" | "optional" | "none";
  /** The query parameters that become params, with their types. */
  query: Readonly<Record<string, QueryType>>;
  /** The HTTP status of a success. */
  status: 200 | 201 | 204;
  streaming: boolean;
};

const operations: Readonly<Record<HttpJsonMethod, Operation>> = {
  SendMessage: { body: "required", query: {}, status: 200, streaming: false },
  SendStreamingMessage: { body: "required", query: {}, status: 200, streaming: true },
  GetTask: { body: "none", query: { historyLength: "integer" }, status: 200, streaming: false },
  ListTasks: {
    body: "none",
    query: {
      contextId: "string",
      status: "string",
      pageSize: "integer",
      pageToken: "string",
      historyLength: "integer",
      statusTimestampAfter: "string",
      includeArtifacts: "boolean",
    },
    status: 200,
    streaming: false,
  },
  CancelTask: { body: "optional", query: {}, status: 200, streaming: false },
  SubscribeToTask: { body: "optional", query: {}, status: 200, streaming: true },
  CreateTaskPushNotificationConfig: { body: "required", query: {}, status: 201, streaming: false },
  GetTaskPushNotificationConfig: { body: "none", query: {}, status: 200, streaming: false },
  ListTaskPushNotificationConfigs: { body: "none", query: {}, status: 200, streaming: false },
  DeleteTaskPushNotificationConfig: { body: "none", query: {}, status: 204, streaming: false },
  GetExtendedAgentCard: { body: "none", query: {}, status: 200, streaming: false },
};

export function isHttpJsonStreaming(method: HttpJsonMethod): boolean {
  return operations[method].streaming;
}

export function successStatus(method: HttpJsonMethod): 200 | 201 | 204 {
  return operations[method].status;
}

/** One HTTP+JSON request, as read off the wire by the route (nothing parsed yet). */
export type HttpJsonCall = {
  method: HttpJsonMethod;
  /** Path parameters, already percent-decoded, under their ProtoJSON field names. */
  path: Readonly<Record<string, string>>;
  /** Every query parameter with all its values. */
  query: ReadonlyMap<string, readonly string[]>;
  /** The raw body, or undefined when the method reads none. */
  body: string | undefined;
};

export type ParamsResult =
  | { ok: true; params: Record<string, unknown> }
  | { ok: false; error: RequestMalformedError | ContentTypeNotSupportedError };

/** Whether a Content-Type names a JSON body this binding reads (absent counts as JSON). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  const type = contentType?.split(";", 1)[0]?.trim().toLowerCase();
  return !type || type === "application/json" || type === a2aJsonMediaType;
}

function readQuery(
  call: HttpJsonCall,
  into: Record<string, unknown>,
): RequestMalformedError | undefined {
  const known = operations[call.method].query;
  for (const [name, type] of Object.entries(known)) {
    const values = call.query.get(name);
    if (!values || values.length === 0) continue;
    if (values.length > 1) {
      return new RequestMalformedError(`the query parameter ${name} is given more than once`);
    }
    const value = values[0] ?? "";
    if (value === "") continue;
    if (type === "integer") {
      if (!/^-?\d{1,15}$/.test(value)) {
        return new RequestMalformedError(
          `${name} must be a whole number (got ${JSON.stringify(value.slice(0, 40))})`,
        );
      }
      into[name] = Number(value);
    } else if (type === "boolean") {
      if (value !== "true" && value !== "false") {
        return new RequestMalformedError(
          `${name} must be true or false (got ${JSON.stringify(value.slice(0, 40))})`,
        );
      }
      into[name] = value === "true";
    } else {
      into[name] = value;
    }
  }
  return undefined;
}

function readBody(
  call: HttpJsonCall,
  contentType: string | undefined,
): { ok: true; value: Record<string, unknown> } | { ok: false; error: ParamsError } {
  const need = operations[call.method].body;
  const text = need === "none" ? "" : (call.body ?? "");
  if (text.trim() === "") {
    if (need === "required") {
      return { ok: false, error: new RequestMalformedError("the request needs a JSON body") };
    }
    return { ok: true, value: {} };
  }
  if (!isJsonMediaType(contentType)) {
    const type = contentType?.split(";", 1)[0]?.trim().slice(0, 60) ?? "";
    return {
      ok: false,
      error: new ContentTypeNotSupportedError(
        `send the body as ${a2aJsonMediaType} or application/json (got ${JSON.stringify(type)})`,
      ),
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: new RequestMalformedError("the body is not valid JSON") };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: new RequestMalformedError("the body must be a JSON object") };
  }
  // The same two refusals as a JSON-RPC envelope (json-rpc.ts): a repeated key means different
  // things to different readers, and deep nesting overflows the SDK's recursive converters.
  const duplicate = findDuplicateKey(text);
  if (duplicate !== undefined) {
    return {
      ok: false,
      error: new RequestMalformedError(
        `the body repeats the key ${JSON.stringify(duplicate.slice(0, 40))}`,
      ),
    };
  }
  if (nestsDeeperThan(value)) {
    return {
      ok: false,
      error: new RequestMalformedError(`the body nests more than ${maxJsonDepth} levels deep`),
    };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

type ParamsError = RequestMalformedError | ContentTypeNotSupportedError;

/** The method's params from the path, the query and the body (module comment). */
export function buildParams(call: HttpJsonCall, contentType: string | undefined): ParamsResult {
  const body = readBody(call, contentType);
  if (!body.ok) return body;
  const params: Record<string, unknown> = { ...body.value };
  const queryError = readQuery(call, params);
  if (queryError) return { ok: false, error: queryError };
  for (const [field, value] of Object.entries(call.path)) {
    const given = params[field];
    if (given !== undefined && given !== "" && given !== value) {
      return {
        ok: false,
        error: new RequestMalformedError(
          `${field} in the body (${JSON.stringify(String(given).slice(0, 60))}) differs from the one in the path`,
        ),
      };
    }
    params[field] = value;
  }
  return { ok: true, params };
}

/** The version error of a request that does not ask for 1.0 (module comment). */
export function versionError(requested: string | undefined): VersionNotSupportedError {
  const said = requested?.trim()
    ? JSON.stringify(requested.slice(0, 20))
    : "none (which means 0.3)";
  return new VersionNotSupportedError(
    `the HTTP+JSON binding speaks A2A 1.0: send the header A2A-Version: 1.0 (the request named ${said}); v0.3 clients use JSON-RPC at /a2a`,
  );
}

/** A task path segment: `{id}`, `{id}:cancel` or `{id}:subscribe`, still percent-encoded. */
export type TaskTarget =
  | { ok: true; id: string; action: "get" | "cancel" | "subscribe" }
  | { ok: false; reason: "no-route" | "bad-encoding" };

/**
 * Reads the last segment of `/tasks/{segment}` as sent. The id is percent-decoded only after the
 * action is split off, so an id holding an encoded colon (`a%3Acancel`) is an id, not an action.
 */
export function parseTaskTarget(rawSegment: string): TaskTarget {
  const colon = rawSegment.lastIndexOf(":");
  const suffix = colon === -1 ? "" : rawSegment.slice(colon + 1);
  const action = suffix === "cancel" ? "cancel" : suffix === "subscribe" ? "subscribe" : "get";
  if (colon !== -1 && action === "get") return { ok: false, reason: "no-route" };
  const encoded = action === "get" ? rawSegment : rawSegment.slice(0, colon);
  if (encoded === "") return { ok: false, reason: "no-route" };
  try {
    return { ok: true, id: decodeURIComponent(encoded), action };
  } catch {
    return { ok: false, reason: "bad-encoding" };
  }
}

/** google.rpc.Status in its JSON form, as the binding answers every A2A error. */
export type HttpJsonStatus = {
  error: {
    code: number;
    status: string;
    message: string;
    details: Record<string, unknown>[];
  };
};

// The spec's table (§5.4), keyed by the JSON-RPC code each A2A error has; the JSON-RPC protocol
// errors a transcoded request can still meet are invalid arguments.
const byCode: Readonly<Record<number, readonly [number, string]>> = {
  [A2A_ERROR_CODE.TASK_NOT_FOUND]: [404, "NOT_FOUND"],
  [A2A_ERROR_CODE.TASK_NOT_CANCELABLE]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.PUSH_NOTIFICATION_NOT_SUPPORTED]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.UNSUPPORTED_OPERATION]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.CONTENT_TYPE_NOT_SUPPORTED]: [400, "INVALID_ARGUMENT"],
  [A2A_ERROR_CODE.INVALID_AGENT_RESPONSE]: [500, "INTERNAL"],
  [A2A_ERROR_CODE.EXTENDED_CARD_NOT_CONFIGURED]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.EXTENSION_SUPPORT_REQUIRED]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.VERSION_NOT_SUPPORTED]: [400, "FAILED_PRECONDITION"],
  [A2A_ERROR_CODE.INVALID_PARAMS]: [400, "INVALID_ARGUMENT"],
  [A2A_ERROR_CODE.INVALID_REQUEST]: [400, "INVALID_ARGUMENT"],
  [A2A_ERROR_CODE.PARSE_ERROR]: [400, "INVALID_ARGUMENT"],
  [A2A_ERROR_CODE.METHOD_NOT_FOUND]: [404, "NOT_FOUND"],
};

function errorDetails(data: unknown): Record<string, unknown>[] {
  if (!Array.isArray(data)) return [];
  return data.filter(
    (d): d is Record<string, unknown> =>
      typeof d === "object" &&
      d !== null &&
      typeof (d as { "@type"?: unknown })["@type"] === "string",
  );
}

/** The HTTP answer of a 1.0 JSON-RPC error (with its ErrorInfo in `data`). */
export function toHttpJsonError(error: JsonRpcError): { status: number; body: HttpJsonStatus } {
  const [status, name] = byCode[error.code] ?? [500, "INTERNAL"];
  return {
    status,
    body: {
      error: {
        code: status,
        status: name,
        message: error.message,
        details: errorDetails(error.data),
      },
    },
  };
}

/**
 * The media type of an answer: `application/a2a+json` (spec 1.0.1), unless the client's Accept
 * names `application/json` and not the A2A type nor a wildcard.
 */
export function chooseMediaType(accept: string | undefined): string {
  if (!accept) return a2aJsonMediaType;
  const types = accept
    .split(",")
    .map((range) => range.split(";").map((piece) => piece.trim().toLowerCase()))
    .filter(([, ...parameters]) => {
      const quality = parameters.find((p) => /^q\s*=/.test(p));
      return quality === undefined || Number(quality.split("=")[1]) > 0;
    })
    .map(([type = ""]) => type);
  const a2aAccepted = types.some(
    (t) => t === a2aJsonMediaType || t === "*/*" || t === "application/*",
  );
  return !a2aAccepted && types.includes("application/json") ? "application/json" : a2aJsonMediaType;
}

/** One SSE event of the HTTP+JSON binding: a StreamResponse, or a google.rpc.Status as `event: error`. */
export type HttpJsonEvent = { event?: "error"; data: string; id?: string };

/** What the HTTP+JSON binding answers; `contentType` is the negotiated JSON type. */
export type HttpJsonReply = (
  | { type: "json"; status: 200 | 201; contentType: string; body: unknown }
  | { type: "empty" }
  | { type: "error"; status: number; contentType: string; body: HttpJsonStatus }
  | { type: "sse"; stream: AsyncIterable<HttpJsonEvent> & { close(): void } }
) & {
  /** Extensions the request activated: the answer's `A2A-Extensions` header names them. */
  extensions?: readonly string[];
};

/** The JSON-RPC responses of a stream as the HTTP+JSON binding writes them (spec §11.7). */
export function toHttpJsonEvents(
  stream: AsyncIterable<JsonRpcResponse> & { close(): void },
): AsyncIterable<HttpJsonEvent> & { close(): void } {
  return {
    async *[Symbol.asyncIterator]() {
      for await (const response of stream) {
        if (response.error) {
          yield { event: "error", data: JSON.stringify(toHttpJsonError(response.error).body) };
        } else {
          // The event's id in the task's log: what a reconnecting client sends as Last-Event-ID.
          const id = streamEventId(response);
          yield { data: JSON.stringify(response.result), ...(id === undefined ? {} : { id }) };
        }
      }
    },
    close: () => stream.close(),
  };
}
