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
//
// One file over 500 lines on purpose: every statement that writes or reads `a2a_tasks` is here,
// so the caller scoping and the terminal-state guard can be read beside each other.
import type { ListTasksRequest, ListTasksResponse } from "@a2a-js/sdk";
import { type Artifact, Task, type TaskStatus, taskStateToJSON } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import type { ServerCallContext, TaskStore } from "@a2a-js/sdk/server";
import { and, asc, count, desc, eq, inArray, ne, type SQL, sql } from "drizzle-orm";
import type { Db, DbOrTx } from "../db/client.ts";
import { prebuilt } from "../db/prebuilt.ts";
import { a2aTaskCounts, a2aTasks } from "../db/schema.ts";
import { storableJson } from "../db/storable.ts";
import type { Logger } from "../log.ts";
import { asUnavailableError } from "../services/db-errors.ts";
import { escalate, readCallerId } from "./call-context.ts";
import { withPushOutbox } from "./push-outbox.ts";

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

/** The guard of every write of a task: never out of a terminal state (see the module comment). */
const notTerminal = sql.raw(
  `coalesce("a2a_tasks"."task"->'status'->>'state', '') not in (${terminalStateNames
    .map((name) => `'${name}'`)
    .join(", ")})`,
);

/**
 * A new task as a statement with its values (StartRunRequest.atStart): the run engine sends it in
 * the transaction that creates the task's run. The same upsert as every save, push outbox too.
 */
export function createTaskStatement(task: Task, callerId: string): SQL {
  const json = storableJson(Task.toJSON(task));
  return withPushOutbox(
    // In parentheses: drizzle adds them to an embedded query builder, not to a statement's text.
    sql`(insert into ${a2aTasks} (id, caller_id, context_id, task)
      values (${task.id}, ${callerId}, ${task.contextId}, ${JSON.stringify(json)}::jsonb)
      on conflict (id) do update set task = excluded.task, context_id = excluded.context_id,
        updated_at = now()
      where "a2a_tasks"."caller_id" = excluded.caller_id and (${notTerminal}
        or "a2a_tasks"."task"->'status'->>'state' = excluded.task->'status'->>'state')
      returning id, caller_id, task)`,
  );
}

/** How a run's end leaves its task: the end status, and the answer when there is one. */
export type TaskEnd = {
  readonly taskId: string;
  readonly callerId: string;
  readonly status: TaskStatus;
  /** The answer artifact, replacing the one of its id (or added). */
  readonly artifact?: Artifact | undefined;
};

/**
 * A task's end as a statement with its values (StartRunRequest.atEnd), from the run's end alone:
 * the stored task takes the end status, its message joins the history (once, by its id), and the
 * answer replaces the artifact of its id in place or is added. A task already in a terminal state
 * is left as it is. Push configs of the task are queued by the same statement.
 */
