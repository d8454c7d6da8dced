// The task event log (`a2a_task_events`): every event a task streams, with the id a client
// resumes from. A stream that breaks loses nothing: `SubscribeToTask` (v0.3 `tasks/resubscribe`)
// with the last id seen reads what followed from here, then goes on reading as events are added,
// on whichever instance records them.
//
// - An event is recorded once, by the loop that stores it (request-handler.ts: the stream's loop
//   and the blocking one; service.ts: a run settled outside a request; a cancel with no run here),
//   before any client sees it. Its `seq` is the task's own counter, bumped by the same statement
//   under the task's row lock, so ids rise by one per event whichever instance records it, and a
//   NOTIFY in that statement tells every instance at commit.
// - Following a task never joins a live feed to a replay: it reads the log after the last id it
//   yielded, and a notification only says "read again". The seam has nothing to stitch: no event
//   is read twice and none is skipped, because the next read starts after the last id yielded.
//   The listener is in place before the first read, and a lost notification costs at most one
//   poll (`pollMs`).
// - Bounded: a resume replays at most `maxReplayEvents` events no older than `maxReplayAgeMs`;
//   past that the client gets the task as it is now (a full snapshot), then what follows. Events
//   older than the age bound are pruned.
import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { and, asc, eq, gt, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import type { Channel, Notifications } from "../db/notifications.ts";
import { prebuilt } from "../db/prebuilt.ts";
import { a2aTaskEvents, a2aTasks } from "../db/schema.ts";
import type { Logger } from "../log.ts";

export const taskEventChannelName = "peergate_task_events";

/** Says a task has new events; the message is the task id (the rows are the truth). */
export const taskEventWakeups: Channel<string> = {
  name: taskEventChannelName,
  parse: (payload) => (payload === "" ? undefined : payload),
  format: (taskId) => taskId,
};

/** How far back a resume replays (docs/a2a.md, "Resuming a stream"). */
export const defaultReplayBounds = { maxReplayEvents: 1_000, maxReplayAgeMs: 24 * 3_600_000 };

/**
 * Appends a task's next events (a JSON array, in order), bumping its counter by as many under its
 * row lock; no row when the task is not the caller's. Answers the last seq given.
 */
const appendEvents = prebuilt<
  { taskId: string; callerId: string; events: string; count: number },
  { last: number | null }
>(
  () => sql`with bump as (
      update ${a2aTasks} set event_seq = event_seq + ${sql.placeholder("count")}::int
      where id = ${sql.placeholder("taskId")} and caller_id = ${sql.placeholder("callerId")}
      returning id, caller_id, event_seq),
    added as (
      insert into ${a2aTaskEvents} (task_id, seq, caller_id, event)
      select b.id, b.event_seq - ${sql.placeholder("count")}::int + e.ord::int, b.caller_id, e.value
      from bump b, jsonb_array_elements(${sql.placeholder("events")}::jsonb) with ordinality as e(value, ord)
      returning task_id, seq)
    select max(seq) as last, (select pg_notify(${taskEventChannelName}, ${sql.placeholder("taskId")})) as woke
    from added`,
);

export type LoggedEvent = { seq: number; event: StreamResponse };

export type TaskEventLog = {
  /**
   * Records `event` as the task's next (after every event recorded before it on this instance);
   * its seq, or undefined when the task row is absent or the write failed (logged).
   */
  record(taskId: string, callerId: string, event: StreamResponse): Promise<number | undefined>;
  /** The task's last seq and state, or undefined when it is not the caller's. */
  head(callerId: string, taskId: string): Promise<{ seq: number; state: string } | undefined>;
  /** Whether a resume from `after` is within the bounds (the events it needs are all kept). */
  canReplay(callerId: string, taskId: string, after: number, head: number): Promise<boolean>;
  /**
   * The task's events after `after`, oldest first, then each new one as it is recorded, until
   * one that ends a stream (terminal or input-required) or `signal` aborts.
   */
  follow(options: {
    callerId: string;
    taskId: string;
    after: number;
    signal: AbortSignal;
  }): AsyncGenerator<LoggedEvent, void, undefined>;
  /** Deletes events older than the age bound; how many. */
  prune(): Promise<number>;
  close(): Promise<void>;
};

const endStates = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
  "TASK_STATE_INPUT_REQUIRED",
]);

/** Whether a stream ends after this event (as the SDK's event queue decides). */
export function endsStream(event: StreamResponse): boolean {
  const payload = event.payload;
  if (payload?.$case === "message") return true;
  if (payload?.$case !== "statusUpdate" && payload?.$case !== "task") return false;
  const state = payload.value.status?.state;
  return state !== undefined && endStates.has(stateName(state));
}

/** The proto name of a task state (`TASK_STATE_COMPLETED`), as the SDK's enum maps it. */
function stateName(state: number): string {
  const name: unknown = TaskState[state];
  return typeof name === "string" ? name : "TASK_STATE_UNSPECIFIED";
}

