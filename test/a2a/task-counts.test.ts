// ListTasks' total read from `a2a_task_counts`, which triggers on `a2a_tasks` keep (drizzle/
// 0016_task_counts.sql). Attacked the way it could drift: every path that inserts or deletes a
// task (the store's save, its upsert of a task that exists, the prune's batched delete of several
// callers' tasks, a plain SQL delete, a truncate), a write that would move a task to another
// caller, and tasks written before the migration existed. After each, the kept count equals a
// count of the rows, and ListTasks' unfiltered total equals what a filtered count would say.
import { TaskState } from "@a2a-js/sdk";
import { eq, sql } from "drizzle-orm";
import fc from "fast-check";
import { beforeEach, expect, it } from "vitest";
import { CallerUser, createCallContext } from "../../src/a2a/call-context.ts";
import { createTaskStore } from "../../src/a2a/task-store.ts";
import { type Db, selectRows } from "../../src/db/client.ts";
import { migrateDatabase } from "../../src/db/migrate.ts";
import { deletePrunableBatch } from "../../src/db/retention.ts";
import { a2aTaskCounts, callers } from "../../src/db/schema.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { migrateUpTo } from "../support/migrations.ts";

const listAll = {
  tenant: "",
  contextId: "",
  status: 0,
  pageToken: "",
  statusTimestampAfter: undefined,
};

function task(id: string, state: TaskState) {
  return {
    id,
    contextId: `context-${id}`,
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [],
    metadata: undefined,
  };
}

/** Each caller's kept count, and the count of its rows, side by side. */
async function keptAndCounted(
  db: Db,
): Promise<{ kept: Record<string, number>; rows: Record<string, number> }> {
  const kept = await db.select().from(a2aTaskCounts);
  const rows = await selectRows<{ caller_id: string; n: unknown }>(
    db,
    sql`select caller_id, count(*) as n from a2a_tasks group by caller_id`,
  );
  return {
    // A caller whose tasks all went keeps a row of 0: the same as no row.
    kept: Object.fromEntries(kept.filter((r) => r.tasks !== 0).map((r) => [r.callerId, r.tasks])),
    rows: Object.fromEntries(rows.map((r) => [r.caller_id, Number(r.n)])),
  };
}

async function expectInStep(db: Db): Promise<void> {
  const { kept, rows } = await keptAndCounted(db);
  expect(kept).toEqual(rows);
}

async function addCallers(db: Db, ...names: string[]): Promise<string[]> {
  const rows = await db
    .insert(callers)
    .values(names.map((name) => ({ name, kind: "peer" as const })))
    .returning({ id: callers.id });
  return rows.map((r) => r.id);
}

