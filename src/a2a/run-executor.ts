// The SDK's AgentExecutor, bridged to the run engine (src/runs/types.ts). One execute() is one
// run: it asks the engine for a run, publishes the task, relays the engine's events as A2A
// updates, and publishes the end state when the run's outcome settles.
//
//   engine                          A2A
//   start() resolved                Task (submitted) then status WORKING
//   tool-call event                 status WORKING, message "tool `x`: started" (progress)
//   text-delta events               artifact "answer", appended in chunks (coalesced, ≤ 1 / flush)
//   outcome completed               the rest of the answer appended as the last chunk, status
//                                   COMPLETED with the answer as its message (so history holds
//                                   the turn)
//
// A stream carries the answer once: concatenating the answer artifact's updates gives it. The
// last chunk (`lastChunk`) is the text not sent yet (the whole answer when nothing streamed, as
// for a blocking SendMessage). Text the model streamed before a tool call was not its answer: the
// next step's first chunk replaces it (`append: false`), so the stored artifact, and a client
// honouring A2A's append semantics, hold the final answer alone.
//
// Parked → WORKING: the run waits for an operator, and the caller has nothing to send or do.
// INPUT_REQUIRED would invite a reply that cannot approve anything, and AUTH_REQUIRED reads, to a
// generic client, as "authenticate": the task is still being worked on, by someone else. The
// stream closes there (the run holds no instance); the task moves on when the operator answers
// (`settleRun` in service.ts). INPUT_REQUIRED is the model asking its caller (ask_caller): a
// message on the same task answers it and the same run resumes (`answerInput`). The answer claims
// the run before the SDK touches the task (request-handler.ts), so of answers racing for one
// task only the one that claimed the run reaches here; the others were refused with -32004. The
// claimed run goes on only from here, after the SDK added the answer to the task's history: a
// run that ended sooner would write its task's end before the SDK read the task, which would
// then refuse the answer as one for a finished task.
//
// The engine is asked for the run before the task is published. When it refuses with
// RateLimitedError (or the database is down), nothing has been stored for a new task, and the
// error is escalated through the call context so the HTTP layer answers 429 + Retry-After (503).
//
// One file over 500 lines on purpose: one execute() is one task's whole life, and the mapping of
// engine events to A2A updates above reads against it in one place.
import { randomUUID } from "node:crypto";
import {
  type Artifact,
  type Message,
  type Part,
  Role,
  type Task,
  type TaskState,
  TaskState as TaskStates,
} from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutionEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import type { RunStatus } from "../domain/run.ts";
import type { Logger } from "../log.ts";
import type { AnsweredRun, RunEnd, RunEngine, RunEvent, RunOutcome } from "../runs/types.ts";
import { escalate, isFreshContext, isStreaming, readCaller, toEscalated } from "./call-context.ts";
import { buildConversation, type PeergateMessageKind, peergateMetaKey } from "./conversation.ts";
import {
  createTaskStatement,
  endTaskStatement,
  type PostgresTaskStore,
  type TaskEnd,
} from "./task-store.ts";

export type RunExecutorDeps = {
  runs: RunEngine;
  store: PostgresTaskStore;
  logger: Logger;
  /** How long text deltas are gathered before one artifact update is published. */
  textFlushMs?: number;
  /** Earlier tasks of the same context a run sees. */
  contextTaskLimit?: number;
};

/** Where a task's run id is kept (task metadata, so cancel can reach a run on any instance). */
export function readRunId(task: Task): string | undefined {
  const meta = task.metadata?.[peergateMetaKey] as { runId?: unknown } | undefined;
  return typeof meta?.runId === "string" ? meta.runId : undefined;
}

/** The run a task waits on for its caller's answer, when it does. */
export function waitingRunId(task: Task | undefined): string | undefined {
  if (task?.status?.state !== TaskStates.TASK_STATE_INPUT_REQUIRED) return undefined;
  return readRunId(task);
}

/**
 * An answer that already claimed its run (request-handler.ts claims it before the SDK writes the
 * task): the run's handle, and its events held until the executor listens. The run goes on when
 * the executor takes it (`resume`), once the SDK has added the answer to the task's history.
 */
export type ClaimedAnswer = {
  readonly taskId: string;
  readonly handle: AnsweredRun;
  readonly events: RunEventRelay;
  /** Set once the executor took it over. */
  taken: boolean;
};

/** Events of a run that started before anyone listened: held, then handed over in order. */
export type RunEventRelay = {
  readonly emit: (event: RunEvent) => void;
  attach(listener: (event: RunEvent) => void): void;
};

