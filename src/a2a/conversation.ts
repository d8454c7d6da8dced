// A2A history → the AI SDK messages a run starts from. Text parts are passed as text. File and
// data parts are described, never opened: a file's bytes are not decoded, a URL is not fetched,
// nothing is attached (DESIGN §5: caller runs never auto-attach files). Structured data is shown
// as JSON text, bounded. Progress and status messages peergate itself wrote into the history
// (tool calls, "waiting for an operator") are left out; the agent's answers are kept.
import { type Message, type Part, Role, type Task } from "@a2a-js/sdk";
import type { ModelMessage } from "ai";

/** Metadata key on messages peergate writes; `kind` says whether a later turn should see it. */
export const peergateMetaKey = "peergate";

/** `question`: the model asked its caller (ask_caller); later turns see it like an answer. */
export type PeergateMessageKind = "answer" | "question" | "progress" | "status";

const maxDataChars = 16 * 1024;
/** Bound on the conversation handed to a run, oldest messages dropped first. */
export const maxConversationMessages = 200;

function readKind(message: Message): PeergateMessageKind | undefined {
  const meta = message.metadata?.[peergateMetaKey] as { kind?: unknown } | undefined;
  const kind = meta?.kind;
  return kind === "answer" || kind === "question" || kind === "progress" || kind === "status"
    ? kind
    : undefined;
}

function describeFile(part: Part, what: string): string {
  const name = part.filename ? ` ${JSON.stringify(part.filename.slice(0, 200))}` : "";
  const type = part.mediaType ? ` (${part.mediaType.slice(0, 100)})` : "";
  return `${what}${name}${type}`;
}

/** One part as prompt text. */
export function describePart(part: Part): string {
  const content = part.content;
  switch (content?.$case) {
    case "text":
      return content.value;
    case "raw":
      return `[${describeFile(part, "Attached file")}, ${content.value.length} bytes. Its contents were not opened and are not available to you.]`;
    case "url":
      return `[${describeFile(part, "File reference")} at ${JSON.stringify(content.value.slice(0, 2000))}. It was not fetched.]`;
    case "data": {
      let json = JSON.stringify(content.value ?? null, null, 2) ?? "null";
      if (json.length > maxDataChars) json = `${json.slice(0, maxDataChars)}\n… (truncated)`;
      const type = part.mediaType ? ` (${part.mediaType.slice(0, 100)})` : "";
      return `[Structured data${type}:\n${json}\n]`;
    }
    default:
      return "[An empty part.]";
  }
}

export function describeParts(parts: readonly Part[]): string {
  return parts.map(describePart).join("\n\n");
}

/** A message as a model message, or undefined when a later turn should not see it. */
export function convertMessage(message: Message): ModelMessage | undefined {
  if (message.role === Role.ROLE_USER) {
    return { role: "user", content: describeParts(message.parts) };
  }
  if (message.role === Role.ROLE_AGENT) {
    const kind = readKind(message);
    if (kind === "progress" || kind === "status") return undefined;
    const text = describeParts(message.parts);
    return text === "" ? undefined : { role: "assistant", content: text };
  }
  return undefined;
}

export function convertHistory(history: readonly Message[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const message of history) {
    const converted = convertMessage(message);
    if (converted) out.push(converted);
  }
  return out;
}

/**
 * The conversation a run starts from: earlier tasks (this caller's tasks of the same context and
 * the tasks the message references, oldest first), then the current task's history — which ends
 * with the new message — or, for a new task, the new message alone.
 */
export function buildConversation(input: {
  earlierTasks: readonly Task[];
  currentTask: Task | undefined;
  newMessage: Message;
}): ModelMessage[] {
  const messages: ModelMessage[] = [];
  for (const task of input.earlierTasks) messages.push(...convertHistory(task.history));
  if (input.currentTask) {
    const history = input.currentTask.history;
    const hasNew = history.some((m) => m.messageId === input.newMessage.messageId);
    messages.push(...convertHistory(hasNew ? history : [...history, input.newMessage]));
  } else {
    messages.push({ role: "user", content: describeParts(input.newMessage.parts) });
  }
  return messages.length > maxConversationMessages
    ? messages.slice(messages.length - maxConversationMessages)
    : messages;
}
