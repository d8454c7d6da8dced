// The server-wide bound on runs starting at once (issue 28). A run's start — the caller re-read,
// the admission, the run row, its audit event and the request's own rows in one transaction — is
// the costliest part of a short run for the instance's one thread (and, on the embedded database,
// for its one session, in a worker thread of its own). Without a bound, one caller allowed 30
// concurrent runs puts 30 starts in flight at once, and every other request (another caller's
// GetTask, a readiness probe, a heartbeat) waits behind all of them.
//
// So at most `atOnce` starts are in flight; the others wait here, in order of arrival within a
// caller and round-robin between callers, so a caller's burst waits behind itself, never in front
// of another caller's single request. A start that leaves hands its place on through `setImmediate`:
// the event loop polls for I/O between one start and the next, so the waiting is in slices. A
// caller cannot queue more starts than its concurrency limit (the rest would be refused at
// admission anyway): past it, RateLimitedError at once, so the queue holds no more than the
// callers' limits.
//
// Nothing here decides whether a run may start (admission does, in the database): the queue only
// orders when starts happen. Its length and the time spent waiting are metrics (src/metrics.ts).
import { RateLimitedError } from "../errors.ts";

export type StartQueueStats = {
  /** Starts waiting for a place now. */
  readonly waiting: number;
  /** Starts in flight now. */
  readonly inFlight: number;
};

export type StartQueue = {
  /**
   * Waits for a place for one start of `callerId` (at most `limit` of its starts may wait: past
   * that, RateLimitedError), and returns the function that gives it back (call it exactly once).
   * `signal` abandons the wait.
   */
  enter(callerId: string, limit: number | null, signal?: AbortSignal): Promise<() => void>;
  stats(): StartQueueStats;
  /** Told of each wait's length in seconds when the start gets its place (for the histogram). */
  onWaited(listener: (seconds: number) => void): () => void;
};

export const defaultStartsAtOnce = 8;

type Waiter = {
  readonly callerId: string;
  readonly since: number;
  resolve(release: () => void): void;
  reject(error: unknown): void;
};

/**
 * `atOnce` starts in flight at most; 0 (or less) means no bound (every start enters at once, and
 * is still counted for the metrics).
 */
export function createStartQueue(
  atOnce: number,
  options: { readonly retryAfterSeconds?: number } = {},
): StartQueue {
  const bound = atOnce > 0 ? Math.floor(atOnce) : Number.POSITIVE_INFINITY;
  const retryAfter = options.retryAfterSeconds ?? 5;
  // Per caller, in arrival order; the Map's order is the round-robin ring (a caller served moves
  // to the back).
  const queues = new Map<string, Waiter[]>();
  const listeners = new Set<(seconds: number) => void>();
  let waiting = 0;
  let inFlight = 0;
  let handing = false;

  function admit(waiter: Waiter): void {
    inFlight++;
    const seconds = (performance.now() - waiter.since) / 1000;
    for (const listener of listeners) listener(seconds);
    let released = false;
    waiter.resolve(() => {
      if (released) return;
      released = true;
      inFlight--;
      scheduleHandOn();
    });
  }

  function scheduleHandOn(): void {
    if (handing || waiting === 0) return;
    handing = true;
    // A macrotask, not a microtask: I/O waiting since the last start is served before the next.
    setImmediate(() => {
      handing = false;
      handOn();
    });
  }

  function handOn(): void {
    while (inFlight < bound && waiting > 0) {
      const next = queues.entries().next();
      if (next.done === true) return;
      const [callerId, list] = next.value;
      const waiter = list.shift();
      queues.delete(callerId);
      if (list.length > 0) queues.set(callerId, list);
      if (waiter === undefined) continue;
      waiting--;
      admit(waiter);
    }
  }

  return {
    enter(callerId, limit, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const since = performance.now();
      if (inFlight < bound && waiting === 0) {
        return new Promise((resolve) => admit({ callerId, since, resolve, reject: () => {} }));
      }
      const list = queues.get(callerId) ?? [];
      if (limit !== null && list.length >= Math.max(1, limit)) {
        return Promise.reject(
          new RateLimitedError(
            `caller has ${list.length} runs waiting to start; its limit is ${limit}`,
            retryAfter,
          ),
        );
      }
      return new Promise<() => void>((resolve, reject) => {
        const waiter: Waiter = { callerId, since, resolve, reject };
        list.push(waiter);
        if (!queues.has(callerId)) queues.set(callerId, list);
        waiting++;
        signal?.addEventListener(
          "abort",
          () => {
            const at = list.indexOf(waiter);
            if (at < 0) return;
            list.splice(at, 1);
            if (list.length === 0) queues.delete(callerId);
            waiting--;
            reject(signal.reason);
          },
          { once: true },
        );
      });
    },
    stats: () => ({ waiting, inFlight }),
    onWaited(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
