// The Postgres task store on its own: caller scoping, the terminal-state guard against late
// writers (another instance), and progress coalescing (what reaches the database, and when).
import { Role, Task, TaskState } from "@a2a-js/sdk";
import { AgentEvent, type AgentExecutionEvent, ResultManager } from "@a2a-js/sdk/server";
import { eq } from "drizzle-orm";
import { beforeEach, expect, it } from "vitest";
import { CallerUser, createCallContext } from "../../src/a2a/call-context.ts";
import {
  answerArtifact,
  answerArtifactId,
  describeOutcome,
  statusEvent,
  taskEndOf,
} from "../../src/a2a/run-executor.ts";
import {
  createTaskStatement,
  createTaskStore,
  endTaskStatement,
} from "../../src/a2a/task-store.ts";
import { a2aTasks, callers } from "../../src/db/schema.ts";
import type { RunEnd } from "../../src/runs/types.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { waitFor } from "./support.ts";

function task(id: string, state: TaskState, note = ""): Task {
  return {
    id,
    contextId: "ctx",
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [],
    metadata: note ? { note } : undefined,
  };
}

/** The task the SDK's ResultManager holds after `events` (its saves go to a store of its own). */
async function replay(results: ResultManager, events: AgentExecutionEvent[]): Promise<Task> {
  for (const event of events) await results.processEvent(event);
  const current = results.getCurrentTask();
  if (!current) throw new Error("the SDK holds no task");
  return current;
}

