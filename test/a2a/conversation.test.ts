// A2A history → AI SDK messages (pure): which messages a later turn sees, and how file and data
// parts are described without being opened.
import { type Message, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import {
  buildConversation,
  describePart,
  maxConversationMessages,
} from "../../src/a2a/conversation.ts";
import { agentMessage } from "../../src/a2a/run-executor.ts";

const ids = { taskId: "t1", contextId: "c1" };

function part(content: Part["content"], extra: Partial<Part> = {}): Part {
  return { content, mediaType: "", filename: "", metadata: undefined, ...extra };
}

function user(text: string, messageId = `m-${text}`): Message {
  return {
    messageId,
    contextId: "c1",
    taskId: "t1",
    role: Role.ROLE_USER,
    parts: [part({ $case: "text", value: text })],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function task(id: string, history: Message[]): Task {
  return {
    id,
    contextId: "c1",
    status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: undefined },
    artifacts: [],
    history,
    metadata: undefined,
  };
}

describe("describePart", () => {
  it.each([
    [part({ $case: "text", value: "plain words" }), "plain words"],
    [
      part(
        { $case: "raw", value: Buffer.from("do not read me") },
        { filename: "a.txt", mediaType: "text/plain" },
      ),
      '[Attached file "a.txt" (text/plain), 14 bytes. Its contents were not opened and are not available to you.]',
    ],
    [
      part({ $case: "url", value: "file:///etc/passwd" }, { filename: "passwd" }),
      '[File reference "passwd" at "file:///etc/passwd". It was not fetched.]',
    ],
    [
      part({ $case: "data", value: { a: [1, 2] } }),
      '[Structured data:\n{\n  "a": [\n    1,\n    2\n  ]\n}\n]',
    ],
    [part(undefined), "[An empty part.]"],
  ])("describes %#", (input, expected) => {
    expect(describePart(input)).toBe(expected);
  });

  it("bounds structured data", () => {
    const text = describePart(part({ $case: "data", value: { big: "x".repeat(100_000) } }));
    expect(text.length).toBeLessThan(17_000);
    expect(text).toContain("(truncated)");
  });
});

describe("buildConversation", () => {
  it("keeps the user's messages and the agent's answers, drops progress and status notes", () => {
    const earlier = task("t0", [
      user("first question"),
      agentMessage(ids, "tool `read_file`: started", "progress"),
      agentMessage(ids, "first answer", "answer"),
    ]);
    const current = task("t1", [
      user("what now?"),
      agentMessage(ids, "Waiting for an operator", "status"),
      { ...agentMessage(ids, "a question from another agent", "answer"), metadata: undefined },
      user("follow-up"),
    ]);
    expect(
      buildConversation({
        earlierTasks: [earlier],
        currentTask: current,
        newMessage: user("follow-up"),
      }),
    ).toEqual([
      { role: "user", content: "first question" },
      { role: "assistant", content: "first answer" },
      { role: "user", content: "what now?" },
      { role: "assistant", content: "a question from another agent" },
      { role: "user", content: "follow-up" },
    ]);
  });

  it("ends with the new message when the task history does not hold it yet", () => {
    const messages = buildConversation({
      earlierTasks: [],
      currentTask: task("t1", [user("old")]),
      newMessage: user("new"),
    });
    expect(messages.at(-1)).toEqual({ role: "user", content: "new" });
  });

  it("keeps at most the newest messages, always ending with the new one", () => {
    const many = Array.from({ length: 300 }, (_, i) => user(`m${i}`, `id-${i}`));
    const messages = buildConversation({
      earlierTasks: [task("t0", many)],
      currentTask: undefined,
      newMessage: user("last"),
    });
    expect(messages).toHaveLength(maxConversationMessages);
    expect(messages.at(-1)).toEqual({ role: "user", content: "last" });
  });
});
