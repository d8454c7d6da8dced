// The SDK's DefaultRequestHandler with peergate's rules on top, checked before the SDK stores
// anything. They hold for both wire versions, since both transports call into this handler with
// the 1.0 (core) request types:
//
// - a message needs a user role and at least one part (the SDK accepts an empty `parts`);
// - `historyLength`, where given, is a whole number ≥ 0;
// - ListTasks: `pageSize` a whole number 1–100, `statusTimestampAfter` an RFC 3339 timestamp
//   (date, time and zone: `2026-01-31T12:00:00Z`) within the years 0001–9999, the range of the
//   ProtoJSON Timestamp it stands for (the SDK checks it with Date.parse, which reads "-1" and
//   "2026" as years, so "-1" listed everything). The SDK refuses an unknown `status` itself;
// - a push-notification config, on a message or through CreateTaskPushNotificationConfig /
//   tasks/pushNotificationConfig/set, needs a task of this caller (-32001 otherwise, before
//   anything about the target is said) and a target the caller may notify: an http(s) url on
//   the caller's push grants that the egress guard lets through (push-targets.ts), else -32602
//   naming why; at most `maxPushConfigsPerTask` per task. Without a push store every push method
//   and a config on a message answer -32003;
// - a follow-up (`taskId`) must name a task of this caller (else -32001, as for a task that does
//   not exist) that waits for its caller's input (INPUT_REQUIRED: the message is the answer and
//   the same run resumes). A task still working, or waiting for an operator, is refused (-32004:
//   the engine cannot take a message into a run in flight); a task in a terminal state is refused
//   by the SDK (-32004). A conversation goes on with a new message in the same `contextId`, and
//   the run sees the context's earlier turns;
// - an answer claims its run here, before the SDK writes anything of the task: the engine's
//   compare-and-set (input-required → working, under the run's row lock) decides which of answers
//   racing for one task resumes the run. Every other one is refused with -32004 — the task is no
//   longer waiting for input — on every database, and leaves the task's history alone; the one
//   that won hands the running run to the executor (`ClaimedAnswer`, run-executor.ts);
// - every `referenceTaskIds` entry must be a task of this caller (-32001).
//
// SubscribeToTask follows a task to its end from the task event log (task-events.ts), not from
// this instance's bus, so a task waiting for an operator (parked) or for its caller's input is
// followed until whichever instance resumes it ends it, or the reader goes. A message to a
// finished task is refused (-32004) naming its state the way the request's version names states
// (`TASK_STATE_COMPLETED` in 1.0, `completed` in 0.3), not as the SDK's enum number.
//
// Cancel reaches a run wherever it is: when no run of the task is in flight on this instance (it
// is parked, or runs on another instance), the engine is asked to cancel it by the run id stored
// in the task's metadata before the SDK marks the task canceled.
//
// The event log hears a request's events through the bus manager the SDK takes in its
// constructor (`RecordingBusManager`, at the bottom): nothing of the SDK's own loop is replaced.
//
// Over 700 lines, as one file: the list above is checked in one place before the SDK stores
// anything, and a reader checks it whole. Resubscribe is what could move out next (it reads only
// task-events.ts and could live beside it).

