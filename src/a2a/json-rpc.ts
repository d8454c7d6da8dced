// The JSON-RPC 2.0 envelope, checked before anything reaches the SDK. The SDK is lax here: its
// 1.0 handler answers a malformed envelope with -32602 and a body that is not JSON with -32602 as
// well, where JSON-RPC says -32700 and -32600. The method table and the A2A-Version rules live
// here too: one endpoint serves the 1.0 names and the v0.3 names, and the header decides which
// set a request is read against (absent or empty means 0.3, as the spec says).
//
// Two JSON-RPC corners are decided here:
// - A notification (a valid request object without `id`) gets no reply, as JSON-RPC 2.0 demands:
//   HTTP 204, no body. It is also not executed. A2A defines no notification method: every method
//   has a result the client is meant to read, so a request without `id` is a client mistake, and
//   running it would cost the caller (a SendMessage starts a model run, spending its budgets, whose
//   answer nobody asked for) or change state without telling anyone (CancelTask). JSON-RPC lets a
//   server drop such a request silently; the refusal is logged. A body that is not a valid
//   request object (no `jsonrpc: "2.0"`, no method) is not a notification and is answered with
//   -32600 and `id: null`, as JSON-RPC says.
// - A batch (a JSON array) is not supported: it is answered with one -32600 error object, `id:
//   null` (not an array of answers), and none of its requests is executed.

import { TaskState } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import {
  A2A_ERROR_CODE,
  ContentTypeNotSupportedError,
  VersionNotSupportedError,
} from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler } from "@a2a-js/sdk/server";
import { storableJson } from "../db/storable.ts";
import { findDuplicateKey, maxJsonDepth, nestsDeeperThan } from "../json-text.ts";
import type { ProtocolVersion } from "./call-context.ts";

export type JsonRpcId = string | number | null;

export type JsonRpcError = { code: number; message: string; data?: unknown };

/** One JSON-RPC response object, as sent in a JSON body or in one SSE `data:` line. */
export type JsonRpcResponse = {
  jsonrpc: "2.0";
  id: JsonRpcId;
  result?: unknown;
  error?: JsonRpcError;
};

export type JsonRpcRequest = {
  jsonrpc: "2.0";
  id: JsonRpcId;
  method: string;
  params?: unknown;
};

const v1Methods = new Set([
  "SendMessage",
  "SendStreamingMessage",
  "GetTask",
  "ListTasks",
  "CancelTask",
  "SubscribeToTask",
  "CreateTaskPushNotificationConfig",
  "GetTaskPushNotificationConfig",
  "ListTaskPushNotificationConfigs",
  "DeleteTaskPushNotificationConfig",
  "GetExtendedAgentCard",
]);

const v03Methods = new Set([
  "message/send",
  "message/stream",
  "tasks/get",
  "tasks/cancel",
  "tasks/resubscribe",
  "tasks/pushNotificationConfig/set",
  "tasks/pushNotificationConfig/get",
  "tasks/pushNotificationConfig/list",
  "tasks/pushNotificationConfig/delete",
  "agent/getAuthenticatedExtendedCard",
]);

const streamingMethods = new Set([
  "SendStreamingMessage",
  "SubscribeToTask",
  "message/stream",
  "tasks/resubscribe",
]);

export function isStreamingMethod(method: string): boolean {
  return streamingMethods.has(method);
}

/**
 * The protocol a request speaks, from its `A2A-Version` header: 0.3 when absent or empty, 1.0
 * for "1", "1.0" or "1.0.x"; undefined for anything else (answered -32009).
 */
export function selectProtocolVersion(header: string | undefined): ProtocolVersion | undefined {
  const value = header?.trim() ?? "";
  if (value === "") return "0.3";
  const match = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(value);
  if (!match) return undefined;
  const major = Number(match[1]);
  const minor = Number(match[2] ?? "0");
  if (major === 1 && minor === 0) return "1.0";
  if (major === 0 && minor === 3) return "0.3";
  return undefined;
}

/** The card shape a GET of the agent card gets: 0.3 only for a 0.3 (or header-less) request. */
export function selectCardVersion(header: string | undefined): ProtocolVersion {
  return selectProtocolVersion(header) === "0.3" ? "0.3" : "1.0";
}

