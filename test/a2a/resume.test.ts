// Resubscribe without loss (issue 25), on one instance: every streamed task event carries an SSE
// `id:`; a client whose stream is cut mid-task resubscribes with `Last-Event-ID` and receives
// every event after it exactly once — whether the task is still running (replay, then live) or
// has finished meanwhile (replay to the end). Another caller's task is "not found" with an id as
// without; a bad or future id is -32602; past the replay bound the client gets the task as it
// is now.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { readSseEvents, type SseEvent } from "../support/sse-events.ts";
import { type Harness, sendBody, startHarness, waitFor } from "./support.ts";

type Event = { id: number; result: Record<string, any> };

function parse(event: SseEvent): Event {
  const body = JSON.parse(event.data) as { result?: Record<string, any>; error?: unknown };
  if (!body.result) throw new Error(`an error event: ${event.data}`);
  return { id: Number(event.id), result: body.result };
}

const stateOf = (e: Event) =>
  (e.result.statusUpdate?.status?.state ?? e.result.task?.status?.state) as string | undefined;

/** What a client following A2A's artifact rules shows for the answer. */
function answerText(events: readonly Event[]): string {
  let text = "";
  for (const { result } of events) {
    const update = result.artifactUpdate;
    if (update) {
      const chunk = (update.artifact.parts as { text?: string }[])
        .map((p) => p.text ?? "")
        .join("");
      text = update.append ? text + chunk : chunk;
    }
  }
  return text;
}

/** Every id once, none skipped: 1..n in order. */
function expectExactlyOnce(events: readonly Event[]): void {
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
}

