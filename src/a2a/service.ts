// The A2A endpoint without a web framework: what src/http/routes/a2a.ts (or any other adapter)
// calls after it has authenticated the caller.
//
//   const a2a = createA2aService({ database, policies, publicUrl, runs, logger });
//   await a2a.agentCard(versionHeader)           → { body, etag } (public card, 1.0 or 0.3 shape;
//                                                  the 1.0 one signed when a signing key is given)
//   a2a.jwks()                                   → { body, etag } (the key that signs the card)
//   a2a.extendedCard(caller, version)            → the card this caller gets (JSON object)
//   await a2a.handleJsonRpc(rawBody, { caller, version, contentType, accept })
//        → { type: "json", response }            one JSON-RPC response, HTTP 200
//        → { type: "sse", stream }               JSON-RPC responses, one per SSE `data:` line
//        → { type: "none" }                      a notification: HTTP 204, no body (json-rpc.ts)
//        throws RateLimitedError / UnavailableError: answer 429 + Retry-After / 503 instead
//   a2a.grpcService(authenticate)                the gRPC binding over the same handler (grpc-service.ts)
//   await a2a.handleHttpJson(call, { caller, version, contentType, accept })
//        → { type: "json", status, contentType, body }   200 (201 for a new push config)
//        → { type: "empty" }                             204 (a push config deleted)
//        → { type: "error", status, contentType, body }  google.rpc.Status (http-json.ts)
//        → { type: "sse", stream }                       StreamResponse objects, one per `data:`
//        throws as handleJsonRpc does
//   a2a.closeCallerStreams(callerId)             ends the caller's open streams (revocation)
//   a2a.closeAllStreams()                        ends every open stream
//   await a2a.close()                            ends streams, writes pending progress (shutdown)
//   await a2a.settleRun({ callerId, a2a: { taskId }, outcome, pendingTool? })
//        records the end (or a new park) of a run that finished outside an A2A request: a parked
//        run resumed after approval, rejected, expired, revoked, or an orphan marked
//        interrupted. An end is written from the run's end alone, the statement a request's run
//        sends with its end (task-store.ts `endTaskStatement`). Takes the engine's SettledRun as
//        is: engine.onRunSettled((run) => void a2a.settleRun(run)).
//
// Both bindings share one path beneath (`dispatch`): a JSON-RPC request once its envelope is
// checked, and an HTTP+JSON request once http-json.ts has turned its route, query and body into
// the 1.0 method and params it stands for; the answer goes back in the binding's own form.
//
// Inside, the a2a-js SDK does the protocol: DefaultRequestHandler (subclassed with peergate's
// checks in request-handler.ts), JsonRpcTransportHandler for 1.0 and the compat
// LegacyJsonRpcTransportHandler for 0.3, a Postgres TaskStore scoped to the caller, and an
// AgentExecutor that bridges to the run engine. What the SDK gets wrong or leaves open is done
// here: the JSON-RPC envelope and the A2A-Version rules (json-rpc.ts), the first stream event
// read before SSE starts (an error before it is one JSON-RPC error: an SSE stream of that one
// event when the client accepts text/event-stream, since a client that asked for SSE may parse
// nothing else, and a JSON body otherwise), readers that can go away
// without freezing the task (event-stream.ts), internal error messages kept out of responses, and
// errors that must become HTTP answers (call-context.ts).
//
// One file over 500 lines on purpose: it is the endpoint's one composition of the SDK's handler, the
// stores, the event log and the bindings' shared steps; each piece lives in its own module and
// this file only wires them, so splitting it would split one wiring across files.
import { type AgentCard, StreamResponse } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { A2A_ERROR_CODE } from "@a2a-js/sdk/errors";
import {
  AgentEvent,
  type AgentExecutionEvent,
  JsonRpcTransportHandler,
  ResultManager,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import type { SecretKey } from "../auth/sealed-secrets.ts";
import type { Database, Db } from "../db/client.ts";
import type { Notifications } from "../db/notifications.ts";
import { storableJson } from "../db/storable.ts";
import type { Caller } from "../domain/caller.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import type { Logger } from "../log.ts";
import type { RunEngine, RunOutcome } from "../runs/types.ts";
import {
  type AgentCardDocument,
  buildAgentCards,
  buildExtendedCard,
  resolvePublicUrl,
  serializeCard,
  serializeCardV1,
  toDocument,
} from "./agent-card.ts";
import {
  CallerUser,
  createCallContext,
  markStreaming,
  type ProtocolVersion,
  readEscalated,
  setLastEventId,
  setStreamSignal,
} from "./call-context.ts";
import { type CardSigningKey, publishJwks, signCardJson } from "./card-signing.ts";
import { createStreamRegistry, pumpEvents, singleEventStream } from "./event-stream.ts";
import {
  type A2aGrpcImplementation,
  createGrpcImplementation,
  type GrpcAuthenticate,
} from "./grpc-service.ts";
import {
  buildParams,
  chooseMediaType,
  type HttpJsonCall,
  type HttpJsonReply,
  successStatus,
  toHttpJsonError,
  toHttpJsonEvents,
  versionError,
} from "./http-json.ts";
import {
  acceptsEventStream,
  checkEnvelope,
  errorResponse,
  isStreamingMethod,
  type JsonRpcError,
  type JsonRpcRequest,
  type JsonRpcResponse,
  mapError,
  selectCardVersion,
  selectProtocolVersion,
} from "./json-rpc.ts";
import { createPushStore } from "./push-store.ts";
import { checkPushTarget, type PushEgress } from "./push-targets.ts";
import {
  isTerminal,
  PeergateRequestHandler,
  RecordingBusManager,
  toStreamResponse,
} from "./request-handler.ts";
import {
  answerArtifact,
  answerArtifactId,
  createRunExecutor,
  describeOutcome,
  taskEndOf,
} from "./run-executor.ts";
import { createTaskEventLog } from "./task-events.ts";
import { createTaskStore, endTaskStatement } from "./task-store.ts";
import { activateUsageExtension, createUsageReader } from "./usage-extension.ts";

function createPushHandling(db: Db, push: { secretKey: SecretKey; egress: PushEgress }) {
  return {
    store: createPushStore(db, push.secretKey),
    checkTarget: (callerId: string, url: string) => checkPushTarget(db, push.egress, callerId, url),
  };
}

export type A2aServiceDeps = {
  database: Database;
  policies: LoadedPolicies;
  /** Where clients reach this server, e.g. `https://agent.example.org`; the card points at `/a2a` under it. */
  publicUrl: string;
  runs: RunEngine;
  logger: Logger;
  /** Text deltas are gathered this long into one artifact update (default 250 ms). */
  textFlushMs?: number;
  /** A running task's progress is written to the database within this long (default 200 ms). */
  progressFlushMs?: number;
  /** Signs the 1.0 card (public and extended); without it the card carries no signature. */
  cardSigningKey?: CardSigningKey;
  /** Push notification configs (push-store.ts): the secret key seals their tokens. Without it the card declares none. */
  push?: { secretKey: SecretKey; egress: PushEgress };
  /** `host:port` of the gRPC binding when it is on: the card lists it. */
  grpcAddress?: string;
  /** Wakes a resubscribed stream when another instance records an event; without it, it polls. */
  notifications?: Notifications;
  /**
   * Replay bounds of a resume, how often an idle follower polls, and how long it waits for the
   * last events of a task whose end it saw (task-events.ts).
   */
  taskEvents?: {
    maxReplayEvents?: number;
    maxReplayAgeMs?: number;
    pollMs?: number;
    endGraceMs?: number;
  };
};

/** A stream of JSON-RPC responses that the reader (or a revocation) can end at any time. */
export type A2aEventStream = AsyncIterable<JsonRpcResponse> & { close(): void };

export type A2aReply = (
  | { type: "json"; response: JsonRpcResponse }
  | { type: "sse"; stream: A2aEventStream }
  | { type: "none" }
) & {
  /** Extensions the request activated: the answer's `A2A-Extensions` header names them. */
  extensions?: readonly string[];
};

/** A checked request after the SDK: one response, or a stream whose first event was not an error. */
type Opened =
  | { type: "response"; response: JsonRpcResponse }
  | { type: "stream"; stream: A2aEventStream };
/** What the request answers with, and the extensions it activated (the `A2A-Extensions` header). */
type Dispatched = Opened & { extensions: readonly string[] };

export type A2aRequest = {
  caller: Caller;
  /** The requested version: the `A2A-Version` header, or its query parameter (`readRequestedVersion`). */
  version: string | undefined;
  /** The `Content-Type` request header, as sent. */
  contentType?: string | undefined;
  /** The `Accept` request header, as sent: whether an error of a streaming method comes as SSE. */
  accept?: string | undefined;
  /** The `Last-Event-ID` request header: where a resubscribing stream resumes (task-events.ts). */
  lastEventId?: string | undefined;
  /** The `A2A-Extensions` request header, as sent: extensions the caller activates. */
  extensions?: string | undefined;
};

/**
 * A run that ended (or parked again) outside an A2A request. Shaped like the engine's
 * `SettledRun`, so `engine.onRunSettled((run) => void a2a.settleRun(run))` needs no glue; runs
 * without an A2A task (webhooks) are ignored.
 */
export type SettleRunInput = {
  callerId: string;
  a2a?: { taskId: string };
  outcome: Pick<RunOutcome, "runId" | "status" | "text" | "error" | "endedAt">;
  /** The tool a re-parked run waits on, for the operator message. */
  pendingTool?: string;
};

export type A2aService = {
  agentCard(versionHeader: string | undefined): Promise<AgentCardDocument>;
  /** The JWKS at /.well-known/jwks.json: the card's signing key (no keys when none is given). */
  jwks(): AgentCardDocument;
  extendedCard(caller: Caller, versionHeader: string | undefined): Record<string, unknown>;
  handleJsonRpc(body: unknown, request: A2aRequest): Promise<A2aReply>;
  /** The gRPC service over the same handler, its callers checked by `authenticate`. */
  grpcService(authenticate: GrpcAuthenticate): A2aGrpcImplementation;
  /** The HTTP+JSON binding: the same path as handleJsonRpc beneath (http-json.ts). */
  handleHttpJson(call: HttpJsonCall, request: A2aRequest): Promise<HttpJsonReply>;
  closeCallerStreams(callerId: string): number;
  closeAllStreams(): number;
  openStreamCount(callerId?: string): number;
  settleRun(input: SettleRunInput): Promise<void>;
  /** Ends every open stream and writes pending task progress (shutdown, before the database closes). */
  close(): Promise<void>;
};

function stripTenant(params: unknown): void {
  if (typeof params === "object" && params !== null && !Array.isArray(params)) {
    // The caller scopes everything; a tenant would only split the SDK's in-process buses.
    delete (params as Record<string, unknown>).tenant;
  }
}

function isAsyncIterable(value: unknown): value is AsyncIterable<JsonRpcResponse> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

export function createA2aService(deps: A2aServiceDeps): A2aService {
  const logger = deps.logger.child({ component: "a2a" });
  const agent = deps.policies.agent;
  const features = { pushNotifications: deps.push !== undefined, grpcAddress: deps.grpcAddress };
  const cards = buildAgentCards(agent, deps.publicUrl, features);
  const store = createTaskStore(deps.database.db, {
    logger,
    ...(deps.progressFlushMs === undefined ? {} : { progressFlushMs: deps.progressFlushMs }),
  });
  const events = createTaskEventLog({
    db: deps.database.db,
    logger,
    codec: StreamResponse,
    ...(deps.notifications ? { notifications: deps.notifications } : {}),
    ...deps.taskEvents,
  });
  // Events past the age bound can never be replayed; every instance clears them now and then.
  const pruner = setInterval(() => {
    events.prune().catch((error: unknown) => logger.warn("pruning task events failed", { error }));
  }, 3_600_000);
  pruner.unref();
  const buses = new RecordingBusManager();
  const executor = createRunExecutor({
    runs: deps.runs,
    store,
    logger,
    ...(deps.textFlushMs === undefined ? {} : { textFlushMs: deps.textFlushMs }),
  });
  const signingKey = deps.cardSigningKey;
  const jwksUrl = resolvePublicUrl(deps.publicUrl, "/.well-known/jwks.json");
  const jwks = toDocument(publishJwks(signingKey));
  const signedV1: Promise<AgentCardDocument> = signingKey
    ? signCardJson(serializeCardV1(cards.core), signingKey, jwksUrl).then((signature) =>
        toDocument({ ...serializeCardV1(cards.core), signatures: [signature] }),
      )
    : Promise.resolve(cards.v1);
  // A failure surfaces on the first card request; it must not crash the process before that.
  signedV1.catch((error: unknown) => logger.error("signing the agent card failed", { error }));
  const extendedFor = (caller: Caller): AgentCard =>
    buildExtendedCard(agent, cards.interfaces, caller, features);
  const handler = new PeergateRequestHandler({
    card: cards.core,
    store,
    executor,
    buses,
    runs: deps.runs,
    logger,
    events,
    usage: createUsageReader(deps.database.db),
    ...(deps.push ? { push: createPushHandling(deps.database.db, deps.push) } : {}),
    extendedCard: async (context) => {
      const user = context.user;
      if (!(user instanceof CallerUser) || !user.caller) throw new Error("no caller");
      const card = extendedFor(user.caller);
      // The v0.3 transport would carry the signature over into a card of another shape, where
      // it verifies nothing: only a 1.0 request gets it.
      if (signingKey && context.requestedVersion === "1.0") {
        card.signatures = [await signCardJson(serializeCardV1(card), signingKey, jwksUrl)];
      }
      return card;
    },
  });
  const transports = {
    "1.0": new JsonRpcTransportHandler(handler),
    "0.3": new LegacyJsonRpcTransportHandler(handler),
  } as const;
  const streams = createStreamRegistry();

  /** -32603 never carries an internal message to the client; the log gets it. */
  function sanitize(error: JsonRpcError, where: Record<string, unknown>): JsonRpcError {
    if (error.code !== A2A_ERROR_CODE.INTERNAL_ERROR) return error;
    logger.error("A2A request failed with an internal error", { ...where, detail: error.message });
    return { ...error, message: "Internal error" };
  }

  function sanitizeResponse(response: JsonRpcResponse, where: Record<string, unknown>) {
    return response.error ? { ...response, error: sanitize(response.error, where) } : response;
  }

  async function handleJsonRpc(body: unknown, request: A2aRequest): Promise<A2aReply> {
    const text = typeof body === "string" ? body : JSON.stringify(body ?? null);
    const check = checkEnvelope(text, {
      version: request.version,
      contentType: request.contentType,
    });
    if (!check.ok) {
      if ("response" in check) return { type: "json", response: check.response };
      logger.info("a JSON-RPC notification was dropped: A2A methods need an id", {
        method: check.notification.method,
        callerId: request.caller.id,
      });
      return { type: "none" };
    }
    const { request: rpc, version } = check;
    const outcome = await dispatch(rpc, version, request);
    const extensions = outcome.extensions.length > 0 ? { extensions: outcome.extensions } : {};
    if (outcome.type === "stream") return { type: "sse", stream: outcome.stream, ...extensions };
    // An error of a streaming method, in the form the client asked for.
    return isStreamingMethod(rpc.method) && acceptsEventStream(request.accept)
      ? { type: "sse", stream: singleEventStream(outcome.response), ...extensions }
      : { type: "json", response: outcome.response, ...extensions };
  }

  /**
   * One checked request through the SDK's transport and peergate's handler: the path both
   * bindings share. A streaming method whose first event is an error answers that one response.
   */
  async function dispatch(
    rpc: JsonRpcRequest,
    version: ProtocolVersion,
    request: Pick<A2aRequest, "caller" | "extensions" | "lastEventId">,
  ): Promise<Dispatched> {
    const { caller } = request;
    const where = { method: rpc.method, callerId: caller.id };
    const streaming = isStreamingMethod(rpc.method);
    stripTenant(rpc.params);

    const context = createCallContext(new CallerUser(caller.id, caller), version);
    activateUsageExtension(context, request.extensions);
    const activated = () => [...(context.activatedExtensions ?? [])];
    if (streaming) markStreaming(context);
    const reading = new AbortController();
    if (rpc.method === "SubscribeToTask" || rpc.method === "tasks/resubscribe") {
      const params = rpc.params as Record<string, unknown> | undefined;
      // The header of an SSE client, else the param a client without headers can send.
      setLastEventId(context, request.lastEventId ?? params?.lastEventId);
      if (params) delete params.lastEventId;
      setStreamSignal(context, reading.signal);
    }
    const transport = transports[version];
    const result = (await transport.handle(rpc as unknown as Record<string, unknown>, context)) as
      | JsonRpcResponse
      | AsyncGenerator<JsonRpcResponse, void, undefined>;

    if (!isAsyncIterable(result)) {
      const escalated = readEscalated(context);
      if (escalated) throw escalated;
      return {
        type: "response",
        response: sanitizeResponse(result, where),
        extensions: activated(),
      };
    }
    if (!streaming) throw new Error("the SDK streamed a unary method");
    const opened = await openStream(result, {
      id: rpc.id,
      version,
      callerId: caller.id,
      where,
      context,
      reading,
    });
    return { ...opened, extensions: activated() };
  }

  async function handleHttpJson(call: HttpJsonCall, request: A2aRequest): Promise<HttpJsonReply> {
    const contentType = chooseMediaType(request.accept);
    const fail = (error: unknown): HttpJsonReply => ({
      type: "error",
      contentType,
      ...toHttpJsonError(mapError(error, "1.0")),
    });
    if (selectProtocolVersion(request.version) !== "1.0")
      return fail(versionError(request.version));
    const built = buildParams(call, request.contentType);
    if (!built.ok) return fail(built.error);
    const rpc: JsonRpcRequest = {
      jsonrpc: "2.0",
      id: null,
      method: call.method,
      // A NUL in a message would fail every write of the task and run (PostgreSQL refuses it).
      params: storableJson(built.params),
    };
    const outcome = await dispatch(rpc, "1.0", request);
    const extensions = outcome.extensions.length > 0 ? { extensions: outcome.extensions } : {};
    if (outcome.type === "stream") {
      return { type: "sse", stream: toHttpJsonEvents(outcome.stream), ...extensions };
    }
    const { response } = outcome;
    if (response.error) {
      return { type: "error", contentType, ...toHttpJsonError(response.error), ...extensions };
    }
    const status = successStatus(call.method);
    if (status === 204) return { type: "empty", ...extensions };
    return { type: "json", status, contentType, body: response.result, ...extensions };
  }

  async function openStream(
    source: AsyncIterable<JsonRpcResponse>,
    request: {
      id: JsonRpcResponse["id"];
      version: ProtocolVersion;
      callerId: string;
      where: Record<string, unknown>;
      context: ServerCallContext;
      /** Aborted when the reader goes: a subscription stops reading the log. */
      reading: AbortController;
    },
  ): Promise<Opened> {
    const events = pumpEvents(source);
    let first: IteratorResult<JsonRpcResponse, undefined>;
    try {
      first = await events.next();
    } catch (error) {
      events.close();
      request.reading.abort();
      const escalated = readEscalated(request.context);
      if (escalated) throw escalated;
      return {
        type: "response",
        response: errorResponse(
          request.id,
          sanitize(mapError(error, request.version), request.where),
        ),
      };
    }
    if (first.done) {
      request.reading.abort();
      const escalated = readEscalated(request.context);
      if (escalated) throw escalated;
      return {
        type: "response",
        response: errorResponse(
          request.id,
          sanitize(
            { code: A2A_ERROR_CODE.INTERNAL_ERROR, message: "the task produced no events" },
            request.where,
          ),
        ),
      };
    }

    let pendingFirst: JsonRpcResponse | undefined = first.value;
    let finished = false;
    let unregister = () => {};
    const close = () => {
      if (finished) return;
      finished = true;
      events.close();
      request.reading.abort();
      unregister();
    };
    unregister = streams.add(request.callerId, close);
    const iterator: AsyncIterator<JsonRpcResponse> = {
      async next() {
        if (finished) return { done: true, value: undefined };
        if (pendingFirst) {
          const value = pendingFirst;
          pendingFirst = undefined;
          return { done: false, value };
        }
        try {
          const next = await events.next();
          if (next.done) close();
          return next.done ? { done: true, value: undefined } : next;
        } catch (error) {
          // An error mid-stream is the last event; the stream then ends.
          close();
          return {
            done: false,
            value: errorResponse(
              request.id,
              sanitize(mapError(error, request.version), request.where),
            ),
          };
        }
      },
      async return() {
        close();
        return { done: true, value: undefined };
      },
    };
    return {
      type: "stream",
      stream: { [Symbol.asyncIterator]: () => iterator, close },
    };
  }

  async function settleRun(input: SettleRunInput): Promise<void> {
    const taskId = input.a2a?.taskId;
    if (!taskId) return;
    const context = createCallContext(new CallerUser(input.callerId));
    const task = await store.loadForCaller(input.callerId, taskId);
    if (!task) {
      logger.warn("a settled run names no task of its caller", {
        taskId,
        callerId: input.callerId,
      });
      return;
    }
    if (isTerminal(task)) return;
    const ids = { taskId: task.id, contextId: task.contextId };
    const outcome = input.outcome;
    const text = outcome.status === "completed" ? outcome.text : undefined;
    const answer = text
      ? AgentEvent.artifactUpdate({
          ...ids,
          artifact: answerArtifact(answerArtifactId(outcome.runId), text),
          append: false,
          lastChunk: true,
          metadata: undefined,
        })
      : undefined;
    if (outcome.status !== "parked" && outcome.status !== "input-required") {
      // An end: written from the run's end alone, as a request's run writes it with its end
      // (run-executor.ts, StartRunRequest.atEnd); a task another writer ended is left alone.
      const end = { ...outcome, endedAt: outcome.endedAt ?? new Date() };
      await deps.database.db.execute(
        endTaskStatement(taskEndOf({ ...ids, callerId: input.callerId }, end)),
      );
      for (const event of [answer, describeOutcome(ids, end)]) {
        const response = event && toStreamResponse(event, undefined);
        if (response) await handler.recordEvent(response, context, event.data);
      }
      return;
    }
    // A run waiting again: the task goes on, WORKING with the operator's message.
    const results = new ResultManager(store, context);
    const process = async (event: AgentExecutionEvent) => {
      await results.processEvent(event);
      const response = toStreamResponse(event, results.getCurrentTask());
      if (response) await handler.recordEvent(response, context, event.data);
    };
    if (answer) await process(answer);
    await process(describeOutcome(ids, outcome, input.pendingTool));
  }

  return {
    agentCard: async (versionHeader) =>
      selectCardVersion(versionHeader) === "0.3" ? cards.v03 : await signedV1,
    jwks: () => jwks,
    extendedCard: (caller, versionHeader) =>
      serializeCard(extendedFor(caller), selectCardVersion(versionHeader)),
    handleJsonRpc,
    grpcService: (authenticate) =>
      createGrpcImplementation({ handler, authenticate, streams, logger }),
    handleHttpJson,
    closeCallerStreams: (callerId) => streams.closeCaller(callerId),
    closeAllStreams: () => streams.closeAll(),
    openStreamCount: (callerId) => streams.count(callerId),
    settleRun,
    close: async () => {
      streams.closeAll();
      clearInterval(pruner);
      await store.close();
      await events.close();
    },
  };
}