/** An A2A or JSON-RPC error in the wire shape of `version` (1.0 adds google.rpc.ErrorInfo). */
export function mapError(error: unknown, version: ProtocolVersion): JsonRpcError {
  return version === "1.0"
    ? (JsonRpcTransportHandler.mapToJSONRPCError(error) as JsonRpcError)
    : (LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(error) as JsonRpcError);
}

export function errorResponse(id: JsonRpcId, error: JsonRpcError): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error };
}

function plainError(code: number, message: string): JsonRpcError {
  return { code, message };
}

/**
 * The `A2A-Version` a request asks for: the header when it has a value, else the `A2A-Version`
 * query parameter (which the spec allows for clients that cannot set headers), else undefined
 * (0.3). An empty header counts as absent, as it does for the version itself.
 */
export function readRequestedVersion(
  header: string | undefined,
  query: string | undefined,
): string | undefined {
  if (header !== undefined && header.trim() !== "") return header;
  return query;
}

/**
 * Whether an `Accept` header names `text/event-stream` with a non-zero quality. A wildcard does
 * not count: a client that lists only `*\/*` has not said it parses SSE.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(",").some((range) => {
    const [type = "", ...parameters] = range.split(";").map((piece) => piece.trim());
    if (type.toLowerCase() !== "text/event-stream") return false;
    const quality = parameters.find((p) => /^q\s*=/i.test(p));
    return quality === undefined || Number(quality.split("=")[1]) > 0;
  });
}

export type EnvelopeCheck =
  | { ok: true; request: JsonRpcRequest; version: ProtocolVersion }
  | { ok: false; response: JsonRpcResponse }
  /** A valid request without `id`: answered with nothing and not executed (module comment). */
  | { ok: false; notification: { method: string } };

/** The id of a request object: null when absent (a notification, told apart later), undefined when invalid. */
function readId(value: unknown): JsonRpcId | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  if (!("id" in value)) return null;
  const id = (value as { id: unknown }).id;
  if (id === null || typeof id === "string") return id;
  if (typeof id === "number" && Number.isInteger(id)) return id;
  return undefined;
}

/**
 * Reads and checks one request: media type (-32005), JSON (-32700), envelope (-32600), then
 * whether it is a notification (no reply), version (-32009), method name (-32601). Params are
 * left to the SDK and to PeergateRequestHandler.
 */