describeEachDatabase(
  "A2A resubscribe without loss",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice", "bob"], {
        taskEvents: { maxReplayEvents: 50 },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    /** Starts a stream and reads it until `until` holds, then cuts the connection. */
    const streamThenCut = async (text: string, until: (seen: Event[]) => boolean) => {
      const abort = new AbortController();
      const response = await h.rpc(
        "alice",
        { ...sendBody(text), method: "SendStreamingMessage" },
        { Accept: "text/event-stream" },
      );
      const seen: Event[] = [];
      const reader = readSseEvents(response);
      for await (const event of reader) {
        seen.push(parse(event));
        if (until(seen)) break;
      }
      abort.abort();
      await reader.return(undefined);
      const taskId = String(seen[0]?.result.task?.id);
      const callerId = h.callers.get("alice")?.id ?? "";
      await waitFor(() => (h.a2a.openStreamCount(callerId) === 0 ? true : undefined));
      return { taskId, seen };
    };

    const subscribe = (
      name: string,
      taskId: string,
      lastEventId: string | undefined,
      extra: Record<string, unknown> = {},
    ) =>
      h.rpc(
        name,
        { jsonrpc: "2.0", id: 2, method: "SubscribeToTask", params: { id: taskId, ...extra } },
        {
          Accept: "text/event-stream",
          ...(lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId }),
        },
      );

    const readAll = async (response: Response) => {
      const events: Event[] = [];
      for await (const event of readSseEvents(response)) events.push(parse(event));
      return events;
    };

    const halfSeen = (seen: Event[]) => answerText(seen) === "half ";

    it("every event carries an id, and a stream's ids are 1, 2, 3 …", async () => {
      const response = await h.rpc(
        "alice",
        { ...sendBody("hello there"), method: "SendStreamingMessage" },
        { Accept: "text/event-stream" },
      );
      const events = await readAll(response);
      expect(events.length).toBeGreaterThan(3);
      expectExactlyOnce(events);
      expect(stateOf(events.at(-1) as Event)).toBe("TASK_STATE_COMPLETED");
    });

    it("cut mid-task, resubscribed while it runs: replay, then live, each event once", async () => {
      const { taskId, seen } = await streamThenCut("gate resume live", halfSeen);
      const last = seen.at(-1)?.id ?? 0;
      const resumed = subscribe("alice", taskId, String(last));
      // The rest happens after the resubscribe is in place: its events come live.
      h.engine.release(taskId, "half way there");
      const rest = await readAll(await resumed);
      const all = [...seen, ...rest];
      expectExactlyOnce(all);
      expect(stateOf(all.at(-1) as Event)).toBe("TASK_STATE_COMPLETED");
      expect(answerText(all)).toBe("half way there");
    });

    it("cut mid-task, resubscribed after it finished: the rest replayed to the end", async () => {
      const { taskId, seen } = await streamThenCut("gate resume later", halfSeen);
      h.engine.release(taskId, "half way there");
      await waitFor(async () => {
        const res = await h.rpc("alice", {
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: taskId },
        });
        const body = (await res.json()) as { result?: { status?: { state?: string } } };
        return body.result?.status?.state === "TASK_STATE_COMPLETED" ? true : undefined;
      });
      const rest = await readAll(await subscribe("alice", taskId, String(seen.at(-1)?.id)));
      const all = [...seen, ...rest];
      expectExactlyOnce(all);
      expect(stateOf(all.at(-1) as Event)).toBe("TASK_STATE_COMPLETED");
      // Nothing after the last event of a finished task: the terminal-task refusal.
      const done = await subscribe("alice", taskId, String(all.at(-1)?.id));
      const [refusal] = [...(await readSseEventsJson(done))];
      expect(refusal?.error?.code).toBe(-32004);
    });

    it("a client without SSE headers sends the id as params.lastEventId", async () => {
      const { taskId, seen } = await streamThenCut("gate resume param", halfSeen);
      h.engine.release(taskId, "half way there");
      const rest = await readAll(
        await subscribe("alice", taskId, undefined, { lastEventId: seen.at(-1)?.id }),
      );
      expectExactlyOnce([...seen, ...rest]);
    });

    it("v0.3: the same ids, and tasks/resubscribe resumes from Last-Event-ID", async () => {
      const v03 = (body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${h.baseUrl}/a2a`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Accept: "text/event-stream",
            Authorization: "Bearer test-alice",
            ...headers,
          },
          body: JSON.stringify(body),
        });
      const response = await v03({
        jsonrpc: "2.0",
        id: 1,
        method: "message/stream",
        params: {
          message: {
            kind: "message",
            messageId: crypto.randomUUID(),
            role: "user",
            parts: [{ kind: "text", text: "gate resume legacy" }],
          },
        },
      });
      const seen: { id: number; result: Record<string, any> }[] = [];
      const reader = readSseEvents(response);
      for await (const event of reader) {
        seen.push(parse(event));
        if (seen.some((e) => e.result.kind === "artifact-update")) break;
      }
      await reader.return(undefined);
      const taskId = String(seen[0]?.result.id);
      expect(seen.map((e) => e.id)).toEqual(seen.map((_, i) => i + 1));
      h.engine.release(taskId, "half way there");
      const rest: Event[] = [];
      const resumed = await v03(
        { jsonrpc: "2.0", id: 2, method: "tasks/resubscribe", params: { id: taskId } },
        { "Last-Event-ID": String(seen.at(-1)?.id) },
      );
      for await (const event of readSseEvents(resumed)) rest.push(parse(event));
      const all = [...seen, ...rest];
      expectExactlyOnce(all);
      expect(all.at(-1)?.result.status?.state).toBe("completed");
    });

    describe("refusals", () => {
      it("another caller's task is not found, with an id as without", async () => {
        const { taskId } = await streamThenCut("gate resume private", (seen) => seen.length >= 1);
        try {
          for (const id of ["1", undefined]) {
            const [answer] = await readSseEventsJson(await subscribe("bob", taskId, id));
            expect(answer?.error?.code).toBe(-32001);
            expect(JSON.stringify(answer)).not.toContain("half");
          }
        } finally {
          h.engine.release(taskId);
        }
      });

      it("an id that is no number, or past the task's last event, is -32602", async () => {
        const { taskId } = await streamThenCut("gate resume bad", (seen) => seen.length >= 1);
        try {
          for (const id of ["abc", "-1", "99999"]) {
            const [answer] = await readSseEventsJson(await subscribe("alice", taskId, id));
            expect(answer?.error?.code, id).toBe(-32602);
          }
        } finally {
          h.engine.release(taskId);
        }
      });
    });

    it("past the replay bound: the task as it is now, then what follows", async () => {
      const { taskId, seen } = await streamThenCut("gate resume bound", halfSeen);
      // The bound is 50 events here; fake 60 more as if the task had streamed them.
      await ctx.database.db.execute(
        sql`update a2a_tasks set event_seq = event_seq + 60 where id = ${taskId}`,
      );
      const resumed = subscribe("alice", taskId, String(seen.at(-1)?.id));
      const first = await (async () => {
        const reader = readSseEvents(await resumed);
        const next = await reader.next();
        await reader.return(undefined);
        return next.value ? parse(next.value) : undefined;
      })();
      h.engine.release(taskId);
      expect(first?.result.task?.id).toBe(taskId);
      expect(first?.result.task?.metadata?.peergate?.replay).toBe("snapshot");
      expect(first?.id).toBeGreaterThan(60);
    });
  },
  { fresh: "suite" },
);

async function readSseEventsJson(response: Response): Promise<Record<string, any>[]> {
  const type = response.headers.get("content-type") ?? "";
  if (!type.includes("text/event-stream")) return [(await response.json()) as Record<string, any>];
  const out: Record<string, any>[] = [];
  for await (const event of readSseEvents(response)) out.push(JSON.parse(event.data));
  return out;
}