import type { AgentCard, TaskPushNotificationConfig } from "@a2a-js/sdk";
import {
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  Role,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import {
  type AgentExecutionEvent,
  type AgentExecutor,
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  type ExecutionEventBus,
  type ExtendedAgentCardProvider,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import { ConflictError, NotFoundError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { RunEngine } from "../runs/types.ts";
import {
  escalate,
  isStreaming,
  markFreshContext,
  readCaller,
  readCallerId,
  readLastEventId,
  readStreamSignal,
  toEscalated,
} from "./call-context.ts";
import { describeParts } from "./conversation.ts";
import { pumpEvents } from "./event-stream.ts";
import type { PeergatePushStore } from "./push-store.ts";
import type { PushTargetCheck } from "./push-targets.ts";
import {
  createRunEventRelay,
  holdClaimedAnswer,
  readClaimedAnswer,
  readRunId,
  taskEndOf,
  waitingRunId,
} from "./run-executor.ts";
import { endsStream, parseLastEventId, type TaskEventLog, withEventId } from "./task-events.ts";
import { endTaskStatement, type PostgresTaskStore, terminalStateNames } from "./task-store.ts";
import { isUsageActive, type UsageReader, usageExtensionUri } from "./usage-extension.ts";

const terminalStates = new Set<TaskState>([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

export function isTerminal(task: Task): boolean {
  return task.status !== undefined && terminalStates.has(task.status.state);
}

/** A task state as the request's version names it: `TASK_STATE_COMPLETED` (1.0), `completed` (0.3). */
export function describeState(state: TaskState | undefined, context: ServerCallContext): string {
  const name = state === undefined ? undefined : TaskState[state];
  if (typeof name !== "string") return "unknown";
  if (context.requestedVersion === "1.0") return name;
  return name
    .replace(/^TASK_STATE_/, "")
    .toLowerCase()
    .replace(/_/g, "-");
}

function checkHistoryLength(value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < 0) {
    throw new RequestMalformedError("historyLength must be a whole number, 0 or more");
  }
}

const maxPageSize = 100;

function checkPageSize(value: number | undefined): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < 1 || value > maxPageSize) {
    throw new RequestMalformedError(
      `pageSize must be a whole number from 1 to ${maxPageSize} (got ${JSON.stringify(value)})`,
    );
  }
}

const rfc3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/** The instant of an RFC 3339 date-time in the years 0001–9999, or undefined when it is none. */
export function parseTimestamp(value: string): Date | undefined {
  const match = rfc3339.exec(value);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const offsetHours = match[9] === undefined ? 0 : Number(match[9]);
  const offsetMinutes = match[10] === undefined ? 0 : Number(match[10]);
  if (year < 1 || month < 1 || month > 12 || day < 1) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) {
    return undefined;
  }
  // A day past the month's end (2026-02-30) rolls over into the next month.
  const calendar = new Date(0);
  calendar.setUTCFullYear(year, month - 1, day);
  if (calendar.getUTCMonth() !== month - 1) return undefined;
  const instant = new Date(value);
  if (Number.isNaN(instant.getTime())) return undefined;
  const utcYear = instant.getUTCFullYear();
  return utcYear < 1 || utcYear > 9999 ? undefined : instant;
}

function checkStatusTimestamp(value: string | undefined): void {
  if (value === undefined || value === "") return;
  if (!parseTimestamp(value)) {
    throw new RequestMalformedError(
      `statusTimestampAfter must be an RFC 3339 timestamp between the years 0001 and 9999, such as 2026-01-31T12:00:00Z (got ${JSON.stringify(value.slice(0, 40))})`,
    );
  }
}

function checkMessageShape(message: Message | undefined): asserts message is Message {
  if (!message) throw new RequestMalformedError("params.message is required");
  if (!message.messageId) throw new RequestMalformedError("message.messageId is required");
  if (message.role !== Role.ROLE_USER) {
    throw new RequestMalformedError("message.role must be the user role");
  }
  if (message.parts.length === 0) {
    throw new RequestMalformedError("message.parts must hold at least one part");
  }
  message.parts.forEach((part, index) => {
    if (!part.content) {
      throw new RequestMalformedError(
        `message.parts[${index}] must hold one of text, raw, url or data`,
      );
    }
  });
}

export type PeergateRequestHandlerDeps = {
  card: AgentCard;
  store: PostgresTaskStore;
  executor: AgentExecutor;
  buses: RecordingBusManager;
  extendedCard: ExtendedAgentCardProvider;
  runs: RunEngine;
  logger: Logger;
  /** The task event log: what a stream sent, for a client that resubscribes (task-events.ts). */
  events: TaskEventLog;
  /** The usage extension's reader (usage-extension.ts); without it the extension adds nothing. */
  usage?: UsageReader;
  /** Push notifications: without it the card says none and every push method answers -32003. */
  push?: PushHandling;
};

export type PushHandling = {
  store: PeergatePushStore;
  checkTarget(callerId: string, url: string): Promise<PushTargetCheck>;
};

export const maxPushConfigsPerTask = 10;
const maxPushUrlLength = 2048;

// Deliveries go through the outbox (push-outbox.ts), never from the request path.
const outboxOnly = { send: async () => {} };

export class PeergateRequestHandler extends DefaultRequestHandler {
  readonly #store: PostgresTaskStore;
  readonly #buses: RecordingBusManager;
  readonly #runs: RunEngine;
  readonly #logger: Logger;
  readonly #push: PushHandling | undefined;
  readonly #events: TaskEventLog;
  readonly #usage: UsageReader | undefined;
  /**
   * The record of each event, by the object the bus carried: a cancel's loop and the stream's read
   * the same bus, and an event must be recorded once whichever loop gets to it first.
   */
  readonly #recorded = new WeakMap<object, Promise<number | undefined>>();
  /** The record of the last `task` event of each task a bus carried, until a stream takes it. */
  readonly #taskRecords = new Map<string, Promise<number | undefined>>();

  constructor(deps: PeergateRequestHandlerDeps) {
    super(
      deps.card,
      deps.store,
      deps.executor,
      deps.buses,
      deps.push?.store,
      deps.push ? outboxOnly : undefined,
      deps.extendedCard,
      undefined,
      // The bus closes whenever the executor returns: a parked run's executor returns at WORKING
      // (waiting for an operator), and the resumed run reports through the service's settleRun,
      // not this bus; an INPUT_REQUIRED task's answer comes with a new request and its own bus.
      { keepBusAliveStates: [] },
    );
    this.#store = deps.store;
    this.#buses = deps.buses;
    // Every event a request's bus carries is recorded as it is published (before the SDK's loop
    // stores it): the log a resubscribing client replays. A `task` event is streamed as the
    // store holds it, another object: it is found by its task id (`#taskRecords`).
    // The first waits until the task has a row (a new task's first save may still be on its
    // way); the rest follow in the order published.
    deps.buses.listen((taskId, context) => {
      let last: Promise<unknown> | undefined;
      return (event) => {
        const response = toStreamResponse(event, undefined);
        if (!response || !context) return;
        last ??= this.#store.whenStored(taskId);
        const recording = this.recordEvent(response, context, event.data, last);
        last = recording;
        // Only a stream takes it (and deletes it); a blocking request's would be kept forever.
        if (event.kind === "task" && isStreaming(context)) {
          this.#taskRecords.set(event.data.id, recording);
        }
      };
    });
    this.#runs = deps.runs;
    this.#logger = deps.logger;
    this.#push = deps.push;
    this.#events = deps.events;
    this.#usage = deps.usage;
  }

  /** The usage extension, when the request activated it: the run's usage in `metadata`. */
  async #usageOf(task: Task | undefined, context: ServerCallContext) {
    if (!this.#usage || !task || !isUsageActive(context)) return undefined;
    const runId = readRunId(task);
    if (!runId) return undefined;
    return this.#usage(readCaller(context), runId).catch((error) => {
      this.#logger.warn("reading a task's usage failed", { taskId: task.id, error });
      return undefined;
    });
  }

  async #withUsage<T extends Message | Task>(result: T, context: ServerCallContext): Promise<T> {
    if (!("status" in result) || !this.#usage || !isUsageActive(context)) return result;
    const usage = await this.#usageOf(result, context);
    if (!usage) return result;
    return { ...result, metadata: { ...result.metadata, [usageExtensionUri]: usage } };
  }

  /** A stream's task, and the update that ends it, carry the usage when it is activated. */
  async #streamWithUsage(
    response: StreamResponse,
    context: ServerCallContext,
  ): Promise<StreamResponse> {
    if (!this.#usage || !isUsageActive(context)) return response;
    const payload = response.payload;
    if (payload?.$case === "task") {
      return { payload: { $case: "task", value: await this.#withUsage(payload.value, context) } };
    }
    if (payload?.$case !== "statusUpdate" || !endsStream(response)) return response;
    const task = await this.#store.load(payload.value.taskId, context);
    const usage = await this.#usageOf(task, context);
    if (!usage) return response;
    return {
      payload: {
        $case: "statusUpdate",
        value: {
          ...payload.value,
          metadata: { ...payload.value.metadata, [usageExtensionUri]: usage },
        },
      },
    };
  }

  /**
   * Records a streamed event in the task event log once; resolves to its id (undefined when the
   * task has no row, or the write failed: the event then goes out without an id).
   */
  recordEvent(
    response: StreamResponse,
    context: ServerCallContext,
    key?: object,
    after?: Promise<unknown>,
  ): Promise<number | undefined> {
    const payload = response.payload;
    if (!payload || payload.$case === "message") return Promise.resolve(undefined);
    const taskId = payload.$case === "task" ? payload.value.id : payload.value.taskId;
    const once = key ?? payload.value;
    const known = this.#recorded.get(once);
    if (known) return known;
    const write = () => this.#events.record(taskId, readCallerId(context), response);
    const recording = (after ? after.then(write) : write()).catch((error) => {
      this.#logger.error("recording a task event failed", { taskId, error });
      return undefined;
    });
    this.#recorded.set(once, recording);
    return recording;
  }

  /** The checks on a push config of the module comment, after the task is known to be the caller's. */
  async #checkPushConfig(
    config: TaskPushNotificationConfig,
    taskId: string,
    context: ServerCallContext,
  ): Promise<void> {
    const push = this.#push;
    if (!push)
      throw new PushNotificationNotSupportedError("this agent does not send push notifications");
    if (config.url.length > maxPushUrlLength) {
      throw new RequestMalformedError(
        `the push notification url is longer than ${maxPushUrlLength} characters`,
      );
    }
    const target = await push.checkTarget(readCallerId(context), config.url);
    if (!target.ok) throw new RequestMalformedError(target.reason);
    if (taskId === "") return;
    const existing = await push.store.load(taskId, context);
    if (existing.length >= maxPushConfigsPerTask && !existing.some((c) => c.id === config.id)) {
      throw new RequestMalformedError(
        `a task holds at most ${maxPushConfigsPerTask} push notification configs; delete one first`,
      );
    }
  }

  override async createTaskPushNotificationConfig(
    params: TaskPushNotificationConfig,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    if (!this.#push) return super.createTaskPushNotificationConfig(params, context);
    const task = params.taskId ? await this.#store.load(params.taskId, context) : undefined;
    if (!task) throw new TaskNotFoundError(`Task not found: ${params.taskId}`);
    await this.#checkPushConfig(params, task.id, context);
    return super.createTaskPushNotificationConfig(params, context);
  }

  /** The checks of the module comment; returns the task a follow-up names. */
  async #checkSend(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): Promise<Task | undefined> {
    const message = params.message;
    checkMessageShape(message);
    checkHistoryLength(params.configuration?.historyLength);
    const callerId = readCallerId(context);
    if (!message.taskId && !message.contextId) markFreshContext(context);
    let task: Task | undefined;
    if (message.taskId) {
      task = await this.#store.load(message.taskId, context);
      if (!task) throw new TaskNotFoundError(`Task not found: ${message.taskId}`);
      const state = task.status?.state;
      if (isTerminal(task)) {
        throw new UnsupportedOperationError(
          `Task ${task.id} is in a terminal state (${describeState(state, context)}) and takes no more messages; start a new task, in the same contextId to go on with the conversation`,
        );
      }
      if (state !== TaskState.TASK_STATE_INPUT_REQUIRED) {
        throw new UnsupportedOperationError(
          `Task ${task.id} is not waiting for input (it is still working, or waits for an operator); wait for it to finish or cancel it`,
        );
      }
      // The SDK checks this too, but only after an answer has claimed its run.
      if (message.contextId && task.contextId && message.contextId !== task.contextId) {
        throw new RequestMalformedError(
          `contextId mismatch: message contextId '${message.contextId}' does not match task '${task.id}' contextId '${task.contextId}'`,
        );
      }
    }
    const references = [...new Set(message.referenceTaskIds.filter((id) => id !== ""))];
    if (references.length > 0) {
      const found = await this.#store.loadManyForCaller(callerId, references);
      const foundIds = new Set(found.map((t) => t.id));
      const missing = references.find((id) => !foundIds.has(id));
      if (missing !== undefined) throw new TaskNotFoundError(`Task not found: ${missing}`);
    }
    const pushConfig = params.configuration?.taskPushNotificationConfig;
    if (pushConfig) await this.#checkPushConfig(pushConfig, message.taskId, context);
    return task;
  }

  /**
   * Resumes the run an answer is for, when `task` waits for its caller's input: the engine's claim
   * is the compare-and-set that lets one answer through. A lost race, or a run that ended meanwhile,
   * is -32004; a caller at its concurrency limit or a database that is gone becomes an HTTP answer
   * (call-context.ts). Nothing of the task has been written yet either way.
   */
  async #claimAnswer(
    params: SendMessageRequest,
    context: ServerCallContext,
    task: Task | undefined,
  ): Promise<void> {
    const runId = waitingRunId(task);
    const message = params.message;
    if (runId === undefined || !task || !message) return;
    const events = createRunEventRelay();
    try {
      const handle = await this.#runs.answerInput(
        {
          caller: readCaller(context),
          runId,
          answer: describeParts(message.parts),
          ...(isStreaming(context) ? {} : { stream: false }),
          // The task's end, written with the run's end (as for a new task: run-executor.ts).
          atEnd: (end) => [
            endTaskStatement(
              taskEndOf(
                { taskId: task.id, contextId: task.contextId, callerId: readCallerId(context) },
                end,
              ),
            ),
          ],
        },
        events.emit,
      );
      holdClaimedAnswer(context, { taskId: task.id, handle, events, taken: false });
    } catch (error) {
      if (error instanceof ConflictError || error instanceof NotFoundError) {
        throw new UnsupportedOperationError(
          `Task ${task.id} is not waiting for input any more (${error.message}); read it with GetTask`,
        );
      }
      const escalated = toEscalated(error);
      if (escalated) escalate(context, escalated);
      throw error;
    }
  }

  /**
   * A claimed answer the SDK then refused to deliver (or a stream left before it did): its run,
   * which waits for the executor to take it, is canceled, and records why.
   */
  async #dropUndelivered(context: ServerCallContext, taskId: string): Promise<void> {
    const claim = readClaimedAnswer(context, taskId);
    if (!claim || claim.taken) return;
    claim.taken = true;
    const runId = claim.handle.runId;
    this.#logger.warn("an answer claimed its run, but the task refused it; stopping the run", {
      runId,
      taskId,
    });
    await this.#runs.cancel(runId, "the answer could not be delivered to its task").catch(() => {});
    // Canceled, it goes on only to record that; if the cancel could not be recorded, it goes on
    // rather than wait for ever.
    claim.handle.resume();
  }

  override async sendMessage(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): Promise<Message | Task> {
    const task = await this.#checkSend(params, context);
    await this.#claimAnswer(params, context, task);
    try {
      const result = await super.sendMessage(params, context);
      return isUsageActive(context) ? await this.#withUsage(result, context) : result;
    } finally {
      if (task) await this.#dropUndelivered(context, task.id);
    }
  }

  override async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const task = await this.#checkSend(params, context);
    await this.#claimAnswer(params, context, task);
    try {
      // The SDK stored each event before it yields it; it is recorded as it arrives, and goes on
      // with its id once recorded. The SDK's loop is drained apart from the recording, so its
      // saves keep their pace (the run's end finds every event before it saved: task-store.ts).
      const recording = pumpEvents(
        this.#recordAll(super.sendMessageStream(params, context), context),
      );
      for (;;) {
        const next = await recording.next();
        if (next.done) break;
        yield await this.#streamWithUsage(await next.value.stamped, context);
      }
    } finally {
      // Also when the reader left before the SDK reached the executor.
      if (task) await this.#dropUndelivered(context, task.id);
    }
  }

  async *#recordAll(
    source: AsyncIterable<StreamResponse>,
    context: ServerCallContext,
  ): AsyncGenerator<{ stamped: Promise<StreamResponse> }, void, undefined> {
    // Wrapped: an async generator would await a promise it yields, holding the SDK's loop.
    for await (const response of source) {
      yield {
        stamped: this.#recordOf(response, context).then((seq) =>
          seq === undefined ? response : withEventId(response, seq),
        ),
      };
    }
  }

  /** The record the bus made of a streamed event (a `task` one by its id), else a new one. */
  #recordOf(response: StreamResponse, context: ServerCallContext): Promise<number | undefined> {
    const payload = response.payload;
    if (payload?.$case === "task") {
      const known = this.#taskRecords.get(payload.value.id);
      this.#taskRecords.delete(payload.value.id);
      if (known) return known;
    }
    return this.recordEvent(response, context);
  }

  override async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    checkHistoryLength(params.historyLength);
    return this.#withUsage(await super.getTask(params, context), context);
  }

  override async listTasks(
    params: ListTasksRequest,
    context: ServerCallContext,
  ): Promise<ListTasksResponse> {
    checkPageSize(params.pageSize);
    checkHistoryLength(params.historyLength);
    checkStatusTimestamp(params.statusTimestampAfter);
    return super.listTasks(params, context);
  }

  /**
   * SubscribeToTask (v0.3 tasks/resubscribe), from the task event log rather than this instance's
   * bus, so it follows a run on any instance (task-events.ts). With the id of the last event the
   * client saw it replays what followed, then goes on as events are recorded: nothing twice,
   * nothing skipped. Without one, or past the replay bounds, the first event is the task as it is
   * now, carrying the id of the last event recorded.
   */
  override async *resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const taskId = params.id;
    if (!taskId) throw new RequestMalformedError("id is required");
    const callerId = readCallerId(context);
    const lastSeen = parseLastEventId(readLastEventId(context));
    if (lastSeen === "invalid") {
      throw new RequestMalformedError(
        "Last-Event-ID (or lastEventId) must be the id of an event this task streamed: a whole number",
      );
    }
    const signal = readStreamSignal(context) ?? new AbortController().signal;
    const head = await this.#events.head(callerId, taskId);
    if (!head) throw new TaskNotFoundError(`Task not found: ${taskId}`);
    if (lastSeen !== undefined && lastSeen > head.seq) {
      throw new RequestMalformedError(
        `Last-Event-ID ${lastSeen} is past the last event of task ${taskId} (${head.seq})`,
      );
    }
    const terminal = (terminalStateNames as readonly string[]).includes(head.state);
    let after: number;
    if (
      lastSeen !== undefined &&
      (await this.#events.canReplay(callerId, taskId, lastSeen, head.seq))
    ) {
      after = lastSeen;
      if (terminal && lastSeen === head.seq) {
        // The stored end may be ahead of its last events, still being recorded: wait for them
        // (up to the log's end grace, `endGraceMs`) before saying there is nothing after.
        let any = false;
        for await (const { seq, event } of this.#events.follow({
          callerId,
          taskId,
          after,
          signal,
        })) {
          any = true;
          yield this.#streamWithUsage(withEventId(event, seq), context);
        }
        if (any) return;
        throw new UnsupportedOperationError(
          `Task ${taskId} is in a terminal state and its stream has nothing after event ${lastSeen}`,
        );
      }
    } else {
      if (terminal) {
        throw new UnsupportedOperationError(
          `Task ${taskId} is in a terminal state (${head.state}) and cannot be subscribed to.`,
        );
      }
      const task = await this.#store.load(taskId, context);
      if (!task) throw new TaskNotFoundError(`Task not found: ${taskId}`);
      const now = (await this.#events.head(callerId, taskId)) ?? head;
      const snapshot = withEventId({ payload: { $case: "task", value: task } }, now.seq);
      if (lastSeen !== undefined) markSnapshot(snapshot);
      yield this.#streamWithUsage(snapshot, context);
      if (endsStream(snapshot)) return;
      after = now.seq;
    }
    for await (const { seq, event } of this.#events.follow({ callerId, taskId, after, signal })) {
      yield this.#streamWithUsage(withEventId(event, seq), context);
    }
  }

  override async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const local = params.id ? this.#buses.getByTaskId(params.id, context) : undefined;
    let before: Task | undefined;
    if (params.id && !local) {
      before = await this.#store.load(params.id, context);
      const runId = before && !isTerminal(before) ? readRunId(before) : undefined;
      if (runId) {
        const stopped = await this.#runs.cancel(runId, "canceled by the caller").catch((error) => {
          this.#logger.error("cancelling a run failed", { runId, error });
          return false;
        });
        if (!stopped)
          this.#logger.info("cancel found no running run", { runId, taskId: params.id });
      }
    }
    const task = await super.cancelTask(params, context);
    // With no bus here the SDK wrote the cancel straight to the store; a follower needs it too.
    if (!local && before && !isTerminal(before) && task.status) {
      await this.recordEvent(
        {
          payload: {
            $case: "statusUpdate",
            value: {
              taskId: task.id,
              contextId: task.contextId,
              status: task.status,
              metadata: {},
            },
          },
        },
        context,
      );
    }
    return this.#withUsage(task, context);
  }
}