export function checkEnvelope(
  body: string,
  headers: { version: string | undefined; contentType: string | undefined },
): EnvelopeCheck {
  const mediaType = headers.contentType?.split(";", 1)[0]?.trim().toLowerCase();
  if (mediaType && mediaType !== "application/json" && mediaType !== "application/a2a+json") {
    const error = new ContentTypeNotSupportedError(
      `send JSON-RPC requests as application/json (got ${JSON.stringify(mediaType.slice(0, 60))})`,
    );
    return { ok: false, response: errorResponse(null, mapError(error, "1.0")) };
  }

  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return {
      ok: false,
      response: errorResponse(
        null,
        plainError(A2A_ERROR_CODE.PARSE_ERROR, "Parse error: the body is not valid JSON"),
      ),
    };
  }
  if (Array.isArray(value)) {
    return {
      ok: false,
      response: errorResponse(
        null,
        plainError(
          A2A_ERROR_CODE.INVALID_REQUEST,
          "Invalid Request: batch requests are not supported",
        ),
      ),
    };
  }
  // A repeated key (`"method"` twice) would mean different things to different readers, and a
  // value nested thousands deep overflows the SDK's recursive converters: both are not requests.
  const duplicate = findDuplicateKey(body);
  if (duplicate !== undefined || nestsDeeperThan(value)) {
    return {
      ok: false,
      response: errorResponse(
        null,
        plainError(
          A2A_ERROR_CODE.INVALID_REQUEST,
          duplicate !== undefined
            ? `Invalid Request: the body repeats the key ${JSON.stringify(duplicate.slice(0, 40))}`
            : `Invalid Request: the body nests more than ${maxJsonDepth} levels deep`,
        ),
      ),
    };
  }
  const id = readId(value);
  if (typeof value !== "object" || value === null || id === undefined) {
    return {
      ok: false,
      response: errorResponse(
        null,
        plainError(
          A2A_ERROR_CODE.INVALID_REQUEST,
          "Invalid Request: id must be a string, an integer or null",
        ),
      ),
    };
  }
  const envelope = value as Record<string, unknown>;
  if (envelope.jsonrpc !== "2.0") {
    return {
      ok: false,
      response: errorResponse(
        id,
        plainError(A2A_ERROR_CODE.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'),
      ),
    };
  }
  if (typeof envelope.method !== "string" || envelope.method === "") {
    return {
      ok: false,
      response: errorResponse(
        id,
        plainError(
          A2A_ERROR_CODE.INVALID_REQUEST,
          "Invalid Request: method must be a non-empty string",
        ),
      ),
    };
  }
  const method = envelope.method;
  // `"id": null` is a request (whose answer carries id null); only a missing id is a notification.
  if (!("id" in envelope)) return { ok: false, notification: { method: method.slice(0, 100) } };

  const version = selectProtocolVersion(headers.version);
  if (version === undefined) {
    const error = new VersionNotSupportedError(
      `A2A-Version ${JSON.stringify(headers.version?.slice(0, 20))} is not supported; this agent speaks 1.0 and 0.3`,
    );
    return { ok: false, response: errorResponse(id, mapError(error, "1.0")) };
  }

  const known = version === "1.0" ? v1Methods : v03Methods;
  if (!known.has(method)) {
    const hint = (version === "1.0" ? v03Methods : v1Methods).has(method)
      ? version === "1.0"
        ? ` (${method} is a v0.3 method: send it without the A2A-Version header, or use the 1.0 name)`
        : ` (${method} is an A2A 1.0 method: send the header A2A-Version: 1.0)`
      : "";
    return {
      ok: false,
      response: errorResponse(
        id,
        plainError(
          A2A_ERROR_CODE.METHOD_NOT_FOUND,
          `Method not found: ${method.slice(0, 100)}${hint}`,
        ),
      ),
    };
  }

  const request: JsonRpcRequest = { jsonrpc: "2.0", id, method };
  // A NUL in a message would fail every write of the task and run (PostgreSQL refuses it).
  if ("params" in envelope) request.params = storableJson(envelope.params);
  if (method === "ListTasks") {
    const refusal = readStatusFilter(request.params);
    if (refusal) {
      return {
        ok: false,
        response: errorResponse(id, plainError(A2A_ERROR_CODE.INVALID_PARAMS, refusal)),
      };
    }
  }
  return { ok: true, request, version };
}

/** Every task state the proto names (`TASK_STATE_SUBMITTED` …), from the SDK's enum. */
const taskStateNames = new Set<string>(
  Object.values(TaskState).filter(
    (name): name is string => typeof name === "string" && name !== "TASK_STATE_UNSPECIFIED",
  ),
);

/**
 * ListTasks' `status` is an optional filter (A2A 1.0): absent, `TASK_STATE_UNSPECIFIED` (the proto
 * enum's zero, "not set") and `UNRECOGNIZED` (what the a2a-js client sends for a filter it was not
 * given: its ProtoJSON writer names the unset enum so) all mean no filter, and are removed here so
 * the SDK does not refuse them as "Invalid status filter: -1". Any other value that names no state
 * is refused, naming the field. Returns the refusal, or undefined.
 */
function readStatusFilter(params: unknown): string | undefined {
  if (typeof params !== "object" || params === null || Array.isArray(params)) return undefined;
  const record = params as Record<string, unknown>;
  const status = record.status;
  if (status === undefined) return undefined;
  if (
    status === "UNRECOGNIZED" ||
    status === "TASK_STATE_UNSPECIFIED" ||
    status === 0 ||
    status === -1 ||
    status === null
  ) {
    delete record.status;
    return undefined;
  }
  if (typeof status === "string" && taskStateNames.has(status)) return undefined;
  if (typeof status === "number" && Number.isInteger(status) && status >= 1 && status <= 8)
    return undefined;
  return `status must be a TASK_STATE_… name, such as TASK_STATE_COMPLETED, or be left out for every task (got ${JSON.stringify(status).slice(0, 60)})`;
}
