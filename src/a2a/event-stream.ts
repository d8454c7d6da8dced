// Decouples an SDK event stream from the client reading it. The SDK persists a streamed task's
// updates from inside the generator the client consumes, so a client that stops reading (gone,
// slow, or cut off because its caller was revoked) would freeze the task in the store. The pump
// drains the SDK generator to its end whatever happens to the reader; the reader gets a view it
// can close at any time, after which events are dropped instead of buffered.

export type EventSource<T> = {
  /** The next event; throws the source's error once, after the events before it. */
  next(): Promise<IteratorResult<T, undefined>>;
  /** Detaches the reader: pending and later events are dropped; the source still drains. */
  close(): void;
  readonly closed: boolean;
};

export function pumpEvents<T>(source: AsyncIterable<T>): EventSource<T> {
  const items: T[] = [];
  let ended = false;
  let failure: { error: unknown } | undefined;
  let detached = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };

  void (async () => {
    try {
      for await (const item of source) {
        if (!detached) {
          items.push(item);
          notify();
        }
      }
    } catch (error) {
      if (!detached) failure = { error };
    } finally {
      ended = true;
      notify();
    }
  })();

  return {
    get closed() {
      return detached;
    },
    async next() {
      for (;;) {
        if (detached) return { done: true, value: undefined };
        const item = items.shift();
        if (item !== undefined) return { done: false, value: item };
        if (ended) {
          if (failure) {
            const { error } = failure;
            failure = undefined;
            throw error;
          }
          return { done: true, value: undefined };
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
    close() {
      detached = true;
      items.length = 0;
      failure = undefined;
      notify();
    },
  };
}

/** A stream of one event (how an error reaches a client that asked for SSE). */
export function singleEventStream<T>(event: T): AsyncIterable<T> & { close(): void } {
  let sent = false;
  return {
    [Symbol.asyncIterator]: () => ({
      async next(): Promise<IteratorResult<T, undefined>> {
        if (sent) return { done: true, value: undefined };
        sent = true;
        return { done: false, value: event };
      },
    }),
    close() {
      sent = true;
    },
  };
}

/**
 * Streams that can be ended from outside, grouped by caller: revoking a caller ends every stream
 * it has open on this instance.
 */
export type StreamRegistry = {
  add(callerId: string, close: () => void): () => void;
  closeCaller(callerId: string): number;
  closeAll(): number;
  count(callerId?: string): number;
};

export function createStreamRegistry(): StreamRegistry {
  const byCaller = new Map<string, Set<() => void>>();
  const closeSet = (set: Set<() => void> | undefined) => {
    if (!set) return 0;
    const closers = [...set];
    set.clear();
    for (const close of closers) close();
    return closers.length;
  };
  return {
    add(callerId, close) {
      let set = byCaller.get(callerId);
      if (!set) {
        set = new Set();
        byCaller.set(callerId, set);
      }
      set.add(close);
      return () => {
        const current = byCaller.get(callerId);
        current?.delete(close);
        if (current?.size === 0) byCaller.delete(callerId);
      };
    },
    closeCaller(callerId) {
      const closed = closeSet(byCaller.get(callerId));
      byCaller.delete(callerId);
      return closed;
    },
    closeAll() {
      let closed = 0;
      for (const callerId of [...byCaller.keys()]) {
        closed += closeSet(byCaller.get(callerId));
        byCaller.delete(callerId);
      }
      return closed;
    },
    count(callerId) {
      if (callerId !== undefined) return byCaller.get(callerId)?.size ?? 0;
      let total = 0;
      for (const set of byCaller.values()) total += set.size;
      return total;
    },
  };
}
