// One notification hub per instance: every module that listens (the caller directory, the run
// engine) subscribes to a typed channel here instead of opening its own LISTEN, and every one of
// them learns from the same heartbeat whether notifications are arriving at all.
//
// postgres.js serves every LISTEN of a client over one dedicated connection and re-establishes it
// after a failure; PGlite has a single connection. Either way what is sent while the LISTEN is not
// in place is lost. The hub therefore NOTIFYs itself a heartbeat every `heartbeatMs`; it is
// `healthy` while its own heartbeat came back within `staleAfterMs`, and it tells `onGap`
// listeners whenever messages may have been lost: after a reconnect, and when it stops being
// healthy. A listener reloads (or distrusts) what it built from notifications there. A state
// change that must hold when a message is lost is in the database; a notification only makes it
// fast.
//
// Heartbeats are sent only while someone wants to know: reading `healthy` keeps them going for
// `idleAfterMs`, after which the hub falls silent (an idle instance sends no statement for them).
// Silence changes nothing about trust: `healthy` is still "a heartbeat came back within
// `staleAfterMs`", so the first reader after a quiet spell is told false (and reads from the
// database), the heartbeats start again, and the gap of the quiet spell is reported before trust
// comes back.
//
// @example
// const hub = await openNotifications({ database, logger });
// const stop = await hub.subscribe(callerEvents, (event) => forget(event.callerId));
// await hub.publish(cancelNotices, { runId, reason });
import { randomUUID } from "node:crypto";
import type { Logger } from "../log.ts";
import type { Database } from "./client.ts";

/** A channel and the one shape of message it carries. `parse` returns undefined to ignore one. */
export type Channel<T> = {
  readonly name: string;
  parse(payload: string): T | undefined;
  format(message: T): string;
};

export type Notifications = {
  /** Delivers every readable message on `channel` until the returned function is called. */
  subscribe<T>(channel: Channel<T>, onMessage: (message: T) => void): Promise<() => Promise<void>>;
  publish<T>(channel: Channel<T>, message: T): Promise<void>;
  /** True while this hub's own heartbeat came back within `staleAfterMs`. */
  readonly healthy: boolean;
  /** Told when messages may have been lost (reconnected, or heartbeats stopped coming back). */
  onGap(listener: () => void): () => void;
  close(): Promise<void>;
};

export const heartbeatChannel = "peergate_heartbeat";

export async function openNotifications(options: {
  database: Database;
  logger: Logger;
  /** How often the hub NOTIFYs itself while wanted. Default 250 ms; 0 sends none (never healthy). */
  heartbeatMs?: number;
  /** Default 1 s. */
  staleAfterMs?: number;
  /**
   * How long after the last read of `healthy` (or the opening) heartbeats go on. Default 5 s; at
   * least twice `staleAfterMs`.
   */
  idleAfterMs?: number;
  clock?: () => number;
}): Promise<Notifications> {
  const { database, logger } = options;
  const heartbeatMs = options.heartbeatMs ?? 250;
  const staleAfterMs = options.staleAfterMs ?? 1_000;
  const clock = options.clock ?? (() => performance.now());
  const idleAfterMs = Math.max(options.idleAfterMs ?? 5_000, 2 * staleAfterMs);
  const nonce = randomUUID();
  const handlers = new Map<string, Set<(payload: string) => void>>();
  const unlistens = new Map<string, Promise<() => Promise<void>>>();
  const gapListeners = new Set<() => void>();
  let lastHeartbeat = Number.NEGATIVE_INFINITY;
  let wasHealthy = false;
  let closed = false;

  const isHealthy = () => !closed && clock() - lastHeartbeat <= staleAfterMs;
  const gap = () => {
    for (const listener of gapListeners) {
      try {
        listener();
      } catch (error) {
        logger.error("a notification gap listener failed", { error });
      }
    }
  };

  /** LISTENs on a channel once, however many subscribe to it. */
  const listenTo = (name: string): Promise<unknown> => {
    let listening = unlistens.get(name);
    if (!listening) {
      let established = false;
      listening = database.listen(
        name,
        (payload) => {
          for (const handler of handlers.get(name) ?? []) handler(payload);
        },
        () => {
          // The first LISTEN loses nothing; every later one follows a reconnect.
          if (established) gap();
          established = true;
        },
      );
      unlistens.set(name, listening);
      listening.catch(() => unlistens.delete(name));
    }
    return listening;
  };

  const addHandler = async (name: string, handler: (payload: string) => void) => {
    const set = handlers.get(name) ?? new Set();
    set.add(handler);
    handlers.set(name, set);
    try {
      await listenTo(name);
    } catch (error) {
      set.delete(handler);
      throw error;
    }
    return async () => {
      set.delete(handler);
    };
  };

  /** Reports a gap when the hub was healthy and is not any more. */
  const observe = () => {
    const healthy = isHealthy();
    if (wasHealthy && !healthy) gap();
    wasHealthy = healthy;
  };
  await addHandler(heartbeatChannel, (payload) => {
    if (payload !== nonce) return;
    // A heartbeat that comes back late still ends a stale period: report it before trusting again.
    observe();
    lastHeartbeat = clock();
    wasHealthy = true;
  });
  const beat = async () => {
    if (closed) return;
    observe();
    try {
      await database.notify(heartbeatChannel, nonce);
    } catch (error) {
      if (!closed) logger.warn("notification heartbeat failed", { error });
    }
  };
  let timer: NodeJS.Timeout | undefined;
  let wantedAt = clock();
  /** Beats every `heartbeatMs` until nobody asked for `idleAfterMs`. */
  const beatWhileWanted = () => {
    if (clock() - wantedAt <= idleAfterMs) {
      void beat();
    } else {
      clearInterval(timer);
      timer = undefined;
    }
  };
  const keepBeating = async () => {
    wantedAt = clock();
    if (timer || closed || heartbeatMs <= 0) return;
    timer = setInterval(beatWhileWanted, heartbeatMs);
    timer.unref();
    await beat();
  };
  await keepBeating();

  return {
    subscribe(channel, onMessage) {
      return addHandler(channel.name, (payload) => {
        const message = channel.parse(payload);
        if (message === undefined) return;
        try {
          onMessage(message);
        } catch (error) {
          logger.error("a notification listener failed", { channel: channel.name, error });
        }
      });
    },
    publish(channel, message) {
      return database.notify(channel.name, channel.format(message));
    },
    get healthy() {
      void keepBeating();
      return isHealthy();
    },
    onGap(listener) {
      gapListeners.add(listener);
      return () => gapListeners.delete(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (timer) clearInterval(timer);
      handlers.clear();
      const pending = [...unlistens.values()];
      unlistens.clear();
      await Promise.allSettled(
        pending.map(async (listening) => {
          const unlisten = await listening;
          await unlisten();
        }),
      );
    },
  };
}
