// The A2A gRPC binding over the same request handler as JSON-RPC (service.ts). The SDK's
// `grpcService` maps each gRPC method onto the handler and its A2A errors onto gRPC statuses;
// peergate puts its own rules around it, so that a gRPC caller meets what a JSON-RPC caller does:
//
// - the caller is authenticated from the `authorization` metadata by the function the server
//   passes in, the one POST /a2a uses (bearer token or JWT, throttled per source, each refusal
//   audited). Every refusal reads the same, UNAUTHENTICATED "authentication required"
//   (RESOURCE_EXHAUSTED past the failure limit), whatever the reason;
// - the caller scopes everything: a `tenant` in a request is ignored, and another caller's task
//   is NOT_FOUND, as it is "not found" on JSON-RPC;
// - errors that leave the A2A world are answered as gRPC means them: a caller past its limits
//   RESOURCE_EXHAUSTED, the database gone UNAVAILABLE, a caller found revoked UNAUTHENTICATED.
//   Anything the SDK does not map itself (it would answer UNKNOWN with the error's own message)
//   is INTERNAL "Internal error": the detail goes to the log, never to the caller;
// - a streamed answer is pumped (event-stream.ts), so a reader that goes away never freezes its
//   task, and registered under its caller, so revoking the caller ends it.
//
// Only A2A 1.0 is served here (the SDK's `lf.a2a.v1.A2AService`); the SDK refuses any other
// `a2a-version` metadata, and its absence (which means 0.3), with FAILED_PRECONDITION.
import { isIP } from "node:net";
import type { StreamResponse } from "@a2a-js/sdk";
import { A2AError } from "@a2a-js/sdk/errors";
import { GRPC_STATUS_CODE, grpcStatusFor } from "@a2a-js/sdk/errors/grpc";
import {
  type A2ARequestHandler,
  ServerCallContext,
  type ServerCallContextBuilder,
} from "@a2a-js/sdk/server";
import { grpcService } from "@a2a-js/sdk/server/grpc";
import type { Caller } from "../domain/caller.ts";
import { RateLimitedError, UnauthenticatedError, UnavailableError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { failSpan, inSpan, remoteContext, SpanKind, startSpan, withSpan } from "../trace.ts";
import {
  CallerUser,
  markStreaming,
  readEscalated,
  setLastEventId,
  setStreamSignal,
  toEscalated,
} from "./call-context.ts";
import { pumpEvents, type StreamRegistry } from "./event-stream.ts";
import { activateUsageExtension } from "./usage-extension.ts";

/**
 * Checks a call's `authorization` metadata, sent from `source` (the peer's address): the caller,
 * or UnauthenticatedError / RateLimitedError (the server's is the one POST /a2a uses).
 */
export type GrpcAuthenticate = (
  authorization: string | undefined,
  source: string,
) => Promise<Caller>;

/** The service implementation to add to a grpc-js server beside the SDK's `A2AService`. */
export type A2aGrpcImplementation = ReturnType<typeof grpcService>;

type GrpcCall = Parameters<Parameters<typeof grpcService>[0]["userBuilder"]>[0];

/**
 * A gRPC status with the message peergate chooses. The SDK answers an A2AError marked as a gRPC
 * one with its `status` and message, and attaches no ErrorInfo for a name it does not know.
 */
export class GrpcStatusError extends A2AError {
  readonly transport = "grpc";
  readonly status: number;
  constructor(status: number, message: string) {
    super({ message });
    this.name = "PeergateGrpcStatus";
    this.status = status;
  }
}

/** The address of `peer` as grpc-js reports it (`1.2.3.4:5678`, `::1:5678`), without the port. */
export function readPeerAddress(peer: string): string {
  const colon = peer.lastIndexOf(":");
  const host = colon < 0 ? peer : peer.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return isIP(host) ? host : "unknown";
}

/** The one metadata value of `key`, or several joined as HTTP joins a doubled header (and so refused). */
function readMetadata(call: GrpcCall, key: string): string | undefined {
  const values = call.metadata.get(key).map((v) => (typeof v === "string" ? v : v.toString()));
  return values.length === 0 ? undefined : values.join(", ");
}

const refused = () =>
  new GrpcStatusError(GRPC_STATUS_CODE.UNAUTHENTICATED, "authentication required");

/** What an error that is not the SDK's own becomes; the detail is logged, never sent. */
function toStatus(error: unknown, logger: Logger, where: Record<string, unknown>): A2AError {
  const escalated = error instanceof Error ? (toEscalated(error) ?? error) : error;
  if (escalated instanceof RateLimitedError) {
    return new GrpcStatusError(
      GRPC_STATUS_CODE.RESOURCE_EXHAUSTED,
      `${escalated.message}; retry after ${escalated.retryAfterSeconds} s`,
    );
  }
  if (escalated instanceof UnavailableError) {
    return new GrpcStatusError(
      GRPC_STATUS_CODE.UNAVAILABLE,
      "temporarily unavailable; retry later",
    );
  }
  if (escalated instanceof UnauthenticatedError) return refused();
  if (error instanceof A2AError && grpcStatusFor(error) !== GRPC_STATUS_CODE.UNKNOWN) return error;
  logger.error("A2A gRPC request failed with an internal error", { ...where, error });
  return new GrpcStatusError(GRPC_STATUS_CODE.INTERNAL, "Internal error");
}

export type GrpcServiceDeps = {
  handler: A2ARequestHandler;
  authenticate: GrpcAuthenticate;
  /** The service's registry of open streams (closed per caller on revocation, all on shutdown). */
  streams: StreamRegistry;
  logger: Logger;
};

/** The A2A gRPC service, as its spans name it (the A2A 1.0 proto's package and service). */
const grpcServiceName = "lf.a2a.v1.A2AService";

export function createGrpcImplementation(deps: GrpcServiceDeps): A2aGrpcImplementation {
  const { logger, streams } = deps;
  const target = deps.handler;
  // The call each authenticated user came with: a stream detaches when its call is cancelled.
  const callOf = new WeakMap<CallerUser, GrpcCall>();

  const userBuilder = async (call: GrpcCall): Promise<CallerUser> => {
    let caller: Caller;
    try {
      caller = await deps.authenticate(
        readMetadata(call, "authorization"),
        readPeerAddress(call.getPeer()),
      );
    } catch (error) {
      throw toStatus(error, logger, { step: "authenticate" });
    }
    const user = new CallerUser(caller.id, caller);
    callOf.set(user, call);
    return user;
  };

  // The caller scopes the SDK's buses and stores; a tenant would only split them.
  // The `a2a-extensions` metadata activates the usage extension (the SDK echoes what was
  // activated); `last-event-id` is where a resubscribing client says what it saw last.
  const contextBuilder: ServerCallContextBuilder = ({
    user,
    requestedVersion,
    extensions,
    headers,
  }) => {
    const context = new ServerCallContext({
      user,
      requestedVersion,
      ...(extensions ? { requestedExtensions: extensions } : {}),
    });
    const requested = headers["a2a-extensions"];
    activateUsageExtension(context, Array.isArray(requested) ? requested.join(",") : requested);
    setLastEventId(context, headers["last-event-id"]);
    return context;
  };

  const callerOf = (context: ServerCallContext): CallerUser => {
    const user = context.user;
    if (!(user instanceof CallerUser)) throw new Error("A2A gRPC call without a caller");
    return user;
  };

  /**
   * A method's server span (RPC conventions), continuing the `traceparent` metadata the call came
   * with, as the HTTP bindings' spans continue the header (src/http/middleware/trace-requests.ts).
   * The caller was authenticated before the method, outside it.
   */
  const spanOf = (method: string, user: CallerUser) => {
    const call = callOf.get(user);
    const parent = call
      ? remoteContext(readMetadata(call, "traceparent"), readMetadata(call, "tracestate"))
      : undefined;
    return {
      name: `${grpcServiceName}/${method}`,
      attributes: { "rpc.system": "grpc", "rpc.service": grpcServiceName, "rpc.method": method },
      options: { kind: SpanKind.SERVER, ...(parent ? { parent } : {}) },
    };
  };

  /** A unary method: its errors, and an error escalated past a result, as gRPC statuses. */
  async function unary<T>(method: string, context: ServerCallContext, run: () => Promise<T>) {
    const user = callerOf(context);
    const where = { method, callerId: user.callerId };
    const span = spanOf(method, user);
    return inSpan(
      span.name,
      span.attributes,
      async () => {
        let result: T;
        try {
          result = await run();
        } catch (error) {
          throw toStatus(readEscalated(context) ?? error, logger, where);
        }
        const escalated = readEscalated(context);
        if (escalated) throw toStatus(escalated, logger, where);
        return result;
      },
      span.options,
    );
  }

  /** A streaming method: pumped, closable by revocation and by the client going away. */
  async function* stream(
    method: string,
    context: ServerCallContext,
    source: AsyncGenerator<StreamResponse, void, undefined>,
    reading?: AbortController,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const user = callerOf(context);
    const where = { method, callerId: user.callerId };
    const spanned = spanOf(method, user);
    // Ended with the stream; what each pull starts (the run) nests under it.
    const span = startSpan(spanned.name, spanned.attributes, spanned.options);
    const events = pumpEvents(source);
    const unregister = streams.add(user.callerId, () => events.close());
    const call = callOf.get(user);
    const detach = () => events.close();
    call?.on("cancelled", detach);
    let sent = 0;
    try {
      for (;;) {
        let next: IteratorResult<StreamResponse, undefined>;
        try {
          next = await withSpan(span, () => events.next());
        } catch (error) {
          failSpan(span, error);
          throw toStatus(readEscalated(context) ?? error, logger, where);
        }
        if (next.done) {
          // A stream that ends before its first event was refused on the way (as service.ts).
          const escalated = readEscalated(context);
          if (escalated) throw toStatus(escalated, logger, where);
          if (sent === 0 && !events.closed) {
            throw toStatus(new Error("the task produced no events"), logger, where);
          }
          return;
        }
        sent += 1;
        yield next.value;
      }
    } finally {
      call?.off("cancelled", detach);
      unregister();
      events.close();
      reading?.abort();
      span.end();
    }
  }

  const handler: A2ARequestHandler = {
    getAgentCard: () => target.getAgentCard(),
    getAuthenticatedExtendedAgentCard: (params, context) =>
      unary("GetExtendedAgentCard", context, () =>
        target.getAuthenticatedExtendedAgentCard(params, context),
      ),
    sendMessage: (params, context) =>
      unary("SendMessage", context, () => target.sendMessage({ ...params, tenant: "" }, context)),
    sendMessageStream: (params, context) => {
      markStreaming(context);
      return stream(
        "SendStreamingMessage",
        context,
        target.sendMessageStream({ ...params, tenant: "" }, context),
      );
    },
    getTask: (params, context) => unary("GetTask", context, () => target.getTask(params, context)),
    cancelTask: (params, context) =>
      unary("CancelTask", context, () => target.cancelTask(params, context)),
    createTaskPushNotificationConfig: (params, context) =>
      unary("CreateTaskPushNotificationConfig", context, () =>
        target.createTaskPushNotificationConfig({ ...params, tenant: "" }, context),
      ),
    getTaskPushNotificationConfig: (params, context) =>
      unary("GetTaskPushNotificationConfig", context, () =>
        target.getTaskPushNotificationConfig(params, context),
      ),
    listTaskPushNotificationConfigs: (params, context) =>
      unary("ListTaskPushNotificationConfigs", context, () =>
        target.listTaskPushNotificationConfigs(params, context),
      ),
    deleteTaskPushNotificationConfig: (params, context) =>
      unary("DeleteTaskPushNotificationConfig", context, () =>
        target.deleteTaskPushNotificationConfig(params, context),
      ),
    resubscribe: (params, context) => {
      markStreaming(context);
      // A subscription reads the task's event log until its reader goes.
      const reading = new AbortController();
      setStreamSignal(context, reading.signal);
      return stream("SubscribeToTask", context, target.resubscribe(params, context), reading);
    },
    listTasks: (params, context) =>
      unary("ListTasks", context, () => target.listTasks(params, context)),
  };

  return grpcService({ requestHandler: handler, userBuilder, contextBuilder });
}