export type TaskEventLogOptions = {
  db: Db;
  /** Wakes followers when another instance records; without it they poll. */
  notifications?: Notifications;
  logger: Logger;
  /** How often an idle follower reads again without being woken (default 1 s). */
  pollMs?: number;
  /**
   * How long a follower waits for the last events of a task whose stored end it has seen before
   * it ends the stream without them (default 15 s): see `follow`.
   */
  endGraceMs?: number;
  maxReplayEvents?: number;
  maxReplayAgeMs?: number;
  /** Codec of stored events (the SDK's StreamResponse ProtoJSON). */
  codec: {
    toJSON(event: StreamResponse): unknown;
    fromJSON(json: unknown): StreamResponse;
  };
};

export function createTaskEventLog(options: TaskEventLogOptions): TaskEventLog {
  const { db, codec, logger } = options;
  const pollMs = options.pollMs ?? 1_000;
  const endGraceMs = options.endGraceMs ?? 15_000;
  const maxReplayEvents = options.maxReplayEvents ?? defaultReplayBounds.maxReplayEvents;
  const maxReplayAgeMs = options.maxReplayAgeMs ?? defaultReplayBounds.maxReplayAgeMs;
  const wakers = new Map<string, Set<() => void>>();
  const wake = (taskId: string) => {
    for (const w of wakers.get(taskId) ?? []) w();
  };
  const wakeAll = () => {
    for (const set of wakers.values()) for (const w of set) w();
  };
  let unsubscribe: Promise<() => Promise<void>> | undefined;
  let stopGap: (() => void) | undefined;
  const listen = (): Promise<unknown> => {
    const hub = options.notifications;
    if (!hub) return Promise.resolve();
    if (!unsubscribe) {
      unsubscribe = hub.subscribe(taskEventWakeups, wake);
      stopGap = hub.onGap(wakeAll);
      unsubscribe.catch((error: unknown) => {
        logger.warn("listening for task events failed; followers poll", { error });
        unsubscribe = undefined;
      });
    }
    return unsubscribe.catch(() => {});
  };

  // Group commit per task: events wait while the task's previous write is in flight, then go
  // in one statement, in order. A stream's events are not held back by the one before them more
  // than one round trip, and a burst costs one.
  type Pending = { event: StreamResponse; resolve: (seq: number | undefined) => void };
  const queues = new Map<string, { callerId: string; pending: Pending[] }>();

  async function drain(taskId: string): Promise<void> {
    for (;;) {
      const queue = queues.get(taskId);
      const batch = queue?.pending.splice(0);
      if (!queue || !batch || batch.length === 0) {
        queues.delete(taskId);
        return;
      }
      let last: number | undefined;
      try {
        const rows = await appendEvents(db, {
          taskId,
          callerId: queue.callerId,
          events: JSON.stringify(batch.map((p) => codec.toJSON(p.event))),
          count: batch.length,
        });
        const value = rows[0]?.last;
        last = value === null || value === undefined ? undefined : Number(value);
      } catch (error) {
        logger.error("recording task events failed", { taskId, error });
      }
      batch.forEach((p, i) => {
        p.resolve(last === undefined ? undefined : last - batch.length + 1 + i);
      });
      if (last !== undefined) wake(taskId);
    }
  }

  function record(
    taskId: string,
    callerId: string,
    event: StreamResponse,
  ): Promise<number | undefined> {
    return new Promise((resolve) => {
      const queue = queues.get(taskId);
      if (queue) {
        queue.pending.push({ event, resolve });
        return;
      }
      queues.set(taskId, { callerId, pending: [{ event, resolve }] });
      // The write leaves once the events published with this one (in the same turn of the event
      // loop: the task and WORKING, or the answer and COMPLETED) are queued behind it, so they
      // share one statement and one round trip instead of each taking its own.
      setImmediate(() => void drain(taskId));
    });
  }

  async function head(callerId: string, taskId: string) {
    const rows = await db
      .select({ seq: a2aTasks.eventSeq, state: sql<string>`${a2aTasks.task}->'status'->>'state'` })
      .from(a2aTasks)
      .where(and(eq(a2aTasks.id, taskId), eq(a2aTasks.callerId, callerId)))
      .limit(1);
    const row = rows[0];
    return row ? { seq: row.seq, state: row.state ?? "" } : undefined;
  }

  async function canReplay(callerId: string, taskId: string, after: number, last: number) {
    if (last - after > maxReplayEvents) return false;
    if (after === last) return true;
    const rows = await db
      .select({ createdAt: a2aTaskEvents.createdAt })
      .from(a2aTaskEvents)
      .where(
        and(
          eq(a2aTaskEvents.taskId, taskId),
          eq(a2aTaskEvents.callerId, callerId),
          eq(a2aTaskEvents.seq, after + 1),
        ),
      )
      .limit(1);
    const first = rows[0];
    return first !== undefined && Date.now() - first.createdAt.getTime() <= maxReplayAgeMs;
  }

  async function* follow(o: {
    callerId: string;
    taskId: string;
    after: number;
    signal: AbortSignal;
  }): AsyncGenerator<LoggedEvent, void, undefined> {
    let woken = false;
    let release: (() => void) | undefined;
    const waker = () => {
      woken = true;
      release?.();
    };
    const onAbort = () => release?.();
    let set = wakers.get(o.taskId);
    if (!set) {
      set = new Set();
      wakers.set(o.taskId, set);
    }
    set.add(waker);
    o.signal.addEventListener("abort", onAbort);
    try {
      await listen();
      let last = o.after;
      /** When the stored end was first seen with nothing recorded after `last` (ms clock). */
      let endSeenAt: number | undefined;
      const batch = 100;
      for (;;) {
        if (o.signal.aborted) return;
        woken = false;
        const rows = await db
          .select({ seq: a2aTaskEvents.seq, event: a2aTaskEvents.event })
          .from(a2aTaskEvents)
          .where(
            and(
              eq(a2aTaskEvents.taskId, o.taskId),
              eq(a2aTaskEvents.callerId, o.callerId),
              gt(a2aTaskEvents.seq, last),
            ),
          )
          .orderBy(asc(a2aTaskEvents.seq))
          .limit(batch);
        for (const row of rows) {
          if (o.signal.aborted) return;
          const event = codec.fromJSON(row.event);
          last = row.seq;
          yield { seq: row.seq, event };
          if (endsStream(event)) return;
        }
        if (rows.length > 0) endSeenAt = undefined;
        if (rows.length === batch || woken) continue;
        // Nothing new. The stored task is written before its last events are recorded (the run's
        // end writes it in its own transaction; the events follow through the bus, a round trip
        // or more later, seconds on a loaded machine), so an end found there is trusted only when
        // no event came for `endGraceMs` after it was first seen: a task ended by a path that
        // records nothing must not hold the stream open for good, and one whose end is on its way
        // must not lose it (one poll was not enough: seen under load, the stream ended without
        // its COMPLETED).
        const now = await head(o.callerId, o.taskId);
        if (!now) return;
        if (now.seq <= last && endStates.has(now.state)) {
          endSeenAt ??= performance.now();
          if (performance.now() - endSeenAt >= endGraceMs) return;
        }
        if (now.seq > last || woken) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          timer.unref();
          release = () => {
            clearTimeout(timer);
            resolve();
          };
          if (woken || o.signal.aborted) release();
        });
        release = undefined;
      }
    } finally {
      o.signal.removeEventListener("abort", onAbort);
      set.delete(waker);
      if (set.size === 0 && wakers.get(o.taskId) === set) wakers.delete(o.taskId);
    }
  }

  async function prune(): Promise<number> {
    const cutoff = new Date(Date.now() - maxReplayAgeMs);
    const rows = await db
      .delete(a2aTaskEvents)
      .where(lt(a2aTaskEvents.createdAt, cutoff))
      .returning({ seq: a2aTaskEvents.seq });
    return rows.length;
  }

  return {
    record,
    head,
    canReplay,
    follow,
    prune,
    async close() {
      stopGap?.();
      const pending = unsubscribe;
      unsubscribe = undefined;
      if (pending) await (await pending.catch(() => async () => {}))();
    },
  };
}

