// Admission under concurrency (src/runs/admission.ts): concurrent starts of one caller, on one
// instance and on two, take exactly the slots and daily runs their limits allow, every way a run
// ends gives its slot back, and concurrent runs cannot overspend the day's tokens together (each
// may pass the share it was granted by one step at most, as a single run may pass its own budget).
import { eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { callerSlots, dailyUsage, runs } from "../../src/db/schema.ts";
import { RateLimitedError } from "../../src/errors.ts";
import { readRunningSlots } from "../../src/runs/run-queries.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { insertCaller, scriptModel, startEngine, stopEngines, userMessage } from "./support.ts";

describeEachDatabase("admission under concurrency", (ctx) => {
  afterEach(stopEngines);

  it("admits exactly the daily run limit out of many concurrent starts, across instances", async () => {
    const daily = 5;
    const caller = await insertCaller(ctx.database, {
      budgets: { concurrentRuns: 1_000, daily: { runs: daily } },
    });
    const a = await startEngine(ctx.database, { model: scriptModel([]) });
    const b =
      ctx.kind === "postgres"
        ? await startEngine(await ctx.openSecondConnection(), {
            model: scriptModel([]),
            instanceId: "instance-b",
          })
        : a;
    const starts = Array.from({ length: 16 }, (_, i) =>
      (i % 2 === 0 ? a : b).engine
        .start({ caller, origin: "a2a", messages: userMessage(`hi ${i}`) })
        .then((handle) => handle.outcome)
        .catch((error: unknown) => error),
    );
    const results = await Promise.all(starts);
    const refused = results.filter((r) => r instanceof RateLimitedError);
    const done = results.filter((r) => !(r instanceof Error));
    expect(done).toHaveLength(daily);
    expect(refused).toHaveLength(16 - daily);
    for (const outcome of done) expect(outcome).toMatchObject({ status: "completed" });
    const rows = await ctx.db.select().from(runs).where(eq(runs.callerId, caller.id));
    expect(rows).toHaveLength(daily);
    const [day] = await ctx.db.select().from(dailyUsage).where(eq(dailyUsage.callerId, caller.id));
    expect(day?.runs).toBe(daily);
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(0);
  });

  it("admits exactly the concurrency limit and gives every slot back, canceled or not", async () => {
    const limit = 3;
    const caller = await insertCaller(ctx.database, { budgets: { concurrentRuns: limit } });
    const { engine } = await startEngine(ctx.database, {
      model: scriptModel(Array.from({ length: 20 }, () => ({ hang: true }))),
    });
    const starts = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        engine
          .start({ caller, origin: "a2a", messages: userMessage(`hang ${i}`) })
          .catch((error: unknown) => error),
      ),
    );
    const admitted = starts.filter((s) => !(s instanceof Error)) as { runId: string }[];
    expect(admitted).toHaveLength(limit);
    expect(starts.filter((s) => s instanceof RateLimitedError)).toHaveLength(10 - limit);
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(limit);
    for (const run of admitted) expect(await engine.cancel(run.runId, "enough")).toBe(true);
    await eventually(
      "the caller's running slots to be freed",
      async () => (await readRunningSlots(ctx.db, caller.id)) === 0,
    );
    const [slot] = await ctx.db
      .select()
      .from(callerSlots)
      .where(eq(callerSlots.callerId, caller.id));
    expect(slot?.running).toBe(0);
    // The slots are free again: the next start is admitted.
    const again = await engine.start({ caller, origin: "a2a", messages: userMessage("again") });
    await engine.cancel(again.runId, "done");
    await eventually(
      "the caller's running slots to be freed",
      async () => (await readRunningSlots(ctx.db, caller.id)) === 0,
    );
  });

  it("keeps concurrent runs within the day's tokens but one step each", async () => {
    const dailyTokens = 100;
    const perStep = 20;
    const parallel = 4;
    const caller = await insertCaller(ctx.database, {
      budgets: { concurrentRuns: parallel, daily: { tokens: dailyTokens } },
    });
    // Every step asks for a tool and uses 20 tokens: only a budget ends these runs.
    const model = scriptModel(
      Array.from({ length: 200 }, (_, n) => ({
        calls: [{ id: `t${n}`, name: "get_time", input: {} }],
        usage: { input: perStep / 2, output: perStep / 2 },
      })),
    );
    const { engine } = await startEngine(ctx.database, { model });
    const starts = await Promise.all(
      Array.from({ length: parallel }, (_, i) =>
        engine
          .start({ caller, origin: "a2a", messages: userMessage(`spend ${i}`) })
          .catch((error: unknown) => error),
      ),
    );
    // On a loaded machine a run may end before the last start is admitted; a start that finds the
    // day spent or held is refused, never admitted past it.
    const handles = starts.filter((s) => !(s instanceof Error)) as { outcome: Promise<unknown> }[];
    for (const refused of starts.filter((s) => s instanceof Error)) {
      expect(refused).toBeInstanceOf(RateLimitedError);
    }
    expect(handles.length).toBeGreaterThan(0);
    const outcomes = await Promise.all(handles.map((h) => h.outcome));
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({
        status: "failed",
        error: { code: "budget-exceeded", budget: "daily.tokens" },
      });
    }
    const [day] = await ctx.db.select().from(dailyUsage).where(eq(dailyUsage.callerId, caller.id));
    // Each run was granted at most a quarter of the day and may pass its grant by the one step
    // that crossed it: the day ends at most one step per run past its limit — not a day per run.
    expect(day?.tokens).toBeLessThanOrEqual(dailyTokens + handles.length * perStep);
    expect(day?.reservedTokens).toBe(0);
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(0);
    // The day is spent: the next start is refused.
    await expect(
      engine.start({ caller, origin: "a2a", messages: userMessage("more") }),
    ).rejects.toBeInstanceOf(RateLimitedError);
  });
});
