// The Postgres task store on its own: caller scoping, the terminal-state guard against late
// writers (another instance), and progress coalescing (what reaches the database, and when).
import { type Task, TaskState } from "@a2a-js/sdk";
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

  beforeEach(async () => {
    const rows = await ctx.db
      .insert(callers)
      .values([
        { name: "alice", kind: "peer" },
        { name: "bob", kind: "peer" },
      ])
      .returning();
    alice = createCallContext(new CallerUser(rows[0]?.id ?? ""));
    bob = createCallContext(new CallerUser(rows[1]?.id ?? ""));
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
});
