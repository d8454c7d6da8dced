// SQL round trips of the hot path, counted at the driver (src/db/round-trips.ts) on a real
// PostgreSQL: the counter itself, pipelining in a transaction, and what one plain SendMessage
// (one model call, no tool call) costs through the real A2A service and run engine. A change that
// adds a round trip to SendMessage fails here.
import type { LanguageModelV4GenerateResult, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { selectRows } from "../../src/db/client.ts";
import { startEngine, stopEngines } from "../runs/support.ts";
import { describeEachCountedDatabase } from "../support/databases.ts";
import { sendBody, startHarness, waitFor } from "./support.ts";

/**
 * Round trips of one plain SendMessage, counted (docs/hot-path.md lists them; set
 * PEERGATE_PRINT_ROUND_TRIPS=1 to print the statements): the start 2 (BEGIN with the caller's
 * re-read and the admission; the run, its audit event and the SUBMITTED task with the COMMIT
 * behind them), the finish 2 (BEGIN with the one statement — run, slot, day, audit event — and the
 * task's end written from the run's end; COMMIT). The SDK's own save of the COMPLETED task is not
 * written again. An exact pin: more fails as a regression, fewer asks for the pin (and the docs)
 * to be lowered.
 */
const sendMessageRoundTrips = 4;

/**
 * The task event log's writes (src/a2a/task-events.ts) come on top, off the request's path: each
 * event is recorded as the SDK stores it, in order, a burst in one statement. A plain SendMessage
 * records at least four events (the task, WORKING, the answer — in one artifact update or two, as
 * its text was flushed — and COMPLETED), in at most one write each.
 */
const taskEventsRecorded = 4;

function answer(text: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text }],
    finishReason: { unified: "stop", raw: undefined },
    usage: {
      inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 2, text: 2, reasoning: undefined },
    },
    warnings: [],
  };
}

