// A cancel is recorded in the run's row before it is answered; the NOTIFY that carries it to the
// instance executing the run only makes it fast. Here the cancel comes from a second instance
// whose notifications are dropped: the executing instance still stops the run at its next
// between-steps check, before that step's tools run.
import { eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import type { Database } from "../../src/db/client.ts";
import { auditEvents } from "../../src/db/schema.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  createFakeTools,
  insertCaller,
  readRunRow,
  readToolCalls,
  scriptModel,
  startEngine,
  stopEngines,
  userMessage,
} from "./support.ts";

/** The database as an instance whose NOTIFYs never leave it sees it. */
function droppingNotifications(database: Database): { database: Database; dropped: string[] } {
  const dropped: string[] = [];
  return {
    database: {
      ...database,
      async notify(channel, payload) {
        dropped.push(`${channel} ${payload}`);
      },
    },
    dropped,
  };
}

describeEachDatabase("durable cancel", (ctx) => {
  afterEach(stopEngines);

  it("a cancel whose NOTIFY is lost still stops the run within one step", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tools = createFakeTools({
      get_time: async () => {
        await gate;
        return { ok: true, content: "noon" };
      },
    });
    const model = scriptModel([
      { calls: [{ id: "first", name: "get_time", input: {} }] },
      { calls: [{ id: "second", name: "find", input: {} }] },
      { text: "done" },
    ]);
    const a = await startEngine(ctx.database, { model, tools, instanceId: "instance-a" });
    const silent = droppingNotifications(ctx.database);
    const b = await startEngine(silent.database, { instanceId: "instance-b" });

    const handle = await a.engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("get_time to have run", () => tools.log.executed.includes("get_time({})"));

    // Answered true only once recorded; the notification that would tell A never goes out.
    expect(await b.engine.cancel(handle.runId, "canceled from B")).toBe(true);
    expect(silent.dropped).toHaveLength(1);
    const row = await readRunRow(ctx.database, handle.runId);
    expect(row.status).toBe("working");
    expect(row.cancelRequestedAt).not.toBeNull();
    expect(row.cancelReason).toBe("canceled from B");

    release();
    const outcome = await handle.outcome;
    expect(outcome).toMatchObject({
      status: "canceled",
      error: { code: "canceled", message: "canceled from B" },
    });
    // The first step's tool finished; the next step's model call happened, its tool never ran.
    expect(model.calls).toHaveLength(2);
    expect(tools.log.executed).toEqual(["get_time({})"]);
    const calls = await readToolCalls(ctx.database, handle.runId);
    expect(calls.get("first")?.status).toBe("completed");
    expect(calls.get("second")).toMatchObject({ status: "not-started", startedAt: null });

    const kinds = (
      await ctx.db
        .select({ kind: auditEvents.kind })
        .from(auditEvents)
        .where(eq(auditEvents.subject, `run:${handle.runId}`))
    ).map((e) => e.kind);
    expect(kinds).toContain("run.cancel-requested");
    expect(kinds.at(-1)).toBe("run.canceled");
  });

  it("a cancel for a run that is not active is not recorded and answers false", async () => {
    const caller = await insertCaller(ctx.database);
    const { engine } = await startEngine(ctx.database, {
      model: scriptModel([{ text: "quick" }]),
    });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    expect((await handle.outcome).status).toBe("completed");
    expect(await engine.cancel(handle.runId, "too late")).toBe(false);
    expect((await readRunRow(ctx.database, handle.runId)).cancelRequestedAt).toBeNull();
    expect(await engine.cancel("not-a-run", "nothing")).toBe(false);
  });

  it("a heartbeat stops a run busy in a long tool when its cancel's NOTIFY was lost", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([{ calls: [{ id: "slow", name: "ls", input: {} }] }]);
    const a = await startEngine(ctx.database, { model, instanceId: "instance-a" });
    const silent = droppingNotifications(ctx.database);
    const b = await startEngine(silent.database, { instanceId: "instance-b" });
    const handle = await a.engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the slow tool to be running", () => a.tools.log.signals.has("slow"));
    expect(await b.engine.cancel(handle.runId, "stop it")).toBe(true);
    expect(a.tools.log.signals.get("slow")?.aborted).toBe(false);
    await a.engine.sweep();
    expect(await handle.outcome).toMatchObject({ status: "canceled", error: { code: "canceled" } });
    expect((await readToolCalls(ctx.database, handle.runId)).get("slow")?.status).toBe(
      "interrupted",
    );
  });
});
