// The Postgres task store on its own: caller scoping, the terminal-state guard against late
// writers (another instance), and progress coalescing (what reaches the database, and when).
import { Task, TaskState } from "@a2a-js/sdk";
import { AgentEvent } from "@a2a-js/sdk/server";
import { eq } from "drizzle-orm";
import { beforeEach, expect, it } from "vitest";
import { CallerUser, createCallContext } from "../../src/a2a/call-context.ts";
import { createTaskStore } from "../../src/a2a/task-store.ts";
import { a2aTasks, callers } from "../../src/db/schema.ts";
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

  it("writes a run's settled task in its transaction; the SDK's same save is then not written again", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 60_000 });
    const created = task("t6", TaskState.TASK_STATE_SUBMITTED);
    await ctx.db.transaction((tx) => store.createInTransaction(tx, created, aliceId));
    store.holdCreated(created, aliceId);
    const completed = AgentEvent.statusUpdate({
      taskId: "t6",
      contextId: "ctx",
      status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: "t-end" },
      metadata: { note: "done" },
    });
    // The SDK has not saved the task event yet: no plan from a copy that is behind.
    expect(store.planSettle("t6", aliceId, [completed], 1)).toBeUndefined();
    // It saves the task (the first event), then the copy is current.
    await store.save(created, alice);
    expect(store.planSettle("t6", bobId, [completed], 1)).toBeUndefined();
    const plan = store.planSettle("t6", aliceId, [completed], 1);
    if (!plan) throw new Error("no plan from a current copy");
    await ctx.db.transaction((tx) => store.writeSettled(tx, plan));
    store.settled(plan);
    expect(await stored("t6")).toMatchObject({
      status: { state: "TASK_STATE_COMPLETED" },
      metadata: { note: "done" },
    });
    // The SDK saves exactly that task: nothing is written (the row keeps its updated_at).
    const [before] = await ctx.db.select().from(a2aTasks).where(eq(a2aTasks.id, "t6"));
    await store.save(Task.fromJSON(plan.json), alice);
    const [after] = await ctx.db.select().from(a2aTasks).where(eq(a2aTasks.id, "t6"));
    expect(after?.updatedAt).toEqual(before?.updatedAt);
    expect(store.pendingCount()).toBe(0);
  });

  it("writes the SDK's settled task when it differs from the one planned", async () => {
    const store = createTaskStore(ctx.db, { progressFlushMs: 60_000 });
    const created = task("t7", TaskState.TASK_STATE_SUBMITTED);
    store.holdCreated(created, aliceId);
    await store.save(created, alice);
    const plan = store.planSettle(
      "t7",
      aliceId,
      [
        AgentEvent.statusUpdate({
          taskId: "t7",
          contextId: "ctx",
          status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: "a" },
          metadata: undefined,
        }),
      ],
      1,
    );
    if (!plan) throw new Error("no plan");
    await ctx.db.transaction((tx) => store.writeSettled(tx, plan));
    store.settled(plan);
    await store.save(task("t7", TaskState.TASK_STATE_COMPLETED, "what the SDK had"), alice);
    expect((await stored("t7"))?.metadata?.note).toBe("what the SDK had");
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