export function endTaskStatement(end: TaskEnd): SQL {
  // Encoded as the SDK encodes a whole task (ProtoJSON), then taken apart.
  const encoded = Task.toJSON({
    id: end.taskId,
    contextId: "",
    status: end.status,
    artifacts: end.artifact ? [end.artifact] : [],
    history: end.status.message ? [end.status.message] : [],
    metadata: undefined,
  }) as { status?: unknown; artifacts?: unknown[]; history?: unknown[] };
  const status = JSON.stringify(storableJson(encoded.status ?? {}));
  const message = encoded.history?.[0];
  const messageJson = message === undefined ? null : JSON.stringify(storableJson(message));
  const messageId = end.status.message?.messageId ?? "";
  const artifact = encoded.artifacts?.[0];
  const artifactJson = artifact === undefined ? null : JSON.stringify(storableJson(artifact));
  const artifactId = end.artifact?.artifactId ?? "";
  const task = sql.raw(`"a2a_tasks"."task"`);
  const history = sql`coalesce(${task}->'history', '[]'::jsonb)`;
  const artifacts = sql`coalesce(${task}->'artifacts', '[]'::jsonb)`;
  return withPushOutbox(
    sql`(update ${a2aTasks} set
        task = jsonb_set(jsonb_set(${task}, '{status}', ${status}::jsonb), '{history}',
          case when ${messageJson}::jsonb is null
              or ${history} @> jsonb_build_array(jsonb_build_object('messageId', ${messageId}::text))
            then ${history}
            else ${history} || jsonb_build_array(${messageJson}::jsonb) end)
          || case when ${artifactJson}::jsonb is null then '{}'::jsonb
            when ${artifacts} @> jsonb_build_array(jsonb_build_object('artifactId', ${artifactId}::text))
            then jsonb_build_object('artifacts', (
              select jsonb_agg(case when a->>'artifactId' = ${artifactId}::text
                then ${artifactJson}::jsonb else a end order by n)
              from jsonb_array_elements(${artifacts}) with ordinality as x(a, n)))
            else jsonb_build_object('artifacts', ${artifacts} || jsonb_build_array(${artifactJson}::jsonb))
          end,
        updated_at = now()
      where ${a2aTasks.id} = ${end.taskId} and ${a2aTasks.callerId} = ${end.callerId} and ${notTerminal}
      returning id, caller_id, task)`,
  );
}

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
   * Holds a new task its run's start wrote (createTaskStatement), once that committed: the SDK's
   * load of the task about to be published and its save of that same SUBMITTED task then cost no
   * round trip.
   */
  holdCreated(task: Task, callerId: string): void;
  /**
   * The task's end was written with its run's end (endTaskStatement): the SDK's own save of the
   * ended task, which follows, is not written again, whatever it holds (the row keeps the end
   * the run wrote, the one every reader then gets).
   */
  endWritten(taskId: string, callerId: string): void;
  /**
   * Resolves once the task has a row this instance knows of: at once when a copy is held here,
   * else after this instance's next save of it (the first save of a new task).
   */
  whenStored(taskId: string): Promise<void>;
  /** Writes every pending progress copy. */
  flush(): Promise<void>;
  /** Writes pending progress and stops the idle sweeper (shutdown). */
  close(): Promise<void>;
  /** Progress copies held (for tests). */
  pendingCount(): number;
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
  /** The run's end wrote the task's end: the SDK's save of its end is not written again. */
  endWritten?: true;
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
  /** Who waits for a task's first save on this instance (whenStored). */
  const storedWaiters = new Map<string, (() => void)[]>();
  const tellStored = (taskId: string) => {
    const waiters = storedWaiters.get(taskId);
    storedWaiters.delete(taskId);
    for (const wake of waiters ?? []) wake();
  };

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

    if (held && owned && held.endWritten) {
      if (!settles) {
        // The answer's last chunk, on its way to the end: the row holds the end already.
        held.json = json;
        return;
      }
      // The end the run wrote is the task's end: this save is the SDK's copy of the same events.
      progress.delete(task.id);
      if (held.timer) clearTimeout(held.timer);
      return;
    }
    if (held && owned && !settles) {
      held.json = json;
      held.contextId = task.contextId;
      held.dirty = true;
      held.touchedAt = Date.now();
      scheduleFlush(task.id, held);
      return;
    }
    try {
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
          });
        }
      });
    } finally {
      tellStored(task.id);
    }
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
    });
  }

  function endWritten(taskId: string, callerId: string): void {
    const held = progress.get(taskId);
    if (!held || held.callerId !== callerId) return;
    held.endWritten = true;
    // Progress written now would be refused by the row's terminal state: a round trip for nothing.
    if (held.timer) clearTimeout(held.timer);
    held.timer = undefined;
    held.dirty = false;
  }

  function whenStored(taskId: string): Promise<void> {
    if (progress.has(taskId)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = storedWaiters.get(taskId) ?? [];
      waiters.push(resolve);
      storedWaiters.set(taskId, waiters);
    });
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
          (filters.length === 1
            ? // The caller's own tasks, unfiltered: the count its inserts and deletes keep.
              db
                .select({ total: a2aTaskCounts.tasks })
                .from(a2aTaskCounts)
                .where(eq(a2aTaskCounts.callerId, callerId))
                .then((totals) => totals[0]?.total ?? 0)
            : db
                .select({ total: count() })
                .from(a2aTasks)
                .where(and(...filters))
                .then((totals) => totals[0]?.total ?? 0)),
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
    holdCreated,
    endWritten,
    whenStored,
    flush,
    close: async () => {
      clearInterval(sweeper);
      await flush();
    },
    pendingCount: () => progress.size,
  };
}
