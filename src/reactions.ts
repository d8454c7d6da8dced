// What one module does when another's state changes, in one table. The modules never call each
// other for these: each exposes an event (`when`) and a verb (`act`; not `then`, which would make a row a thenable), and this file is the only
// place that joins them, so "what happens when a caller is revoked?" has one answer a reader can
// find. Every row is wired by `wireReactions` at start-up, after every module exists and before
// the app serves its first request (src/core.ts), and unwired at shutdown right after the engine
// stopped, so the runs it stops still reach their A2A tasks.
//
// A row never decides anything durable on its own: revocation, cancel and settling are written to
// the database by the services; a reaction only makes the other modules of this instance act on
// it at once.
import type { A2aService } from "./a2a/service.ts";
import type { Logger } from "./log.ts";
import type { CallerDirectory } from "./services/caller-directory.ts";
import type { CallerEvent } from "./services/caller-events.ts";
import type { PeergateRunEngine, SettledRun } from "./services/runs/engine.ts";
import type { ToolRuntime } from "./tools/types.ts";

/** An event, as a subscription: calls the listener for each occurrence, returns an unsubscribe. */
export type When<E> = (listener: (event: E) => void) => () => void;

export type Reaction<E> = {
  readonly when: When<E>;
  /** What the other module does, at once (never awaited: a row must not hold up the event). */
  readonly act: (event: NoInfer<E>) => void;
  /** Why the row exists: what would go wrong without it. */
  readonly why: string;
};

/** A row with its event type erased, so rows of different events fit one table. */
export type AnyReaction = { readonly why: string; wire(): () => void };

function reaction<E>(row: Reaction<E>): AnyReaction {
  return { why: row.why, wire: () => row.when(row.act) };
}

/** Only the occurrences `keep` accepts. */
function only<E>(when: When<E>, keep: (event: E) => boolean): When<E> {
  return (listener) => when((event) => (keep(event) ? listener(event) : undefined));
}

export type ReactionParts = {
  /** Caller changes committed by this instance's services (`ServiceContext.callerChanged`). */
  readonly committedHere: When<CallerEvent>;
  readonly directory: CallerDirectory;
  readonly engine: PeergateRunEngine;
  readonly a2a: A2aService;
  /** The tool runtime in force (it reaches the MCP server instances of every generation). */
  readonly tools: ToolRuntime;
  readonly logger: Logger;
};

export function reactionsOf(p: ReactionParts): AnyReaction[] {
  // The events, named once.
  const callerChangedHere = p.committedHere;
  const callerEventHeard: When<CallerEvent> = (listener) => p.directory.onCallerEvent(listener);
  const callerRevoked = only(callerEventHeard, (event) => event.change === "revoked");
  const callerRevokedHere = only(callerChangedHere, (event) => event.change === "revoked");
  const runSettledElsewhere: When<SettledRun> = (listener) => p.engine.onRunSettled(listener);
  return [
    reaction({
      when: callerChangedHere,
      act: (event) => p.directory.forget(event.callerId),
      why: "a caller changed here is re-read here at once, not only when its NOTIFY comes back (a revocation made on this instance is refused on it from the next request)",
    }),
    reaction({
      when: callerEventHeard,
      act: (event) => p.engine.callerChanged(event),
      why: "a revoked caller's runs stop on every instance, and the parked runs its revocation closed reach their A2A tasks",
    }),
    reaction({
      when: callerRevokedHere,
      act: (event) => {
        p.engine.callerChanged(event);
        p.a2a.closeCallerStreams(event.callerId);
      },
      why: "the instance that revoked a caller stops its runs, ends its streams and settles the A2A tasks of the waiting runs it closed without waiting for its own NOTIFY to come back (a lost one would leave those tasks open); every other instance has the runs' records and its heartbeat",
    }),
    reaction({
      when: callerRevoked,
      act: (event) => void p.a2a.closeCallerStreams(event.callerId),
      why: "a revoked caller's open A2A streams end: it must not keep reading what it may no longer ask for",
    }),
    reaction({
      when: callerRevoked,
      act: (event) => {
        p.tools
          .releaseCaller?.(event.callerId)
          .catch((error: unknown) =>
            p.logger.error("could not close a revoked caller's MCP servers", { error }),
          );
      },
      why: "a revoked caller's MCP server instances close: what its runs left in them must not outlive it",
    }),
    reaction({
      when: runSettledElsewhere,
      act: (run) => {
        p.a2a
          .settleRun(run)
          .catch((error: unknown) =>
            p.logger.error("could not settle an A2A task", { runId: run.runId, error }),
          );
      },
      why: "a run that ends outside an A2A request (resumed after approval, rejected, expired, recovered) still ends its A2A task",
    }),
  ];
}

/** Subscribes every row, in table order; returns the function that unsubscribes them all. */
export function wireReactions(rows: readonly AnyReaction[]): () => void {
  const offs = rows.map((row) => row.wire());
  return () => {
    for (const off of offs) off();
  };
}

/** A `When` that the caller triggers itself: `emit` tells every listener. */
export function createSignal<E>(): { when: When<E>; emit(event: E): void } {
  const listeners = new Set<(event: E) => void>();
  return {
    when: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    emit: (event) => {
      for (const listener of listeners) listener(event);
    },
  };
}
