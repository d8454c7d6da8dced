// A2A tasks in Postgres (`a2a_tasks`), always scoped to the caller of the request: every read and
// write names the caller id, so another caller's task is simply absent ("task not found", never
// "forbidden": existence must not leak). Tasks are stored in their ProtoJSON form, the same JSON
// the 1.0 wire carries, so raw file bytes become base64 and enums their names.
//
// The SDK saves a task by load-merge-save under an in-process lock. Several instances share the
// database, so a stale merge from one could overwrite a terminal state written by another (a
// cancel on instance B while instance A streams the answer). The upsert therefore refuses to move
// a task out of a terminal state: once completed, failed, canceled or rejected, a task keeps that
// state whatever a late writer sends.
//
// The SDK also saves on every event (each status and artifact update is a load and a save), so a
// run with a few tool calls would cost a dozen round trips. Progress is coalesced instead: the
// first save of a task, and every save that reaches a terminal or interrupted state (completed,
// failed, canceled, rejected, input-required, auth-required), is written at once; a save that
// only moves a running task along updates this instance's copy, which is written within
// `progressFlushMs`. Loads on this instance see the newest copy; another instance may read a
// running task up to `progressFlushMs` old, and never an old terminal state. Only the instance
// running a task writes its progress, so the local copy is the newest there; a cancel written by
// another instance is terminal, and the guard above keeps it.
import type { ListTasksRequest, ListTasksResponse } from "@a2a-js/sdk";
import { Task, taskStateToJSON } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import type { AgentExecutionEvent, ServerCallContext, TaskStore } from "@a2a-js/sdk/server";
import { and, asc, count, desc, eq, inArray, ne, type SQL, sql } from "drizzle-orm";
import type { Db, DbOrTx, DbTransaction } from "../db/client.ts";
import { prebuilt } from "../db/prebuilt.ts";
import { a2aTasks } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { asUnavailableError } from "../services/db-errors.ts";
import { escalate, readCallerId } from "./call-context.ts";
import { withPushOutbox } from "./push-outbox.ts";
import { applyEndEvents } from "./task-settle.ts";

/** Interrupted states: the run stopped and waits for someone; written at once, like terminal ones. */
const interruptedStateNames = ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"];

/**
 * A parked run's task: WORKING (the caller has nothing to do), but its run holds no instance, so
 * it is written at once like an interrupted one (another instance may answer and settle it).
 */
function waitsForOperator(json: Record<string, unknown>): boolean {
  const status = json.status as { message?: { metadata?: Record<string, unknown> } } | undefined;
  const meta = status?.message?.metadata?.peergate as { waitingFor?: unknown } | undefined;
  return meta?.waitingFor === "operator";
}

export const terminalStateNames = [
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
] as const;

/**
 * Stores a task for its caller, and queues it for the task's push configs in the same statement
 * (push-outbox.ts). Never another caller's row; never out of a terminal state, unless into the
 * same one. Built once (src/db/prebuilt.ts): every save of every task sends this statement.
 */
const storeTask = prebuilt<{
  id: string;
  callerId: string;
  contextId: string;
  task: Record<string, unknown>;
}>((db) =>
  withPushOutbox(
    db
      .insert(a2aTasks)
      .values({
        id: sql.placeholder("id"),
        callerId: sql.placeholder("callerId"),
        contextId: sql.placeholder("contextId"),
        task: sql.placeholder("task"),
      })
      .onConflictDoUpdate({
        target: a2aTasks.id,
        set: {
          task: sql`excluded.task`,
          contextId: sql`excluded.context_id`,
          updatedAt: sql`now()`,
        },
        setWhere: sql`"a2a_tasks"."caller_id" = excluded.caller_id and (
          coalesce("a2a_tasks"."task"->'status'->>'state', '') not in (${sql.join(
            terminalStateNames.map((name) => sql`${name}`),
            sql`, `,
          )})
          or "a2a_tasks"."task"->'status'->>'state' = excluded.task->'status'->>'state')`,
      })
      .returning({ id: a2aTasks.id, callerId: a2aTasks.callerId, task: a2aTasks.task }),
  ),
);

const defaultPageSize = 50;

type StoredRow = { task: unknown };

function decodeTask(row: StoredRow): Task {
  return Task.fromJSON(row.task);
}

// A page token names where the next page starts (the last task's updated_at and id) and carries
// the listing's total as its first page counted it: counting a caller's tasks reads every one of
// them, so a page deep in 100 000 tasks would cost what the whole list does (bench/growth.ts).
// `totalSize` on later pages is therefore the total when the listing began. A token from before
// the total was carried (two elements) is still read; that page counts again.
function encodePageToken(updatedAt: Date, id: string, total: number): string {
  return Buffer.from(JSON.stringify([updatedAt.toISOString(), id, total])).toString("base64url");
}