export function createRunEventRelay(): RunEventRelay {
  let listener: ((event: RunEvent) => void) | undefined;
  const held: RunEvent[] = [];
  return {
    emit: (event) => (listener ? listener(event) : void held.push(event)),
    attach(next) {
      listener = next;
      for (const event of held.splice(0)) next(event);
    },
  };
}

const claimedAnswerKey = "peergate.claimedAnswer";

export function holdClaimedAnswer(context: ServerCallContext, claim: ClaimedAnswer): void {
  context.state.set(claimedAnswerKey, claim);
}

/** The answer claimed for `taskId` in this request, if any (read by the executor once). */
export function readClaimedAnswer(
  context: ServerCallContext | undefined,
  taskId: string,
): ClaimedAnswer | undefined {
  const claim = context?.state.get(claimedAnswerKey) as ClaimedAnswer | undefined;
  return claim?.taskId === taskId ? claim : undefined;
}

function textPart(text: string): Part {
  return {
    content: { $case: "text", value: text },
    mediaType: "text/plain",
    filename: "",
    metadata: undefined,
  };
}

export function agentMessage(
  ids: { taskId: string; contextId: string },
  text: string,
  kind: PeergateMessageKind,
  extra: Record<string, unknown> = {},
  messageId: string = randomUUID(),
): Message {
  return {
    messageId,
    taskId: ids.taskId,
    contextId: ids.contextId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: { [peergateMetaKey]: { kind, ...extra } },
    extensions: [],
    referenceTaskIds: [],
  };
}

export function statusEvent(
  ids: { taskId: string; contextId: string },
  state: TaskState,
  message?: Message,
  at: Date = new Date(),
): AgentExecutionEvent {
  return AgentEvent.statusUpdate({
    taskId: ids.taskId,
    contextId: ids.contextId,
    status: { state, message, timestamp: at.toISOString() },
    metadata: undefined,
  });
}

export function answerArtifact(artifactId: string, text: string): Artifact {
  return {
    artifactId,
    name: "answer",
    description: "The agent's answer",
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
  };
}