describeEachCountedDatabase("SQL round trips", (ctx) => {
  afterEach(stopEngines);

  it.runIf(ctx.kind === "postgres")("counts a statement and a transaction", async () => {
    const counter = ctx.database.roundTrips;
    if (!counter) throw new Error("no counter on a postgres database");
    const before = counter.read();
    await selectRows(ctx.db, sql`select 1`);
    await ctx.db.transaction(async (tx) => {
      await selectRows(tx, sql`select 1`);
      await selectRows(tx, sql`select 2`);
    });
    const after = counter.read();
    // 1 + (BEGIN with the first statement, the second, COMMIT)
    expect(after.roundTrips - before.roundTrips).toBe(1 + 3);
    expect(after.statements - before.statements).toBe(1 + 4);
  });

  it.runIf(ctx.kind === "postgres")(
    "a plain SendMessage costs exactly its pinned number of round trips",
    async () => {
      const counter = ctx.database.roundTrips;
      if (!counter) throw new Error("no counter on a postgres database");
      const model = new MockLanguageModelV4({ doGenerate: async () => answer("hello back") });
      const { engine } = await startEngine(ctx.database, {
        model: { model, calls: [], offered: () => [], toolResults: () => [] },
      });
      const harness = await startHarness(ctx.database, ["alice"], { runs: engine });
      try {
        const send = async (text: string) => {
          const response = await harness.rpc("alice", sendBody(text));
          const body = (await response.json()) as {
            result?: { task?: { id?: string; status?: { state?: string } } };
          };
          expect(body.result?.task?.status?.state).toBe("TASK_STATE_COMPLETED");
          return body.result?.task;
        };
        // Warm: the caller's rows exist and statements are prepared on some connections.
        await send("warm up");
        await send("warm up again");
        // Their events are recorded after their answers: let that finish first, so the send
        // measured below shares the machine with nothing of theirs.
        // (Done is the completed status recorded: how many events came before it depends on how
        // the answer's text was flushed, one artifact update or two.)
        const completedEvents = async (taskId?: string) => {
          const [row] = await selectRows<{ n: number }>(
            ctx.db,
            sql`select count(*)::int as n from a2a_task_events
                where event->'statusUpdate'->'status'->>'state' = 'TASK_STATE_COMPLETED'
                  and (${taskId ?? null}::text is null or task_id = ${taskId ?? null})`,
          );
          return row?.n ?? 0;
        };
        await waitFor(async () => ((await completedEvents()) === 2 ? true : undefined));
        const stop = counter.record();
        const answered = await send("hello");
        // The log's writes may land after the answer: wait for them, then count.
        await waitFor(async () =>
          (await completedEvents(answered?.id ?? "")) === 1 ? true : undefined,
        );
        const [recorded] = await selectRows<{ n: number }>(
          ctx.db,
          sql`select count(*)::int as n from a2a_task_events where task_id = ${answered?.id ?? ""}`,
        );
        const list = stop();
        const isLogWrite = (s: { sql: string }) => s.sql.trimStart().startsWith("with bump as");
        const isPoll = (s: { sql: string }) => s.sql.includes("from a2a_task_events");
        // The task the caller was answered is the one stored: written from the run's end, with
        // it; the SDK's own save of it is not written again.
        const [stored] = await selectRows<{ task: { status?: { state?: string } } }>(
          ctx.db,
          sql`select task from a2a_tasks where id = ${answered?.id ?? ""}`,
        );
        expect(stored?.task).toEqual(answered);
        if (process.env.PEERGATE_PRINT_ROUND_TRIPS) {
          console.log(list.map((s) => `${s.roundTrip ? "RT " : "   "}${s.sql}`).join("\n"));
        }
        const trips = list.filter((s) => s.roundTrip && !isLogWrite(s) && !isPoll(s)).length;
        const logTrips = list.filter((s) => s.roundTrip && isLogWrite(s)).length;
        expect(model.doGenerateCalls).toHaveLength(3);
        expect(model.doStreamCalls).toHaveLength(0);
        expect(trips, list.map((s) => s.sql.slice(0, 60)).join("\n")).toBe(sendMessageRoundTrips);
        expect(logTrips).toBeGreaterThanOrEqual(1);
        expect(recorded?.n).toBeGreaterThanOrEqual(taskEventsRecorded);
        expect(logTrips).toBeLessThanOrEqual(recorded?.n ?? 0);
      } finally {
        await harness.close();
      }
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "a streamed SendMessage costs the same, plus one write per progress flush it outlasts",
    async () => {
      const counter = ctx.database.roundTrips;
      if (!counter) throw new Error("no counter on a postgres database");
      const chunks = ["one ", "two ", "three"];
      const parts: LanguageModelV4StreamPart[] = [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        ...chunks.map(
          (delta): LanguageModelV4StreamPart => ({ type: "text-delta", id: "t", delta }),
        ),
        { type: "text-end", id: "t" },
        {
          type: "finish",
          finishReason: { unified: "stop", raw: undefined },
          usage: answer("").usage,
        },
      ];
      const model = new MockLanguageModelV4({
        doStream: async () => ({ stream: simulateReadableStream({ chunks: parts }) }),
      });
      const { engine } = await startEngine(ctx.database, {
        model: { model, calls: [], offered: () => [], toolResults: () => [] },
      });
      const harness = await startHarness(ctx.database, ["alice"], { runs: engine });
      try {
        const stream = async (text: string) => {
          const response = await harness.rpc(
            "alice",
            { ...sendBody(text), method: "SendStreamingMessage" },
            { Accept: "text/event-stream" },
          );
          const body = await response.text();
          expect(body).toContain("TASK_STATE_COMPLETED");
          const first = /"id":"([^"]+)","contextId"/.exec(body);
          return first?.[1] ?? "";
        };
        await stream("warm up");
        await stream("warm up again");
        const stop = counter.record();
        const taskId = await stream("hello");
        const list = stop();
        if (process.env.PEERGATE_PRINT_ROUND_TRIPS) {
          console.log(list.map((s) => `${s.roundTrip ? "RT " : "   "}${s.sql}`).join("\n"));
        }
        const isLogWrite = (s: { sql: string }) => s.sql.trimStart().startsWith("with bump as");
        const isPoll = (s: { sql: string }) => s.sql.includes("from a2a_task_events");
        // A running task's progress, written when the stream outlasts the store's flush.
        const isProgress = (s: { sql: string }) =>
          s.sql.trimStart().startsWith('with written as (insert into "a2a_tasks"');
        const trips = list.filter((s) => s.roundTrip && !isLogWrite(s) && !isPoll(s));
        const progress = trips.filter(isProgress).length;
        expect(trips.length - progress, trips.map((s) => s.sql.slice(0, 60)).join("\n")).toBe(
          sendMessageRoundTrips,
        );
        // The stored answer is the whole answer, in one part, whatever the chunks.
        const [stored] = await selectRows<{
          task: { artifacts?: { parts?: { text?: string }[] }[] };
        }>(ctx.db, sql`select task from a2a_tasks where id = ${taskId}`);
        expect(stored?.task.artifacts?.[0]?.parts?.map((p) => p.text)).toEqual([chunks.join("")]);
      } finally {
        await harness.close();
      }
    },
  );
});
