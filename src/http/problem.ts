// The one error path of the HTTP layer: every error becomes an RFC 9457 problem+json body with
// a literal `code` and the request id. Unknown errors are logged in full and answered with a bare
// 500, so an internal message never reaches a client.
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  PayloadTooLargeError,
  type Problem,
  RateLimitedError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
  ValidationError,
} from "../errors.ts";
import type { Logger } from "../log.ts";
import { asUnavailableError } from "../services/db-errors.ts";
import { createOutageLog, type OutageLog } from "./outage-log.ts";

export type ProblemBody = {
  type: string;
  title: string;
  status: number;
  code: string;
  detail?: string;
  requestId: string;
  problems?: readonly Problem[];
};

type Mapped = {
  status: ContentfulStatusCode;
  code: string;
  title: string;
  detail?: string;
  problems?: readonly Problem[];
  headers?: Record<string, string>;
};

/** The one body every authentication failure gets, whatever the real reason. */
export const unauthenticatedDetail = "missing or invalid credentials";

function mapError(error: unknown): Mapped | undefined {
  if (error instanceof ValidationError)
    return {
      status: 400,
      code: error.code,
      title: "Invalid request",
      detail: error.message,
      problems: error.problems,
    };
  if (error instanceof UnauthenticatedError)
    return {
      status: 401,
      code: error.code,
      title: "Unauthorized",
      detail: unauthenticatedDetail,
      headers: { "WWW-Authenticate": 'Bearer realm="peergate"' },
    };
  if (error instanceof ForbiddenError)
    return {
      status: 403,
      code: error.code,
      title: "Forbidden",
      detail: error.message,
      ...(error.problems ? { problems: error.problems } : {}),
    };
  if (error instanceof NotFoundError)
    return { status: 404, code: error.code, title: "Not found", detail: error.message };
  if (error instanceof ConflictError)
    return { status: 409, code: error.code, title: "Conflict", detail: error.message };
  if (error instanceof PayloadTooLargeError)
    return { status: 413, code: error.code, title: "Payload too large", detail: error.message };
  if (error instanceof UnsupportedMediaTypeError)
    return {
      status: 415,
      code: error.code,
      title: "Unsupported media type",
      detail: error.message,
    };
  if (error instanceof RateLimitedError)
    return {
      status: 429,
      code: error.code,
      title: "Too many requests",
      detail: error.message,
      headers: { "Retry-After": String(Math.max(1, Math.ceil(error.retryAfterSeconds))) },
    };
  // The database down, hung or full, seen through drizzle's wrapping: fail closed with 503.
  const unavailable = asUnavailableError(error);
  if (unavailable)
    return {
      status: 503,
      code: unavailable.code,
      title: "Service unavailable",
      detail: unavailable.message,
      headers: { "Retry-After": "1" },
    };
  if (error instanceof HTTPException && error.status < 500)
    return {
      status: error.status as ContentfulStatusCode,
      code: `http-${error.status}`,
      title: error.message || "Request refused",
    };
  // Anything else (a ConfigError, a bug) is the server's problem: a 500.
  return undefined;
}

export function problemResponse(
  c: Context,
  mapped: Omit<Mapped, "headers">,
  headers?: Record<string, string>,
): Response {
  const body: ProblemBody = {
    type: `https://peergate.dev/problems/${mapped.code}`,
    title: mapped.title,
    status: mapped.status,
    code: mapped.code,
    requestId: (c.get("requestId") as string | undefined) ?? "unknown",
    ...(mapped.detail === undefined ? {} : { detail: mapped.detail }),
    ...(mapped.problems === undefined ? {} : { problems: mapped.problems }),
  };
  // c.body keeps headers set earlier on the context (X-Request-Id among them).
  return c.body(JSON.stringify(body), mapped.status, {
    "Content-Type": "application/problem+json",
    ...headers,
  });
}

/** The innermost error, whose message says what the driver saw (not drizzle's query text). */
function rootCause(error: unknown): unknown {
  let e = error;
  for (let depth = 0; depth < 6; depth++) {
    const cause = (e as { cause?: unknown } | null)?.cause;
    if (!cause) break;
    e = cause;
  }
  return e;
}

export function createErrorHandler(logger: Logger, outage: OutageLog = createOutageLog(logger)) {
  return function handleError(error: unknown, c: Context): Response {
    const mapped = mapError(error);
    if (mapped) {
      if (error instanceof UnauthenticatedError) {
        logger.info("request refused: unauthenticated", {
          requestId: c.get("requestId"),
          reason: error.reason,
        });
      } else if (mapped.status === 503) {
        // The operator needs to see why requests fail (the client only gets the short reason),
        // once per outage rather than once per request.
        outage.failed(mapped.detail, rootCause(error));
      }
      return problemResponse(c, mapped, mapped.headers);
    }
    logger.error("request failed", { requestId: c.get("requestId"), error });
    return problemResponse(c, {
      status: 500,
      code: "internal",
      title: "Internal error",
      detail: "peergate could not answer this request; the request id is in the server log",
    });
  };
}