describeEachDatabase("A2A task store", (ctx) => {
  let alice: ReturnType<typeof createCallContext>;
  let bob: ReturnType<typeof createCallContext>;
  let aliceId: string;
  let bobId: string;

  beforeEach(async () => {
    const rows = await ctx.db
      .insert(callers)
      .values([
        { name: "alice", kind: "peer" },
        { name: "bob", kind: "peer" },
      ])
      .returning();
    aliceId = rows[0]?.id ?? "";
    bobId = rows[1]?.id ?? "";
    alice = createCallContext(new CallerUser(aliceId));
    bob = createCallContext(new CallerUser(bobId));
  });

  const stored = async (id: string) => {
    const [row] = await ctx.db.select().from(a2aTasks).where(eq(a2aTasks.id, id));
    return row?.task as { status?: { state?: string }; metadata?: { note?: string } } | undefined;
  };

  it("scopes every read to the caller; another caller cannot overwrite a task", async () => {
    const store = createTaskStore(ctx.db);
    await store.save(task("t1", TaskState.TASK_STATE_COMPLETED, "alice's"), alice);
    expect(await store.load("t1", bob)).toBeUndefined();
    expect((await store.load("t1", alice))?.metadata).toEqual({ note: "alice's" });
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "bob's"), bob);
    expect((await stored("t1"))?.metadata?.note).toBe("alice's");
    expect(
      (
        await store.list(
          { tenant: "", contextId: "", status: 0, pageToken: "", statusTimestampAfter: undefined },
          bob,
        )
      ).tasks,
    ).toEqual([]);
  });

  it("keeps a terminal state whatever a late writer on another instance sends", async () => {
    const instanceA = createTaskStore(ctx.db);
    const instanceB = createTaskStore(ctx.db);
    await instanceA.save(task("t2", TaskState.TASK_STATE_WORKING), alice);
    await instanceB.save(task("t2", TaskState.TASK_STATE_CANCELED, "canceled on B"), alice);
    // A still holds its running copy and finishes the run differently.
    await instanceA.save(task("t2", TaskState.TASK_STATE_COMPLETED, "completed on A"), alice);
    expect(await stored("t2")).toMatchObject({
      status: { state: "TASK_STATE_CANCELED" },
      metadata: { note: "canceled on B" },
    });
    await instanceA.save(task("t2", TaskState.TASK_STATE_WORKING), alice);
    expect((await stored("t2"))?.status?.state).toBe("TASK_STATE_CANCELED");
  });

  it("writes a task's first save and its end at once, and coalesces progress in between", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 40 });
    await store.save(task("t3", TaskState.TASK_STATE_SUBMITTED), alice);
    expect((await stored("t3"))?.status?.state).toBe("TASK_STATE_SUBMITTED");

    await store.save(task("t3", TaskState.TASK_STATE_WORKING, "step 1"), alice);
    await store.save(task("t3", TaskState.TASK_STATE_WORKING, "step 2"), alice);
    expect((await stored("t3"))?.status?.state).toBe("TASK_STATE_SUBMITTED");
    expect((await store.load("t3", alice))?.metadata).toEqual({ note: "step 2" });
    await waitFor(async () =>
      (await stored("t3"))?.metadata?.note === "step 2" ? true : undefined,
    );

    await store.save(task("t3", TaskState.TASK_STATE_WORKING, "step 3"), alice);
    await store.save(task("t3", TaskState.TASK_STATE_AUTH_REQUIRED, "parked"), alice);
    expect(await stored("t3")).toMatchObject({
      status: { state: "TASK_STATE_AUTH_REQUIRED" },
      metadata: { note: "parked" },
    });
    expect(store.pendingCount()).toBe(0);
  });

  const end = (runId: string, status: RunEnd["status"], text?: string): RunEnd => ({
    runId,
    status,
    ...(text ? { text } : {}),
    endedAt: new Date("2026-01-31T12:00:00.000Z"),
  });

  it("writes a task's end from its run's end; the SDK's save of that end is then not written", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 60_000 });
    const created = task("t6", TaskState.TASK_STATE_SUBMITTED);
    await ctx.db.transaction((tx) => tx.execute(createTaskStatement(created, aliceId)));
    store.holdCreated(created, aliceId);
    await store.save(created, alice);
    await store.save(task("t6", TaskState.TASK_STATE_WORKING, "progress"), alice);
    const ids = { taskId: "t6", contextId: "ctx", callerId: aliceId };
    await ctx.db.transaction((tx) =>
      tx.execute(endTaskStatement(taskEndOf(ids, end("run-6", "completed", "the answer")))),
    );
    store.endWritten("t6", aliceId);
    const written = await stored("t6");
    expect(written).toMatchObject({
      status: { state: "TASK_STATE_COMPLETED", timestamp: "2026-01-31T12:00:00.000Z" },
      artifacts: [{ artifactId: "answer-run-6" }],
    });
    // The SDK's save of its end, whatever it holds, is not written: the run's end is the task's.
    const [before] = await ctx.db.select().from(a2aTasks).where(eq(a2aTasks.id, "t6"));
    await store.save(task("t6", TaskState.TASK_STATE_COMPLETED, "what the SDK had"), alice);
    const [after] = await ctx.db.select().from(a2aTasks).where(eq(a2aTasks.id, "t6"));
    expect(after?.updatedAt).toEqual(before?.updatedAt);
    expect(await stored("t6")).toEqual(written);
    expect(store.pendingCount()).toBe(0);
  });

  it("a task's end is written once: the first end stays, another caller's task is not touched", async () => {
    const created = task("t7", TaskState.TASK_STATE_SUBMITTED);
    await ctx.db.transaction((tx) => tx.execute(createTaskStatement(created, aliceId)));
    const ids = { taskId: "t7", contextId: "ctx", callerId: aliceId };
    await ctx.db.execute(
      endTaskStatement(taskEndOf({ ...ids, callerId: bobId }, end("run-7", "failed"))),
    );
    expect((await stored("t7"))?.status?.state).toBe("TASK_STATE_SUBMITTED");
    await ctx.db.execute(endTaskStatement(taskEndOf(ids, end("run-7", "canceled"))));
    await ctx.db.execute(endTaskStatement(taskEndOf(ids, end("run-7", "completed", "late"))));
    const ended = Task.fromJSON(await stored("t7"));
    expect(ended.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(ended.history.map((m) => m.messageId)).toEqual(["run-7-end"]);
    expect(ended.artifacts).toEqual([]);
  });

  it("the end written equals the task the SDK builds from the same end's events", async () => {
    // A blocking SendMessage's task: created, WORKING, the whole answer in one artifact update,
    // then the end status. The SDK's ResultManager builds what the caller is answered; the row
    // is what every later read gets. They must be one task.
    const userMessage = {
      messageId: "m-1",
      taskId: "t8",
      contextId: "ctx",
      role: Role.ROLE_USER,
      parts: [],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const created: Task = {
      ...task("t8", TaskState.TASK_STATE_SUBMITTED),
      history: [userMessage],
      metadata: { peergate: { runId: "run-8" } },
    };
    const ids = { taskId: "t8", contextId: "ctx" };
    for (const [index, ended] of [
      end("run-8", "completed", "the answer"),
      end("run-8", "failed"),
      end("run-8", "revoked"),
    ].entries()) {
      const taskId = `t8-${index}`;
      const mine = { ...created, id: taskId, history: [{ ...userMessage, taskId }] };
      const own = { ...ids, taskId };
      await ctx.db.execute(createTaskStatement(mine, aliceId));
      await ctx.db.execute(endTaskStatement(taskEndOf({ ...own, callerId: aliceId }, ended)));
      const results = new ResultManager(createTaskStore(ctx.db), alice);
      const events: AgentExecutionEvent[] = [
        AgentEvent.task(mine),
        statusEvent(own, TaskState.TASK_STATE_WORKING),
        ...(ended.text
          ? [
              AgentEvent.artifactUpdate({
                ...own,
                artifact: answerArtifact(answerArtifactId(ended.runId), ended.text),
                append: false,
                lastChunk: true,
                metadata: undefined,
              }),
            ]
          : []),
        describeOutcome(own, ended),
      ];
      const sdk = await replay(results, events);
      expect(await stored(taskId)).toEqual(Task.toJSON(sdk));
    }
  });

  it("writes pending progress on close", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 60_000 });
    await store.save(task("t4", TaskState.TASK_STATE_SUBMITTED), alice);
    await store.save(task("t4", TaskState.TASK_STATE_WORKING, "unsaved"), alice);
    expect((await stored("t4"))?.metadata).toBeUndefined();
    await store.close();
    expect((await stored("t4"))?.metadata?.note).toBe("unsaved");
  });

  it("drops idle progress copies after writing them", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 60_000, idleEvictMs: 30 });
    await store.save(task("t5", TaskState.TASK_STATE_SUBMITTED), alice);
    await store.save(task("t5", TaskState.TASK_STATE_WORKING, "forgotten"), alice);
    await waitFor(() => (store.pendingCount() === 0 ? true : undefined));
    await waitFor(async () =>
      (await stored("t5"))?.metadata?.note === "forgotten" ? true : undefined,
    );
    await store.close();
  });

  it("counts a listing once: later pages carry the first page's total in their token", async () => {
    const store = createTaskStore(ctx.db);
    for (const id of ["p1", "p2", "p3"]) {
      await store.save(task(id, TaskState.TASK_STATE_COMPLETED), alice);
    }
    const list = (pageToken: string) =>
      store.list(
        {
          tenant: "",
          contextId: "",
          status: 0,
          pageToken,
          pageSize: 2,
          statusTimestampAfter: undefined,
        },
        alice,
      );
    const first = await list("");
    expect({ tasks: first.tasks.length, total: first.totalSize }).toEqual({ tasks: 2, total: 3 });
    // A task added meanwhile is not counted again: the total is the listing's as it began.
    await store.save(task("p4", TaskState.TASK_STATE_COMPLETED), alice);
    const second = await list(first.nextPageToken);
    expect(second.totalSize).toBe(3);
    // A token of the earlier shape (no total) still pages, and counts.
    const [updatedAt, id] = JSON.parse(
      Buffer.from(first.nextPageToken, "base64url").toString("utf8"),
    ) as [string, string, number];
    const old = Buffer.from(JSON.stringify([updatedAt, id])).toString("base64url");
    const fromOld = await list(old);
    expect(fromOld.tasks.map((t) => t.id)).toEqual(second.tasks.map((t) => t.id));
    expect(fromOld.totalSize).toBe(4);
    // A total that is not a count is no token of ours.
    for (const total of [-1, 1.5, "3", null]) {
      const forged = Buffer.from(JSON.stringify([updatedAt, id, total])).toString("base64url");
      await expect(list(forged)).rejects.toThrow(/pageToken is not a token this server issued/);
    }
  });
});
