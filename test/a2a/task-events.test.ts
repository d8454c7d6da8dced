// The task event log's follower at a task's end. The run's end writes the stored task in its own
// transaction; the last events (the answer, COMPLETED) are recorded after it, through the bus, a
// round trip or more later and seconds later on a loaded machine. A follower that sees the stored
// end with nothing new must wait for them, not end the stream after one poll (seen: a resumed
// stream ended without its COMPLETED); and a task ended by a path that records nothing must not
// hold it open for good.
import { StreamResponse, TaskState } from "@a2a-js/sdk";
import { eq, sql } from "drizzle-orm";
import { beforeEach, expect, it } from "vitest";
import { createTaskEventLog, type LoggedEvent } from "../../src/a2a/task-events.ts";
import type { Db } from "../../src/db/client.ts";
import { a2aTasks, callers } from "../../src/db/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { describeEachDatabase } from "../support/databases.ts";

const status = (state: TaskState): StreamResponse => ({
  payload: {
    $case: "statusUpdate",
    value: {
      taskId: "t",
      contextId: "c",
      status: { state, message: undefined, timestamp: new Date().toISOString() },
      metadata: {},
    },
  },
});

/** `db` with a count of the reads made through it (a follower's polls read twice each). */
function countingReads(db: Db): { db: Db; reads: () => number } {
  let reads = 0;
  const counted = new Proxy(db, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (key === "select" && typeof value === "function") {
        return (...args: unknown[]) => {
          reads += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db: counted, reads: () => reads };
}

async function collect(follower: AsyncGenerator<LoggedEvent>): Promise<LoggedEvent[]> {
  const seen: LoggedEvent[] = [];
  for await (const event of follower) seen.push(event);
  return seen;
}

describeEachDatabase("following a task to its end", (ctx) => {
  let callerId = "";
  beforeEach(async () => {
    const [row] = await ctx.db.insert(callers).values({ name: "c", kind: "peer" }).returning();
    callerId = row?.id ?? "";
    await ctx.db.insert(a2aTasks).values({
      id: "t",
      callerId,
      contextId: "c",
      task: { status: { state: "TASK_STATE_WORKING" } },
    });
  });

  /**
   * A log on `db` (polling every 5 ms) whose task has recorded event 1 (WORKING) and then had its
   * stored end written with nothing more recorded: where a run's end leaves a follower.
   */
  async function withStoredEnd(
    db: Db,
    endGraceMs: number,
    work: (log: ReturnType<typeof createTaskEventLog>) => Promise<void>,
  ): Promise<void> {
    const log = createTaskEventLog({
      db,
      logger: silentLogger,
      codec: StreamResponse,
      pollMs: 5,
      endGraceMs,
    });
    try {
      expect(await log.record("t", callerId, status(TaskState.TASK_STATE_WORKING))).toBe(1);
      await ctx.db
        .update(a2aTasks)
        .set({ task: sql`'{"status":{"state":"TASK_STATE_COMPLETED"}}'::jsonb` })
        .where(eq(a2aTasks.id, "t"));
      await work(log);
    } finally {
      await log.close();
    }
  }

  const followFrom = (log: ReturnType<typeof createTaskEventLog>, after: number) =>
    collect(log.follow({ callerId, taskId: "t", after, signal: new AbortController().signal }));

  it("waits for the last events of a task whose stored end came first, however many polls later", async () => {
    const counting = countingReads(ctx.db);
    await withStoredEnd(counting.db, 600_000, async (log) => {
      const seen = followFrom(log, 0);
      // Many polls see the stored end and nothing after event 1 (one poll ended it before).
      const start = counting.reads();
      while (counting.reads() < start + 20) await new Promise((r) => setTimeout(r, 5));
      await log.record("t", callerId, status(TaskState.TASK_STATE_COMPLETED));
      const events = await seen;
      expect(events.map((e) => e.seq)).toEqual([1, 2]);
      expect(events.at(-1)?.event.payload).toMatchObject({
        $case: "statusUpdate",
        value: { status: { state: TaskState.TASK_STATE_COMPLETED } },
      });
    });
  });

  it("ends the stream of a task ended with nothing recorded, once the grace has passed", async () => {
    await withStoredEnd(ctx.db, 50, async (log) => {
      expect(await followFrom(log, 1)).toEqual([]);
    });
  });
});