function decodePageToken(token: string): { updatedAt: Date; id: string; total?: number } {
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && typeof value[0] === "string" && typeof value[1] === "string") {
      const updatedAt = new Date(value[0]);
      const total = value[2];
      const counted = Number.isSafeInteger(total) && (total as number) >= 0;
      if (!Number.isNaN(updatedAt.getTime()) && (value.length === 2 || counted)) {
        return { updatedAt, id: value[1], ...(counted ? { total: total as number } : {}) };
      }
    }
  } catch {
    // reported below
  }
  throw new RequestMalformedError("pageToken is not a token this server issued");
}

export type TaskStoreOptions = {
  /** Longest a running task's progress waits before it is written (default 200 ms). */
  progressFlushMs?: number;
  /** Progress copies untouched this long are written and dropped (default 10 min). */
  idleEvictMs?: number;
  logger?: Logger;
};

export type PostgresTaskStore = TaskStore & {
  /** A task of `callerId`, or undefined (also when it belongs to someone else). */
  loadForCaller(callerId: string, taskId: string): Promise<Task | undefined>;
  /** The caller's tasks of one context, oldest first, at most `limit` of the newest. */
  listContextTasks(
    callerId: string,
    contextId: string,
    options: { excludeTaskId?: string; limit: number },
  ): Promise<Task[]>;
  /** The caller's tasks among `ids`, oldest first; ids it does not own are left out. */
  loadManyForCaller(callerId: string, ids: readonly string[]): Promise<Task[]>;
  /**
   * Writes a new task in `tx`, the transaction that creates its run. Once that committed,
   * `holdCreated` makes it this instance's copy, so the SDK's load of the task about to be
   * published and its save of that same SUBMITTED task cost no round trip.
   */
  createInTransaction(tx: DbTransaction, task: Task, callerId: string): Promise<void>;
  /** Holds a task `createInTransaction` wrote, after its transaction committed. */
  holdCreated(task: Task, callerId: string): void;
  /**
   * The task this instance holds, with a run's last events applied as the SDK will apply them
   * (task-settle.ts); undefined when no copy is held here, or the SDK has not saved every event
   * before those into it yet.
   */
  planSettle(
    taskId: string,
    callerId: string,
    events: readonly AgentExecutionEvent[],
    /** The SDK's saves the copy must have taken (the events published before `events`). */
    savedEvents: number,
  ): SettlePlan | undefined;
  /** Writes a planned task in `tx`, the transaction that ends its run. */
  writeSettled(tx: DbTransaction, plan: SettlePlan): Promise<void>;
  /**
   * After that transaction committed: the SDK's save of exactly the planned task is then already
   * written and costs nothing; any other save is written as usual.
   */
  settled(plan: SettlePlan): void;
  /** Writes every pending progress copy. */
  flush(): Promise<void>;
  /** Writes pending progress and stops the idle sweeper (shutdown). */
  close(): Promise<void>;
  /** Progress copies held (for tests). */
  pendingCount(): number;
};

/** A task as it will settle, planned by `planSettle`. */
export type SettlePlan = {
  readonly taskId: string;
  readonly callerId: string;
  readonly contextId: string;
  readonly json: Record<string, unknown>;
  /** `json` as text: how the SDK's save is recognised as the same task. */
  readonly text: string;
};

/** This instance's copy of a running task, and the write that carries it to the database. */
type Progress = {
  callerId: string;
  contextId: string;
  json: Record<string, unknown>;
  dirty: boolean;
  touchedAt: number;
  timer?: NodeJS.Timeout;
  /** The latest write in flight; writes of one task are chained so they land in order. */
  writing: Promise<void>;
  /** The settled task the run's end already wrote (`settled`), as text. */
  settledText?: string;
  /** Saves of this copy by the SDK since it was held. */
  saves: number;
};

/**
 * Runs a query; a database that cannot be reached is escalated (503 at the HTTP layer) besides
 * being thrown, since the SDK would turn it into a JSON-RPC internal error.
 */
async function guard<T>(
  context: ServerCallContext | undefined,
  work: () => Promise<T>,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const unavailable = asUnavailableError(error);
    if (unavailable && context) escalate(context, unavailable);
    throw error;
  }
}

