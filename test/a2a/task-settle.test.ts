// The settled task peergate writes with a run's end (src/a2a/task-settle.ts) must be exactly what
// the A2A SDK then saves itself, or the store writes again. Held side by side with the SDK's own
// ResultManager: the same task, the same last events, every shape of artifact and status update.
import { type Task, TaskState } from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutionEvent,
  ResultManager,
  ServerCallContext,
  type TaskStore,
} from "@a2a-js/sdk/server";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyEndEvents } from "../../src/a2a/task-settle.ts";

const ids = { taskId: "task-1", contextId: "context-1" };

function memoryStore(): TaskStore & { tasks: Map<string, Task> } {
  const tasks = new Map<string, Task>();
  return {
    tasks,
    load: async (id: string) => structuredClone(tasks.get(id)),
    save: async (task: Task) => {
      tasks.set(task.id, structuredClone(task));
    },
  } as unknown as TaskStore & { tasks: Map<string, Task> };
}

function submitted(): Task {
  return {
    id: ids.taskId,
    contextId: ids.contextId,
    status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: "t0" },
    artifacts: [],
    history: [
      {
        messageId: "user-1",
        taskId: ids.taskId,
        contextId: ids.contextId,
        role: 1,
        parts: [{ content: { $case: "text", value: "hello" } } as never],
        metadata: {},
        extensions: [],
        referenceTaskIds: [],
      },
    ],
    metadata: { peergate: { runId: "run-1" } },
  } as unknown as Task;
}

const textPart = (text: string) => ({ content: { $case: "text", value: text } }) as never;

const artifactUpdate = fc
  .record({
    artifactId: fc.constantFrom("answer-1", "answer-2", "tool-progress-x"),
    text: fc.string({ maxLength: 8 }),
    append: fc.boolean(),
    lastChunk: fc.boolean(),
    name: fc.option(fc.constantFrom("answer", "tool-progress"), { nil: undefined }),
    metadata: fc.option(fc.dictionary(fc.constantFrom("a", "b"), fc.string({ maxLength: 3 })), {
      nil: undefined,
    }),
  })
  .map(
    (a): AgentExecutionEvent =>
      AgentEvent.artifactUpdate({
        taskId: ids.taskId,
        contextId: ids.contextId,
        artifact: {
          artifactId: a.artifactId,
          name: a.name ?? "",
          description: "",
          parts: [textPart(a.text)],
          metadata: a.metadata,
          extensions: [],
        },
        append: a.append,
        lastChunk: a.lastChunk,
        metadata: undefined,
      }),
  );

const statusUpdate = fc
  .record({
    state: fc.constantFrom(
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_COMPLETED,
      TaskState.TASK_STATE_FAILED,
      TaskState.TASK_STATE_INPUT_REQUIRED,
    ),
    messageId: fc.option(fc.constantFrom("agent-1", "agent-2", "user-1"), { nil: undefined }),
    text: fc.string({ maxLength: 8 }),
    metadata: fc.option(fc.dictionary(fc.constantFrom("x", "y"), fc.integer()), {
      nil: undefined,
    }),
  })
  .map(
    (s): AgentExecutionEvent =>
      AgentEvent.statusUpdate({
        taskId: ids.taskId,
        contextId: ids.contextId,
        status: {
          state: s.state,
          message:
            s.messageId === undefined
              ? undefined
              : ({
                  messageId: s.messageId,
                  taskId: ids.taskId,
                  contextId: ids.contextId,
                  role: 2,
                  parts: [textPart(s.text)],
                  metadata: { peergate: { kind: "status" } },
                  extensions: [],
                  referenceTaskIds: [],
                } as never),
          timestamp: "t1",
        },
        metadata: s.metadata,
      }),
  );

/** What the SDK stores after `before` (the run so far) and then `end`; and its copy between. */
async function throughSdk(before: AgentExecutionEvent[], end: AgentExecutionEvent[]) {
  const store = memoryStore();
  const manager = new ResultManager(store, new ServerCallContext());
  for (const event of [AgentEvent.task(submitted()), ...before]) await manager.processEvent(event);
  const held = structuredClone(store.tasks.get(ids.taskId) as Task);
  for (const event of end) await manager.processEvent(event);
  return { held, saved: store.tasks.get(ids.taskId) as Task };
}

describe("the settled task", () => {
  it("is what the SDK saves for a run's answer and its COMPLETED status", async () => {
    const before = [
      AgentEvent.statusUpdate({
        ...ids,
        status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: "t1" },
        metadata: undefined,
      }),
    ];
    const end = [
      AgentEvent.artifactUpdate({
        ...ids,
        artifact: {
          artifactId: "answer-1",
          name: "answer",
          description: "The agent's answer",
          parts: [textPart("hello back")],
          metadata: undefined,
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
      AgentEvent.statusUpdate({
        ...ids,
        status: {
          state: TaskState.TASK_STATE_COMPLETED,
          message: {
            messageId: "agent-1",
            ...ids,
            role: 2,
            parts: [textPart("hello back")],
            metadata: { peergate: { kind: "answer" } },
            extensions: [],
            referenceTaskIds: [],
          } as never,
          timestamp: "t2",
        },
        metadata: undefined,
      }),
    ];
    const { held, saved } = await throughSdk(before, end);
    const planned = applyEndEvents(held, end);
    expect(planned).toEqual(saved);
    expect(saved.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(saved.artifacts.map((a) => a.artifactId)).toEqual(["answer-1"]);
    // The held copy itself is not changed by planning.
    expect(held.status?.state).toBe(TaskState.TASK_STATE_WORKING);
  });

  it("matches the SDK for any run so far and any last artifact and status updates", async () => {
    const nonTerminal = statusUpdate.filter(
      (e) =>
        e.kind === "statusUpdate" &&
        e.data.status?.state !== TaskState.TASK_STATE_COMPLETED &&
        e.data.status?.state !== TaskState.TASK_STATE_FAILED,
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(artifactUpdate, nonTerminal), { maxLength: 6 }),
        fc.array(artifactUpdate, { maxLength: 3 }),
        statusUpdate,
        async (before, endArtifacts, endStatus) => {
          const end = [...endArtifacts, endStatus];
          const { held, saved } = await throughSdk(before, end);
          expect(applyEndEvents(held, end)).toEqual(saved);
        },
      ),
      { numRuns: 300 },
    );
  });
});
