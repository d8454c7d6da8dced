// Stopping runs (DESIGN §5-6): cancel, revocation, shutdown and a dead instance. Each aborts the
// model call and every tool in flight, and records per call: completed, interrupted or not started.
import { and, eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { auditEvents, callers, runs, toolCalls } from "../../src/db/schema.ts";
import { recoverOrphanedRuns } from "../../src/runs/run-state.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  createFakeTools,
  insertCaller,
  readRunRow,
  readToolCalls,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
  userMessage,
} from "./support.ts";

const slowBatch = {
  calls: [
    { id: "fast", name: "get_time", input: {} },
    { id: "slow", name: "ls", input: {} },
  ],
};

describeEachDatabase("stopping runs", (ctx) => {
  afterEach(stopEngines);

  /** A working run of `owner` with a fresh heartbeat. */
  async function insertBeatingRun(callerId: string, owner: string) {
    const [run] = await ctx.db
      .insert(runs)
      .values({
        callerId,
        origin: "a2a",
        status: "working",
        approvalPolicy: "auto",
        toolSet: [],
        ownerInstanceId: owner,
        heartbeatAt: new Date(),
      })
      .returning();
    if (!run) throw new Error("no row");
    return run;
  }

  it("cancel aborts the tool in flight and records each call", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([slowBatch]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the slow tool to be running", () => tools.log.signals.has("slow"));

    expect(await engine.cancel(handle.runId, "the caller canceled")).toBe(true);
    const outcome = await handle.outcome;
    expect(outcome).toMatchObject({
      status: "canceled",
      error: { code: "canceled", message: "the caller canceled" },
    });
    expect(tools.log.signals.get("slow")?.aborted).toBe(true);
    const rows = await readToolCalls(ctx.database, handle.runId);
    expect(rows.get("fast")?.status).toBe("completed");
    expect(rows.get("slow")).toMatchObject({ status: "interrupted" });
    expect(model.calls).toHaveLength(1);
    // The model would read that the call may have done part of its work.
    const last = outcome.messages.at(-1);
    expect(JSON.stringify(last)).toContain("may have made part of its changes");
    expect(await engine.cancel(handle.runId, "again")).toBe(false);
    expect(engine.activeRunIds()).toEqual([]);
  });

  it("records calls queued behind the one interrupted as not started", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([
      {
        calls: [
          { id: "slow", name: "ls", input: {} },
          { id: "queued", name: "get_time", input: {} },
        ],
      },
    ]);
    const { engine, tools } = await startEngine(ctx.database, {
      model,
      options: { maxToolConcurrency: 1 },
    });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the slow tool to be running", () => tools.log.signals.has("slow"));
    await engine.cancel(handle.runId, "stop");
    expect((await handle.outcome).status).toBe("canceled");
    const rows = await readToolCalls(ctx.database, handle.runId);
    expect(rows.get("slow")?.status).toBe("interrupted");
    expect(rows.get("queued")?.status).toBe("not-started");
    expect(tools.log.executed).toEqual(["ls({})"]);
  });

  it("a tool past its timeout fails and the run goes on", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([
      { calls: [{ id: "slow", name: "ls", input: {} }] },
      { text: "ls timed out, sorry" },
    ]);
    const { engine, tools } = await startEngine(ctx.database, {
      model,
      options: { toolTimeoutMs: 150 },
    });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    expect(await handle.outcome).toMatchObject({
      status: "completed",
      text: "ls timed out, sorry",
    });
    expect(tools.log.signals.get("slow")?.aborted).toBe(true);
    expect(model.toolResults(1)).toEqual(["ls: ls did not finish within 150 ms and was stopped."]);
    expect((await readToolCalls(ctx.database, handle.runId)).get("slow")).toMatchObject({
      status: "failed",
      code: "timeout",
    });
  });

  it("cancel aborts the model call itself", async () => {
    const caller = await insertCaller(ctx.database);
    const model = scriptModel([{ text: "thinking…", hang: true }]);
    const { engine } = await startEngine(ctx.database, { model });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the first model call", () => model.calls.length === 1);
    await engine.cancel(handle.runId, "stop");
    expect((await handle.outcome).status).toBe("canceled");
    expect(model.calls[0]?.abortSignal?.aborted).toBe(true);
  });

  it("a revocation event stops the caller's running runs and only those", async () => {
    const revoked = await insertCaller(ctx.database, { tier: "internal" });
    const other = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([slowBatch, slowBatch]);
    const { engine, tools, events } = await startEngine(ctx.database, { model });
    const mine = await engine.start({ caller: revoked, origin: "a2a", messages: userMessage("a") });
    const theirs = await engine.start({ caller: other, origin: "a2a", messages: userMessage("b") });
    await eventually(
      "both ls calls to have run",
      () => tools.log.executed.filter((e) => e.startsWith("ls")).length === 2,
    );

    events.fire({ callerId: revoked.id, change: "updated" });
    events.fire({ callerId: revoked.id, change: "revoked" });
    expect(await mine.outcome).toMatchObject({
      status: "revoked",
      error: { code: "caller-revoked" },
    });
    expect(engine.activeRunIds()).toEqual([theirs.runId]);
    await engine.cancel(theirs.runId, "cleanup");
    expect((await theirs.outcome).status).toBe("canceled");
  });

  it("a revocation whose notification never arrives still stops the run before its next tools", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    // The first step's tool revokes the caller behind the engine's back: no caller event fires.
    const tools = createFakeTools({
      get_time: async () => {
        await ctx.db
          .update(callers)
          .set({ tier: "none", revokedAt: new Date() })
          .where(eq(callers.id, caller.id));
        return { ok: true, content: "now" };
      },
    });
    const model = scriptModel([
      { calls: [{ id: "first", name: "get_time", input: {} }] },
      { calls: [{ id: "second", name: "find", input: {} }] },
    ]);
    const { engine } = await startEngine(ctx.database, { model, tools });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({ status: "revoked", error: { code: "caller-revoked" } });
    expect(tools.log.executed).toEqual(["get_time({})"]);
    const rows = await readToolCalls(ctx.database, runId);
    expect(rows.get("first")?.status).toBe("completed");
    expect(rows.get("second")?.status).not.toBe("completed");
  });

  it("shutdown interrupts every run and waits for their records", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([slowBatch]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the slow tool to be running", () => tools.log.signals.has("slow"));
    await engine.stop();
    const row = await readRunRow(ctx.database, handle.runId);
    expect(row).toMatchObject({ status: "interrupted", error: { code: "shutdown" } });
    expect((await readToolCalls(ctx.database, handle.runId)).get("slow")?.status).toBe(
      "interrupted",
    );
    await expect(
      engine.start({ caller, origin: "a2a", messages: userMessage("late") }),
    ).rejects.toMatchObject({ code: "unavailable" });
  });

  it("recovery marks a working run of a dead instance interrupted, charging its time", async () => {
    const caller = await insertCaller(ctx.database);
    // Both from one reading of the clock: two readings a millisecond apart made the charged time
    // 301 001 ms.
    const now = Date.now();
    const long = new Date(now - 10 * 60_000);
    const lastBeat = new Date(now - 5 * 60_000);
    const [orphan] = await ctx.db
      .insert(runs)
      .values({
        callerId: caller.id,
        origin: "a2a",
        status: "working",
        approvalPolicy: "auto",
        toolSet: ["get_time"],
        segments: 1,
        ownerInstanceId: "dead-instance",
        heartbeatAt: lastBeat,
        startedAt: long,
        segmentStartedAt: long,
        budgetUsed: { tokens: 12, costUsd: 0, durationMs: 1_000, steps: 1 },
      })
      .returning();
    if (!orphan) throw new Error("no row");
    await ctx.db.insert(toolCalls).values([
      { runId: orphan.id, callId: "c1", tool: "get_time", argsDigest: "x", status: "running" },
      { runId: orphan.id, callId: "c0", tool: "get_time", argsDigest: "x", status: "completed" },
    ]);
    // A run whose owner still heartbeats is left alone.
    const alive = await insertBeatingRun(caller.id, "live-instance");

    const { engine } = await startEngine(ctx.database);
    const row = await readRunRow(ctx.database, orphan.id);
    expect(row).toMatchObject({ status: "interrupted", error: { code: "interrupted" } });
    expect(row.budgetUsed.durationMs).toBe(1_000 + 5 * 60_000);
    const calls = await readToolCalls(ctx.database, orphan.id);
    expect(calls.get("c1")?.status).toBe("interrupted");
    expect(calls.get("c0")?.status).toBe("completed");
    const events = await ctx.db
      .select()
      .from(auditEvents)
      .where(
        and(eq(auditEvents.kind, "run.interrupted"), eq(auditEvents.subject, `run:${orphan.id}`)),
      );
    expect(events).toHaveLength(1);
    expect((await readRunRow(ctx.database, alive.id)).status).toBe("working");
    expect(await engine.recoverRuns()).toBe(0);
  });

  it("a run of this instance that starts while recovery reads is not taken for an orphan", async () => {
    const caller = await insertCaller(ctx.database);
    // Owned by this instance with a fresh heartbeat: the row of a run that is starting here.
    const starting = await insertBeatingRun(caller.id, "this-instance");
    // Registered only after recovery began (the start's row committed while its query waited):
    // the first question says no, the one asked under the row's lock says yes.
    const asked: string[] = [];
    const recovered = await recoverOrphanedRuns(ctx.db, {
      instanceId: "this-instance",
      staleBefore: new Date(Date.now() - 60_000),
      isLocal: (runId) => {
        asked.push(runId);
        return asked.length > 1;
      },
      at: new Date(),
    });
    expect(recovered).toEqual([]);
    expect(asked).toEqual([starting.id, starting.id]);
    expect((await readRunRow(ctx.database, starting.id)).status).toBe("working");
  });

  it.runIf(ctx.kind === "postgres")(
    "cancel on instance B stops a run executing on instance A",
    async () => {
      const caller = await insertCaller(ctx.database, { tier: "internal" });
      const a = await startEngine(ctx.database, {
        model: scriptModel([slowBatch]),
        instanceId: "a",
      });
      const second = await ctx.openSecondConnection();
      const b = await startEngine(second, { instanceId: "b" });
      const handle = await a.engine.start({ caller, origin: "a2a", messages: userMessage("go") });
      await eventually("the slow tool to be running", () => a.tools.log.signals.has("slow"));

      expect(await b.engine.cancel(handle.runId, "from B")).toBe(true);
      expect(await handle.outcome).toMatchObject({
        status: "canceled",
        error: { message: "from B" },
      });
      expect(a.tools.log.signals.get("slow")?.aborted).toBe(true);
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "a live instance's sweep takes over the runs of one that stopped heartbeating",
    async () => {
      const caller = await insertCaller(ctx.database, { tier: "internal" });
      let clock = Date.now();
      const a = await startEngine(ctx.database, {
        model: scriptModel([slowBatch]),
        instanceId: "a",
      });
      const handle = await a.engine.start({ caller, origin: "a2a", messages: userMessage("go") });
      await eventually("the slow tool to be running", () => a.tools.log.signals.has("slow"));

      const second = await ctx.openSecondConnection();
      const b = await startEngine(second, {
        instanceId: "b",
        options: { now: () => new Date(clock) },
      });
      clock += 60_000;
      await b.engine.sweep();
      expect((await readRunRow(ctx.database, handle.runId)).status).toBe("interrupted");
      // A, when it stops, finds its run taken over and reports what B recorded.
      await a.engine.cancel(handle.runId, "late");
      expect((await handle.outcome).status).toBe("interrupted");
    },
  );
});