describeEachDatabase("the count of each caller's tasks", (ctx) => {
  let alice = "";
  let bob = "";
  beforeEach(async () => {
    [alice = "", bob = ""] = await addCallers(ctx.db, "alice", "bob");
  });

  it("counts a new task once, not its later saves, and ListTasks answers with it", async () => {
    const store = createTaskStore(ctx.db);
    const asAlice = createCallContext(new CallerUser(alice));
    for (const id of ["a1", "a2", "a3"])
      await store.save(task(id, TaskState.TASK_STATE_WORKING), asAlice);
    // Saved again (the upsert's update path), and once more after it ended.
    await store.save(task("a1", TaskState.TASK_STATE_COMPLETED), asAlice);
    await store.save(task("a1", TaskState.TASK_STATE_COMPLETED), asAlice);
    // Bob saving a task id alice holds: refused by the store, and no count moves.
    await store.save(
      task("a2", TaskState.TASK_STATE_WORKING),
      createCallContext(new CallerUser(bob)),
    );
    await store.flush();
    await expectInStep(ctx.db);
    expect((await keptAndCounted(ctx.db)).kept).toEqual({ [alice]: 3 });

    const unfiltered = await store.list({ ...listAll, pageSize: 2 }, asAlice);
    const filtered = await store.list(
      { ...listAll, pageSize: 2, status: TaskState.TASK_STATE_WORKING },
      asAlice,
    );
    expect({ total: unfiltered.totalSize, page: unfiltered.tasks.length }).toEqual({
      total: 3,
      page: 2,
    });
    expect(filtered.totalSize).toBe(2);
    const bobs = await store.list(listAll, createCallContext(new CallerUser(bob)));
    expect(bobs).toMatchObject({ tasks: [], totalSize: 0 });
  });

  it("follows the prune's batched delete of several callers' tasks, a plain delete and a truncate", async () => {
    const insert = (id: string, callerId: string, state: string) =>
      ctx.db.execute(sql`insert into a2a_tasks (id, caller_id, context_id, task, created_at)
        values (${id}, ${callerId}, 'c', ${JSON.stringify({ status: { state } })}::jsonb,
                now() - interval '10 days')`);
    for (let i = 0; i < 5; i++) await insert(`old-a${i}`, alice, "TASK_STATE_COMPLETED");
    for (let i = 0; i < 3; i++) await insert(`old-b${i}`, bob, "TASK_STATE_FAILED");
    await insert("live-a", alice, "TASK_STATE_WORKING");
    await expectInStep(ctx.db);

    // One statement, both callers' ended tasks: the live one stays.
    const window = { cutoff: new Date(), githubReplayWindowMs: 0 };
    expect(await deletePrunableBatch(ctx.db, "tasks", window, 6)).toBe(6);
    await expectInStep(ctx.db);
    expect(await deletePrunableBatch(ctx.db, "tasks", window, 6)).toBe(2);
    await expectInStep(ctx.db);
    expect((await keptAndCounted(ctx.db)).kept).toEqual({ [alice]: 1 });

    await ctx.db.execute(sql`delete from a2a_tasks where id = 'live-a'`);
    await expectInStep(ctx.db);
    await insert("again", bob, "TASK_STATE_WORKING");
    await ctx.db.execute(sql`truncate a2a_tasks cascade`);
    expect(await ctx.db.select().from(a2aTaskCounts)).toEqual([]);
  });

  it("refuses to move a task to another caller, which would leave both counts wrong", async () => {
    const store = createTaskStore(ctx.db);
    await store.save(
      task("t", TaskState.TASK_STATE_WORKING),
      createCallContext(new CallerUser(alice)),
    );
    await store.flush();
    await expect(
      ctx.db.execute(sql`update a2a_tasks set caller_id = ${bob} where id = 't'`),
    ).rejects.toHaveProperty(
      "cause.message",
      expect.stringContaining("a task's caller never changes"),
    );
    // Setting it to itself (as the store's upsert does) is no move.
    await ctx.db.execute(sql`update a2a_tasks set caller_id = caller_id where id = 't'`);
    await expectInStep(ctx.db);
  });

  it("stays in step through any sequence of inserts, re-saves and deletes", async () => {
    const ids = ["t0", "t1", "t2", "t3", "t4", "t5"];
    const step = fc.oneof(
      fc.record({
        op: fc.constant("save" as const),
        id: fc.constantFrom(...ids),
        who: fc.boolean(),
      }),
      fc.record({ op: fc.constant("delete" as const), some: fc.subarray(ids) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 12 }), async (steps) => {
        await ctx.db.execute(sql`delete from a2a_tasks`);
        for (const s of steps) {
          if (s.op === "save") {
            const callerId = s.who ? alice : bob;
            await ctx.db.execute(sql`insert into a2a_tasks (id, caller_id, context_id, task)
              values (${s.id}, ${callerId}, 'c', '{}'::jsonb)
              on conflict (id) do update set task = excluded.task
              where a2a_tasks.caller_id = excluded.caller_id`);
          } else if (s.some.length > 0) {
            await ctx.db.execute(
              sql`delete from a2a_tasks where id in (${sql.join(
                s.some.map((id) => sql`${id}`),
                sql`, `,
              )})`,
            );
          }
        }
        await expectInStep(ctx.db);
      }),
      { numRuns: 25 },
    );
  });
});

describeEachDatabase(
  "the task counts' migration",
  (ctx) => {
    it("counts the tasks written before it, each caller's own", async () => {
      await migrateUpTo(ctx.database, "task_counts");
      const [alice = "", bob = ""] = await addCallers(ctx.db, "alice", "bob");
      await ctx.db.execute(sql`insert into a2a_tasks (id, caller_id, context_id, task)
        select 'a' || g, ${alice}::uuid, 'c', '{}'::jsonb from generate_series(1, 7) g`);
      await ctx.db.execute(sql`insert into a2a_tasks (id, caller_id, context_id, task)
        values ('b1', ${bob}::uuid, 'c', '{}'::jsonb)`);
      await migrateDatabase(ctx.database);
      expect((await keptAndCounted(ctx.db)).kept).toEqual({ [alice]: 7, [bob]: 1 });
      await expectInStep(ctx.db);
      // And a caller without tasks has no row until its first.
      const [carol = ""] = await addCallers(ctx.db, "carol");
      expect(
        await ctx.db.select().from(a2aTaskCounts).where(eq(a2aTaskCounts.callerId, carol)),
      ).toEqual([]);
    });
  },
  { migrate: false },
);
