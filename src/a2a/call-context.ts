// The authenticated caller as the a2a-js SDK sees it. Every SDK call carries a ServerCallContext;
// ours holds the caller (its id is the SDK's `userName`, which also scopes the SDK's in-process
// event buses), the protocol version of the request, and a slot for errors that must leave the
// JSON-RPC world and become HTTP answers (429 past a caller's limits, 401 for a caller found
// revoked, 503 when the database is gone). The SDK swallows every error its executor or store throws into a JSON-RPC error or a
// failed task; the slot is how such an error reaches src/http intact.
import { ServerCallContext, type User } from "@a2a-js/sdk/server";
import type { Caller } from "../domain/caller.ts";
import { RateLimitedError, UnauthenticatedError, type UnavailableError } from "../errors.ts";
import { asUnavailableError } from "../services/db-errors.ts";

export type ProtocolVersion = "1.0" | "0.3";

export class CallerUser implements User {
  readonly callerId: string;
  /** The caller row, when the context serves a request (absent when settling a resumed run). */
  readonly caller: Caller | undefined;
  constructor(callerId: string, caller?: Caller) {
    this.callerId = callerId;
    this.caller = caller;
  }
  get isAuthenticated(): boolean {
    return true;
  }
  get userName(): string {
    return this.callerId;
  }
}

const escalatedKey = "peergate.escalated";

export function createCallContext(
  user: CallerUser,
  version: ProtocolVersion = "1.0",
): ServerCallContext {
  return new ServerCallContext({ user, requestedVersion: version });
}

/** The caller id of a context; a context without one is a bug, so it fails closed. */
export function readCallerId(context: ServerCallContext): string {
  const user = context.user;
  if (!(user instanceof CallerUser)) throw new Error("A2A call without an authenticated caller");
  return user.callerId;
}

export function readCaller(context: ServerCallContext): Caller {
  const user = context.user;
  if (!(user instanceof CallerUser) || !user.caller) {
    throw new Error("A2A call without an authenticated caller");
  }
  return user.caller;
}

/** Errors the HTTP layer answers itself rather than as a JSON-RPC error. */
export type EscalatedError = RateLimitedError | UnavailableError | UnauthenticatedError;

/**
 * The error the HTTP layer must answer for `error`, if any: a RateLimitedError; an
 * UnauthenticatedError (the engine found the caller revoked after authentication let it in, in
 * the milliseconds before this instance heard of the revocation: the same 401 as any refusal); or
 * the database being unavailable (also when a driver error arrives wrapped by drizzle).
 */
export function toEscalated(error: unknown): EscalatedError | undefined {
  if (error instanceof RateLimitedError || error instanceof UnauthenticatedError) return error;
  return asUnavailableError(error);
}

/** Remembers the first escalated error of a request; later ones add nothing. */
export function escalate(context: ServerCallContext, error: EscalatedError): void {
  if (!context.state.has(escalatedKey)) context.state.set(escalatedKey, error);
}

export function readEscalated(context: ServerCallContext): EscalatedError | undefined {
  return context.state.get(escalatedKey) as EscalatedError | undefined;
}

const streamingKey = "peergate.streaming";

/** Marks a request whose answer is read as it comes (a streaming method). */
export function markStreaming(context: ServerCallContext): void {
  context.state.set(streamingKey, true);
}

/** Whether the request reads its answer as it comes; a blocking call's model call is not streamed. */
export function isStreaming(context: ServerCallContext): boolean {
  return context.state.get(streamingKey) === true;
}

const freshContextKey = "peergate.freshContext";

/** Marks a request whose message named no context: the SDK made a new one, with no history. */
export function markFreshContext(context: ServerCallContext): void {
  context.state.set(freshContextKey, true);
}

export function isFreshContext(context: ServerCallContext): boolean {
  return context.state.get(freshContextKey) === true;
}

const streamEndKey = "peergate.streamEnd";

/**
 * Gives a streaming request a signal that fires when its stream ends for the reader (gone, closed
 * by a revocation or a shutdown). The SDK's own streams drain to their end whatever the reader
 * does; a stream peergate produces by following a stored task stops on it instead.
 */
export function attachStreamEnd(context: ServerCallContext): AbortController {
  const controller = new AbortController();
  context.state.set(streamEndKey, controller);
  return controller;
}

export function readStreamEnd(context: ServerCallContext): AbortSignal | undefined {
  return (context.state.get(streamEndKey) as AbortController | undefined)?.signal;
}
