// A task as the A2A SDK will store it once a run's last events are applied: the answer's last
// artifact update and the end status. The run executor writes that task in the transaction that
// ends the run (one statement more in it, no round trip of its own), and the task store then finds
// the SDK's own save of the same task already done (task-store.ts, `settled`).
//
// The rules are the SDK's ResultManager's (`applyArtifactUpdate`, `applyStatusUpdate`, @a2a-js/sdk
// server): an artifact update replaces, or with `append` extends, the artifact of its id, or is
// added; a status update replaces the status, merges its metadata, and adds its message to the
// history unless a message of that id is there. A prediction that differs from what the SDK then
// saves costs nothing but the write it would have saved: the store compares the two exactly and
// writes the SDK's (test/a2a/task-settle.test.ts holds the two side by side).
import type { Task } from "@a2a-js/sdk";
import type { AgentExecutionEvent } from "@a2a-js/sdk/server";

/** `task` with `events` applied as the SDK applies them; `task` is left as it was. */
export function applyEndEvents(task: Task, events: readonly AgentExecutionEvent[]): Task {
  const next = structuredClone(task);
  for (const event of events) {
    if (event.kind === "artifactUpdate") {
      const update = event.data;
      const artifact = update.artifact;
      if (!artifact || update.taskId !== next.id) continue;
      next.artifacts ??= [];
      const index = next.artifacts.findIndex((a) => a.artifactId === artifact.artifactId);
      const existing = index === -1 ? undefined : next.artifacts[index];
      if (!existing) {
        next.artifacts.push(structuredClone(artifact));
      } else if (update.append) {
        existing.parts = [...(existing.parts ?? []), ...structuredClone(artifact.parts ?? [])];
        if (artifact.description) existing.description = artifact.description;
        if (artifact.name) existing.name = artifact.name;
        if (artifact.metadata) {
          existing.metadata = { ...existing.metadata, ...structuredClone(artifact.metadata) };
        }
      } else {
        next.artifacts[index] = structuredClone(artifact);
      }
      if (update.metadata)
        next.metadata = { ...next.metadata, ...structuredClone(update.metadata) };
    } else if (event.kind === "statusUpdate") {
      const update = event.data;
      if (update.taskId !== next.id) continue;
      next.status = structuredClone(update.status);
      if (update.metadata)
        next.metadata = { ...next.metadata, ...structuredClone(update.metadata) };
      const message = update.status?.message;
      if (message && !next.history?.some((m) => m.messageId === message.messageId)) {
        next.history = [...(next.history ?? []), structuredClone(message)];
      }
    } else {
      // A task or message event ends nothing: not a run's last events.
      throw new TypeError(`not an end event: ${event.kind}`);
    }
  }
  return next;
}