export function createTaskStore(db: Db, options: TaskStoreOptions = {}): PostgresTaskStore {
  const flushMs = options.progressFlushMs ?? 200;
  const idleEvictMs = options.idleEvictMs ?? 10 * 60_000;
  const progress = new Map<string, Progress>();

  async function loadForCaller(callerId: string, taskId: string): Promise<Task | undefined> {
    if (taskId === "") return undefined;
    const held = progress.get(taskId);
    if (held && held.callerId === callerId) return Task.fromJSON(held.json);
    const rows = await db
      .select({ task: a2aTasks.task })
      .from(a2aTasks)
      .where(and(eq(a2aTasks.id, taskId), eq(a2aTasks.callerId, callerId)))
      .limit(1);
    const row = rows[0];
    return row ? decodeTask(row) : undefined;
  }

  async function upsert(
    id: string,
    callerId: string,
    contextId: string,
    json: Record<string, unknown>,
    on: DbOrTx = db,
  ): Promise<void> {
    await storeTask(on, { id, callerId, contextId, task: json });
  }

  /** Chains a write of the held copy's current JSON after the writes before it. */
  function writeHeld(id: string, held: Progress): Promise<void> {
    if (held.timer) clearTimeout(held.timer);
    held.timer = undefined;
    held.dirty = false;
    const json = held.json;
    held.writing = held.writing
      .catch(() => {})
      .then(() => upsert(id, held.callerId, held.contextId, json));
    return held.writing;
  }

  function scheduleFlush(id: string, held: Progress): void {
    held.timer ??= setTimeout(() => {
      held.timer = undefined;
      writeHeld(id, held).catch((error) => {
        held.dirty = true;
        options.logger?.error("writing a task's progress failed", { taskId: id, error });
      });
    }, flushMs);
    held.timer.unref();
  }

  async function save(task: Task, context: ServerCallContext): Promise<void> {
    const callerId = readCallerId(context);
    const json = Task.toJSON(task) as Record<string, unknown>;
    const state = (json.status as { state?: string } | undefined)?.state ?? "";
    const settles =
      (terminalStateNames as readonly string[]).includes(state) ||
      interruptedStateNames.includes(state) ||
      waitsForOperator(json);
    const held = progress.get(task.id);
    const owned = held?.callerId === callerId;
    if (held && owned) held.saves += 1;

    if (held && owned && !settles) {
      held.json = json;
      held.contextId = task.contextId;
      held.dirty = true;
      held.touchedAt = Date.now();
      scheduleFlush(task.id, held);
      return;
    }
    if (held && owned && settles && held.settledText !== undefined) {
      // Written with the run's end, in its transaction: the same task needs no second write.
      if (JSON.stringify(json) === held.settledText) {
        progress.delete(task.id);
        if (held.timer) clearTimeout(held.timer);
        return;
      }
      held.settledText = undefined;
    }
    await guard(context, async () => {
      if (held && owned) {
        held.json = json;
        held.contextId = task.contextId;
        progress.delete(task.id);
        await writeHeld(task.id, held);
        return;
      }
      await upsert(task.id, callerId, task.contextId, json);
      if (!settles && !held) {
        progress.set(task.id, {
          callerId,
          contextId: task.contextId,
          json,
          dirty: false,
          touchedAt: Date.now(),
          writing: Promise.resolve(),
          saves: 0,
        });
      }
    });
  }

  async function createInTransaction(
    tx: DbTransaction,
    task: Task,
    callerId: string,
  ): Promise<void> {
    await upsert(
      task.id,
      callerId,
      task.contextId,
      Task.toJSON(task) as Record<string, unknown>,
      tx,
    );
  }

  function holdCreated(task: Task, callerId: string): void {
    if (progress.has(task.id)) return;
    progress.set(task.id, {
      callerId,
      contextId: task.contextId,
      json: Task.toJSON(task) as Record<string, unknown>,
      dirty: false,
      touchedAt: Date.now(),
      writing: Promise.resolve(),
      saves: 0,
    });
  }

  function planSettle(
    taskId: string,
    callerId: string,
    events: readonly AgentExecutionEvent[],
    savedEvents: number,
  ): SettlePlan | undefined {
    const held = progress.get(taskId);
    if (!held || held.callerId !== callerId || held.saves !== savedEvents) return undefined;
    const task = applyEndEvents(Task.fromJSON(held.json), events);
    const json = Task.toJSON(task) as Record<string, unknown>;
    return { taskId, callerId, contextId: task.contextId, json, text: JSON.stringify(json) };
  }

  async function writeSettled(tx: DbTransaction, plan: SettlePlan): Promise<void> {
    await upsert(plan.taskId, plan.callerId, plan.contextId, plan.json, tx);
  }

  function settled(plan: SettlePlan): void {
    const held = progress.get(plan.taskId);
    if (held && held.callerId === plan.callerId) held.settledText = plan.text;
  }

  // A run that never reaches an end state would keep its copy forever; idle copies are written
  // and dropped.
  const sweeper = setInterval(
    () => {
      const cutoff = Date.now() - idleEvictMs;
      for (const [id, held] of progress) {
        if (held.touchedAt > cutoff) continue;
        progress.delete(id);
        if (held.dirty) {
          writeHeld(id, held).catch((error) =>
            options.logger?.error("writing a task's progress failed", { taskId: id, error }),
          );
        } else if (held.timer) {
          clearTimeout(held.timer);
        }
      }
    },
    Math.min(idleEvictMs, 60_000),
  );
  sweeper.unref();

  async function flush(): Promise<void> {
    const writes: Promise<void>[] = [];
    for (const [id, held] of progress) {
      writes.push(held.dirty ? writeHeld(id, held) : held.writing.catch(() => {}));
    }
    await Promise.all(writes);
  }

  async function list(
    params: ListTasksRequest,
    context: ServerCallContext,
  ): Promise<ListTasksResponse> {
    const callerId = readCallerId(context);
    const pageSize = params.pageSize ?? defaultPageSize;
    const filters: SQL[] = [eq(a2aTasks.callerId, callerId)];
    if (params.contextId) filters.push(eq(a2aTasks.contextId, params.contextId));
    if (params.status) {
      filters.push(sql`${a2aTasks.task}->'status'->>'state' = ${taskStateToJSON(params.status)}`);
    }
    if (params.statusTimestampAfter) {
      const after = new Date(params.statusTimestampAfter);
      filters.push(
        sql`(${a2aTasks.task}->'status'->>'timestamp')::timestamptz > ${after.toISOString()}::timestamptz`,
      );
    }
    const pageFilters = [...filters];
    const cursor = params.pageToken ? decodePageToken(params.pageToken) : undefined;
    if (cursor) {
      pageFilters.push(
        sql`(${a2aTasks.updatedAt}, ${a2aTasks.id}) < (${cursor.updatedAt.toISOString()}::timestamptz, ${cursor.id})`,
      );
    }
    return guard(context, async () => {
      const [rows, total] = await Promise.all([
        db
          .select({ task: a2aTasks.task, id: a2aTasks.id, updatedAt: a2aTasks.updatedAt })
          .from(a2aTasks)
          .where(and(...pageFilters))
          .orderBy(desc(a2aTasks.updatedAt), desc(a2aTasks.id))
          .limit(pageSize + 1),
        cursor?.total ??
          db
            .select({ total: count() })
            .from(a2aTasks)
            .where(and(...filters))
            .then((totals) => totals[0]?.total ?? 0),
      ]);
      const page = rows.slice(0, pageSize);
      const last = page.at(-1);
      const tasks = page.map((row) => {
        const task = decodeTask(row);
        if (!params.includeArtifacts) task.artifacts = [];
        return task;
      });
      return {
        tasks,
        nextPageToken:
          rows.length > pageSize && last ? encodePageToken(last.updatedAt, last.id, total) : "",
        pageSize,
        totalSize: total,
      };
    });
  }

  async function listContextTasks(
    callerId: string,
    contextId: string,
    options: { excludeTaskId?: string; limit: number },
  ): Promise<Task[]> {
    const filters = [eq(a2aTasks.callerId, callerId), eq(a2aTasks.contextId, contextId)];
    if (options.excludeTaskId) filters.push(ne(a2aTasks.id, options.excludeTaskId));
    const rows = await db
      .select({ task: a2aTasks.task })
      .from(a2aTasks)
      .where(and(...filters))
      .orderBy(desc(a2aTasks.createdAt), desc(a2aTasks.id))
      .limit(options.limit);
    return rows.reverse().map(decodeTask);
  }

  async function loadManyForCaller(callerId: string, ids: readonly string[]): Promise<Task[]> {
    const wanted = [...new Set(ids.filter((id) => id !== ""))];
    if (wanted.length === 0) return [];
    const rows = await db
      .select({ task: a2aTasks.task })
      .from(a2aTasks)
      .where(and(eq(a2aTasks.callerId, callerId), inArray(a2aTasks.id, wanted)))
      .orderBy(asc(a2aTasks.createdAt), asc(a2aTasks.id));
    return rows.map(decodeTask);
  }

  return {
    load: (taskId, context) => guard(context, () => loadForCaller(readCallerId(context), taskId)),
    save,
    list,
    loadForCaller,
    listContextTasks,
    loadManyForCaller,
    createInTransaction,
    holdCreated,
    planSettle,
    writeSettled,
    settled,
    flush,
    close: async () => {
      clearInterval(sweeper);
      await flush();
    },
    pendingCount: () => progress.size,
  };
}