/** Where an event carries its id: `metadata.peergate.eventId` of the task or update it holds. */
export function withEventId(event: StreamResponse, seq: number): StreamResponse {
  const payload = event.payload;
  if (!payload || payload.$case === "message") return event;
  const value = payload.value as { metadata?: Record<string, unknown> | undefined };
  const metadata = value.metadata ?? {};
  const own = (metadata.peergate ?? {}) as Record<string, unknown>;
  return {
    ...event,
    payload: {
      ...payload,
      value: { ...payload.value, metadata: { ...metadata, peergate: { ...own, eventId: seq } } },
    } as StreamResponse["payload"],
  };
}

/**
 * The id of a streamed JSON-RPC response, for the SSE `id:` field: the event's
 * `metadata.peergate.eventId`, in the 1.0 shape (`result.statusUpdate.metadata…`) or v0.3's
 * (`result.metadata…`).
 */
export function streamEventId(response: { result?: unknown }): string | undefined {
  const result = response.result;
  if (typeof result !== "object" || result === null) return undefined;
  const holders = [
    result,
    ...["task", "statusUpdate", "artifactUpdate"].map(
      (k) => (result as Record<string, unknown>)[k],
    ),
  ];
  for (const holder of holders) {
    if (typeof holder !== "object" || holder === null) continue;
    const meta = (holder as { metadata?: { peergate?: { eventId?: unknown } } }).metadata;
    const id = meta?.peergate?.eventId;
    if (typeof id === "number" && Number.isInteger(id)) return String(id);
  }
  return undefined;
}

/** A resume point as a client sends it (`Last-Event-ID`): a whole number, or undefined. */
export function parseLastEventId(value: unknown): number | undefined | "invalid" {
  if (value === undefined || value === null || value === "") return undefined;
  const text = typeof value === "number" ? String(value) : typeof value === "string" ? value : "";
  if (!/^\d{1,9}$/.test(text.trim())) return "invalid";
  return Number(text.trim());
}