/** An execution event as the stream it belongs to carries it; undefined for a message. */
export function toStreamResponse(
  event: AgentExecutionEvent,
  current: Task | undefined,
): StreamResponse | undefined {
  switch (event.kind) {
    case "task":
      return { payload: { $case: "task", value: current ?? event.data } };
    case "statusUpdate":
      return { payload: { $case: "statusUpdate", value: event.data } };
    case "artifactUpdate":
      return { payload: { $case: "artifactUpdate", value: event.data } };
    default:
      return undefined;
  }
}

/** Marks a resume that could not replay (past the bounds): the task as it is now. */
function markSnapshot(response: StreamResponse): void {
  if (response.payload?.$case !== "task") return;
  const meta = response.payload.value.metadata as Record<string, Record<string, unknown>>;
  meta.peergate = { ...meta.peergate, replay: "snapshot" };
}

/** Makes the listener of one task's bus. */
type BusListener = (
  taskId: string,
  context: ServerCallContext | undefined,
) => (event: AgentExecutionEvent) => void;

/**
 * The SDK's bus manager, which tells a listener of each bus every event it carries, in the order
 * it is published. The SDK takes a bus manager in its constructor: this is the public seam
 * through which the task event log hears a request's events (docs/dependencies.md).
 */
export class RecordingBusManager extends DefaultExecutionEventBusManager {
  #listener: BusListener | undefined;
  readonly #heard = new WeakSet<ExecutionEventBus>();

  listen(listener: BusListener): void {
    this.#listener = listener;
  }

  override createOrGetByTaskId(taskId: string, context?: ServerCallContext): ExecutionEventBus {
    const bus = super.createOrGetByTaskId(taskId, context);
    if (!this.#heard.has(bus)) {
      this.#heard.add(bus);
      const listener = this.#listener?.(taskId, context);
      if (listener) bus.on("event", listener);
    }
    return bus;
  }
}