const operatorMessage = (tool: string | undefined) =>
  `Waiting for an operator to approve ${tool ? `the call to \`${tool}\`` : "a tool call"}. ` +
  "Nothing is needed from you: the task continues on its own once approved, or ends if the " +
  "operator rejects it or the approval expires. Follow it with GetTask or SubscribeToTask.";

/** The status message of a task whose run ended because its caller was revoked. */
export const revokedTaskMessage =
  "The task was stopped: an operator revoked this caller's access, so no run of it goes on.";

/**
 * Failures whose message peergate wrote for the caller (a budget, a deadline). Any other failure
 * (a model provider's error, an internal one) may carry addresses, paths or keys' names: the
 * caller sees only a reference to the run, whose record keeps the text for the operator.
 */
const callerFacingFailures: ReadonlySet<string> = new Set(["budget-exceeded", "timeout"]);

/**
 * The final event for an outcome (after the answer artifact, if any). For a recorded end
 * (`endedAt`) it is a pure function of the end: its time is the end's, its message's id the
 * run's (`endMessageId`), so the task's end written with the run's end (`taskEndOf`) and the one
 * the SDK then builds from this event are the same.
 */
export function describeOutcome(
  ids: { taskId: string; contextId: string },
  outcome: Pick<RunOutcome, "runId" | "status" | "text" | "error" | "endedAt">,
  parkedTool?: string,
): AgentExecutionEvent {
  const status: RunStatus = outcome.status;
  const reason = outcome.error?.message;
  const at = outcome.endedAt;
  const messageId = at ? endMessageId(outcome.runId) : randomUUID();
  const message = (text: string, kind: PeergateMessageKind, extra: Record<string, unknown> = {}) =>
    agentMessage(ids, text, kind, extra, messageId);
  const statusOf = (state: TaskState, said?: Message) => statusEvent(ids, state, said, at);
  switch (status) {
    case "completed":
      return statusOf(
        TaskStates.TASK_STATE_COMPLETED,
        outcome.text ? message(outcome.text, "answer") : undefined,
      );
    case "parked":
      return statusOf(
        TaskStates.TASK_STATE_WORKING,
        message(operatorMessage(parkedTool), "status", { waitingFor: "operator" }),
      );
    case "input-required":
      return statusOf(
        TaskStates.TASK_STATE_INPUT_REQUIRED,
        message(outcome.text ?? "The agent needs more input to go on.", "question", {
          waitingFor: "caller",
        }),
      );
    case "canceled":
      return statusOf(
        TaskStates.TASK_STATE_CANCELED,
        message(reason ?? "The task was canceled.", "status"),
      );
    case "rejected":
    case "expired":
      return statusOf(
        TaskStates.TASK_STATE_REJECTED,
        message(
          reason ??
            (status === "expired"
              ? "No operator approved the pending tool call in time."
              : "An operator rejected the pending tool call."),
          "status",
        ),
      );
    case "revoked":
      // The agent will not go on: REJECTED ("can't or won't proceed"), not CANCELED, which A2A
      // keeps for a cancel the client asked for. Whatever state the run was in.
      return statusOf(
        TaskStates.TASK_STATE_REJECTED,
        message(revokedTaskMessage, "status", { stoppedBecause: "caller-revoked" }),
      );
    case "interrupted":
      return statusOf(
        TaskStates.TASK_STATE_FAILED,
        message(reason ?? "The run was interrupted.", "status"),
      );
    default:
      return statusOf(
        TaskStates.TASK_STATE_FAILED,
        message(
          reason && callerFacingFailures.has(outcome.error?.code ?? "")
            ? reason
            : `The run failed (reference ${outcome.runId}).`,
          "status",
        ),
      );
  }
}

/** The id of the message that tells a run's end: one end per run. */
export function endMessageId(runId: string): string {
  return `${runId}-end`;
}

/** The task's end for a run's end, as the run engine writes it (StartRunRequest.atEnd). */
export function taskEndOf(
  ids: { taskId: string; contextId: string; callerId: string },
  end: RunEnd,
): TaskEnd {
  const event = describeOutcome(ids, end);
  if (event.kind !== "statusUpdate" || !event.data.status) {
    throw new TypeError("a run's end is told by a status update");
  }
  return {
    taskId: ids.taskId,
    callerId: ids.callerId,
    status: event.data.status,
    ...(end.status === "completed" && end.text
      ? { artifact: answerArtifact(answerArtifactId(end.runId), end.text) }
      : {}),
  };
}

/** One answer artifact per run, named after it, so a resumed run's answer replaces the partial one. */
export function answerArtifactId(runId: string): string {
  return `answer-${runId}`;
}

type ActiveRun = { runId?: string; cancelRequested: boolean };

export function createRunExecutor(deps: RunExecutorDeps): AgentExecutor {
  const flushMs = deps.textFlushMs ?? 250;
  const contextTaskLimit = deps.contextTaskLimit ?? 20;
  const active = new Map<string, ActiveRun>();
  const cancelReason = "canceled by the caller";

  async function buildMessages(requestContext: RequestContext, callerId: string) {
    const message = requestContext.userMessage;
    const [contextTasks, referenced] = await Promise.all([
      // A context the SDK has just made has no earlier tasks to read.
      isFreshContext(requestContext.context)
        ? []
        : deps.store.listContextTasks(callerId, requestContext.contextId, {
            excludeTaskId: requestContext.taskId,
            limit: contextTaskLimit,
          }),
      deps.store.loadManyForCaller(
        callerId,
        message.referenceTaskIds.filter((id) => id !== requestContext.taskId),
      ),
    ]);
    const seen = new Set(contextTasks.map((t) => t.id));
    const earlierTasks = [...referenced.filter((t) => !seen.has(t.id)), ...contextTasks];
    return buildConversation({
      earlierTasks,
      currentTask: requestContext.task,
      newMessage: message,
    });
  }

  async function execute(requestContext: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const context = requestContext.context;
    const caller = readCaller(context);
    const ids = { taskId: requestContext.taskId, contextId: requestContext.contextId };
    const log = deps.logger.child({ taskId: ids.taskId, callerId: caller.id });
    const entry: ActiveRun = { cancelRequested: false };
    const streaming = isStreaming(context);
    active.set(ids.taskId, entry);

    // Events the engine reports before the task is published wait here: the SDK wants the task
    // first.
    let published = false;
    const pending: AgentExecutionEvent[] = [];
    const publish = (event: AgentExecutionEvent) => bus.publish(event);
    const emit = (event: AgentExecutionEvent) => {
      if (published) publish(event);
      else pending.push(event);
    };

    // One artifact per run, named after it, so a resumed run's answer replaces the partial one.
    let artifactId: string | undefined;
    const answerId = () => {
      artifactId ??= answerArtifactId(entry.runId ?? randomUUID());
      return artifactId;
    };
    let fullText = "";
    let unsent = "";
    let sentChunks = 0;
    /** The text sent since the model's current step began (a tool call ends a step). */
    let stepSent = "";
    /** A tool call ended a step whose text was sent: the next text replaces it. */
    let replaceNext = false;
    let timer: NodeJS.Timeout | undefined;
    const sendChunk = (text: string, append: boolean, lastChunk: boolean, out = emit) => {
      out(
        AgentEvent.artifactUpdate({
          taskId: ids.taskId,
          contextId: ids.contextId,
          artifact: answerArtifact(answerId(), text),
          append,
          lastChunk,
          metadata: undefined,
        }),
      );
      sentChunks += 1;
    };
    /** Sends the text gathered so far; `last` marks the artifact done (possibly with no text). */
    const flushText = (last = false, out = emit) => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (unsent === "" && !(last && sentChunks > 0)) return;
      const replace = replaceNext && unsent !== "";
      sendChunk(unsent, sentChunks > 0 && !replace, last, out);
      if (replace) replaceNext = false;
      stepSent += unsent;
      unsent = "";
    };
    /** The answer's last update: what the stream has not sent of it yet. */
    const finishAnswer = (answer: string, out = emit) => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (answer === "") return flushText(true, out);
      unsent = "";
      if (answer.startsWith(stepSent)) {
        sendChunk(answer.slice(stepSent.length), sentChunks > 0 && !replaceNext, true, out);
      } else {
        sendChunk(answer, false, true, out);
      }
      replaceNext = false;
      stepSent = answer;
    };
    /** The end's events, through `out`: what is left of the answer, then the end status. */
    const endRun = (
      outcome: Pick<RunOutcome, "runId" | "status" | "text" | "error" | "endedAt">,
      out: (event: AgentExecutionEvent) => void,
    ) => {
      const finalText = outcome.status === "completed" ? (outcome.text ?? fullText) : fullText;
      // A parked run is not done: its partial answer stays open for the resumed run to finish.
      if (outcome.status === "parked" || outcome.status === "input-required") flushText(false, out);
      else if (outcome.status === "completed") finishAnswer(finalText, out);
      else flushText(true, out);
      // An input-required run's text is its question: that, not the text streamed before it, is
      // what the status message asks.
      const shown = outcome.status === "input-required" ? outcome.text : finalText || undefined;
      out(describeOutcome(ids, { ...outcome, text: shown }, parkedTool));
    };
    let parkedTool: string | undefined;
    const progressChunks = new Map<string, number>();
    // Set once the outcome is in: an engine event arriving later must not touch an ended task.
    let settled = false;
    const onEvent = (event: RunEvent) => {
      if (settled) return;
      try {
        if (event.type === "text-delta") {
          fullText += event.delta;
          unsent += event.delta;
          if (streaming) timer ??= setTimeout(flushText, flushMs);
        } else if (event.type === "tool-call") {
          // Without a stream nobody reads the text as it comes: the answer goes out whole, in one
          // update, as the run's end writes it; a step's text before a tool call is not kept.
          if (streaming) flushText();
          else unsent = "";
          // The text before a tool call was the model thinking aloud, not its answer.
          if (sentChunks > 0) replaceNext = true;
          stepSent = "";
          if (event.state === "parked") parkedTool = event.tool;
          emit(
            statusEvent(
              ids,
              TaskStates.TASK_STATE_WORKING,
              agentMessage(ids, `tool \`${event.tool}\`: ${event.state}`, "progress", {
                toolCall: { callId: event.callId, tool: event.tool, state: event.state },
              }),
            ),
          );
        } else if (event.type === "tool-progress") {
          // A sanitized tool's live output: one artifact per call, appended as it arrives.
          const sent = progressChunks.get(event.callId) ?? 0;
          emit(
            AgentEvent.artifactUpdate({
              taskId: ids.taskId,
              contextId: ids.contextId,
              artifact: {
                artifactId: `tool-progress-${event.callId}`,
                name: "tool-progress",
                description: "Live output of a tool call",
                parts: [textPart(event.text)],
                metadata: undefined,
                extensions: [],
              },
              append: sent > 0,
              lastChunk: false,
              metadata: undefined,
            }),
          );
          progressChunks.set(event.callId, sent + 1);
        }
        // `status` events add nothing: WORKING is published at start, the end comes with the
        // outcome.
      } catch (error) {
        log.error("relaying a run event failed", { error });
      }
    };

    // One instant for the task as the run's start writes it and as it is then published.
    const submittedAt = new Date().toISOString();
    const buildTask = (runId: string | undefined): Task => {
      const metadata = runId ? { [peergateMetaKey]: { runId } } : {};
      const existing = requestContext.task;
      // A follow-up resubmits its task: every run's stream starts with the task submitted.
      const status = {
        state: TaskStates.TASK_STATE_SUBMITTED,
        message: undefined,
        timestamp: submittedAt,
      };
      const task: Task = existing
        ? { ...existing, status, metadata: { ...existing.metadata, ...metadata } }
        : {
            id: ids.taskId,
            contextId: ids.contextId,
            status,
            artifacts: [],
            history: [requestContext.userMessage],
            metadata,
          };
      return task;
    };
    const publishTask = (runId: string | undefined, task = buildTask(runId)) => {
      publish(AgentEvent.task(task));
      published = true;
      for (const event of pending.splice(0)) publish(event);
    };

    try {
      let handle: Awaited<ReturnType<RunEngine["start"]>>;
      const answer = readClaimedAnswer(context, ids.taskId);
      try {
        if (answer) {
          // The caller's answer to the run's question, which already resumed the same run.
          answer.taken = true;
          handle = answer.handle;
          answer.events.attach(onEvent);
          // The SDK stored the answer in the task's history before it called this executor: the
          // run may go on, and end, from here.
          answer.handle.resume();
        } else {
          const messages = await buildMessages(requestContext, caller.id);
          handle = await deps.runs.start(
            {
              caller,
              origin: "a2a",
              messages,
              a2a: { taskId: ids.taskId, contextId: ids.contextId },
              ...(isStreaming(context) ? {} : { stream: false }),
              // A new task is written with its run, in one transaction, and its end with the
              // run's end: both as data, which the engine sends in its own transactions.
              ...(requestContext.task
                ? {}
                : {
                    atStart: (runId: string) => [createTaskStatement(buildTask(runId), caller.id)],
                    atEnd: (end: RunEnd) => [
                      endTaskStatement(taskEndOf({ ...ids, callerId: caller.id }, end)),
                    ],
                  }),
            },
            onEvent,
          );
        }
      } catch (error) {
        const escalated = toEscalated(error);
        if (escalated) {
          escalate(context, escalated);
          await rollBackFollowUp(requestContext, context, log);
          return;
        }
        log.error("the run could not start", { error });
        publishTask(undefined);
        flushText();
        bus.publish(
          statusEvent(
            ids,
            TaskStates.TASK_STATE_FAILED,
            agentMessage(
              ids,
              "The run could not start; the operator can find why in the server log.",
              "status",
            ),
          ),
        );
        return;
      }

      entry.runId = handle.runId;
      const created = requestContext.task || answer ? undefined : buildTask(handle.runId);
      if (created) deps.store.holdCreated(created, caller.id);
      publishTask(handle.runId, created);
      publish(statusEvent(ids, TaskStates.TASK_STATE_WORKING));
      if (entry.cancelRequested) void cancelRun(handle.runId, log);

      const outcome = await handle.outcome;
      settled = true;
      // Written with the run's end: the SDK's save of the same end is not written again.
      if (outcome.endWritten) deps.store.endWritten(ids.taskId, caller.id);
      endRun(outcome, emit);
    } catch (error) {
      // Never let the SDK write its own failure: its message would carry internal details.
      log.error("the A2A run bridge failed", { error });
      if (!published) publishTask(entry.runId);
      flushText();
      bus.publish(
        statusEvent(
          ids,
          TaskStates.TASK_STATE_FAILED,
          agentMessage(
            ids,
            "The run failed; the operator can find why in the server log.",
            "status",
          ),
        ),
      );
    } finally {
      settled = true;
      if (timer) clearTimeout(timer);
      active.delete(ids.taskId);
    }
  }

  /** A refused follow-up leaves the task as it was: the SDK already appended the message. */
  async function rollBackFollowUp(
    requestContext: RequestContext,
    context: RequestContext["context"],
    log: Logger,
  ): Promise<void> {
    const task = requestContext.task;
    if (!task) return;
    const messageId = requestContext.userMessage.messageId;
    try {
      await deps.store.save(
        { ...task, history: task.history.filter((m) => m.messageId !== messageId) },
        context,
      );
    } catch (error) {
      log.error("could not roll back a refused follow-up message", { error });
    }
  }

  async function cancelRun(runId: string, log: Logger): Promise<boolean> {
    try {
      return await deps.runs.cancel(runId, cancelReason);
    } catch (error) {
      log.error("cancelling a run failed", { runId, error });
      return false;
    }
  }

  async function cancelTask(taskId: string, _bus: ExecutionEventBus): Promise<void> {
    const entry = active.get(taskId);
    const log = deps.logger.child({ taskId });
    if (!entry) {
      // The run already ended here; its terminal event is on the bus or about to be.
      return;
    }
    if (entry.runId === undefined) {
      entry.cancelRequested = true;
      return;
    }
    const stopped = await cancelRun(entry.runId, log);
    if (!stopped) log.info("cancel found no running run", { runId: entry.runId });
  }

  return { execute, cancelTask };
}
