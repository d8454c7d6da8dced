// The run's admission is taken for the caller as it authenticated, pipelined with the re-read of
// the caller in the run's transaction (src/runs/admission.ts `readCallerAndAdmit`). When the
// caller changed in between, what was taken for the old version is given back and the caller as
// re-read decides: its limits, its share of the day, its revocation. Through the real engine.
import { eq, sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { callers, dailyUsage, runs } from "../../src/db/schema.ts";
import { RateLimitedError, UnauthenticatedError } from "../../src/errors.ts";
import { formatUtcDay } from "../../src/runs/budgets.ts";
import { readRunningSlots } from "../../src/runs/run-queries.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { insertCaller, scriptModel, startEngine, stopEngines, userMessage } from "./support.ts";

describeEachDatabase("admission for a caller that changed since it authenticated", (ctx) => {
  afterEach(stopEngines);

  const changeBudgets = async (callerId: string, budgets: Record<string, unknown>) => {
    await ctx.db
      .update(callers)
      .set({ budgets, version: sql`${callers.version} + 1` })
      .where(eq(callers.id, callerId));
  };

  const readDay = async (callerId: string) => {
    const [row] = await ctx.db.select().from(dailyUsage).where(eq(dailyUsage.callerId, callerId));
    return row;
  };

  it("reserves the day's share the new budgets give, not the old ones", async () => {
    const stale = await insertCaller(ctx.database, {
      budgets: { concurrentRuns: 1, daily: { tokens: 1000 } },
    });
    await changeBudgets(stale.id, { concurrentRuns: 2, daily: { tokens: 100 } });
    const { engine } = await startEngine(ctx.database, { model: scriptModel([{ hang: true }]) });
    const started = await engine.start({
      caller: stale,
      origin: "a2a",
      messages: userMessage("one"),
    });
    const [run] = await ctx.db.select().from(runs).where(eq(runs.id, started.runId));
    expect(run?.budgetLimits.dailyReserve).toMatchObject({ heldTokens: 50, tokens: 50 });
    const day = await readDay(stale.id);
    expect(day).toMatchObject({ day: formatUtcDay(new Date()), runs: 1 });
    expect(Number(day?.reservedTokens)).toBe(50);
    expect(await readRunningSlots(ctx.db, stale.id)).toBe(1);
    await engine.cancel(started.runId, "done");
    await started.outcome;
    expect(await readRunningSlots(ctx.db, stale.id)).toBe(0);
    expect(Number((await readDay(stale.id))?.reservedTokens)).toBe(0);
  });

  it("refuses by the new concurrency limit, leaving nothing taken", async () => {
    const stale = await insertCaller(ctx.database, { budgets: { concurrentRuns: 5 } });
    const { engine } = await startEngine(ctx.database, { model: scriptModel([{ hang: true }]) });
    const first = await engine.start({ caller: stale, origin: "a2a", messages: userMessage("1") });
    await changeBudgets(stale.id, { concurrentRuns: 1 });
    const refused = await engine
      .start({ caller: stale, origin: "a2a", messages: userMessage("2") })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect(await readRunningSlots(ctx.db, stale.id)).toBe(1);
    expect((await readDay(stale.id))?.runs).toBe(1);
    await engine.cancel(first.runId, "done");
    await first.outcome;
  });

  it("refuses a caller revoked since it authenticated, leaving nothing taken", async () => {
    const stale = await insertCaller(ctx.database, { budgets: { concurrentRuns: 2 } });
    await ctx.db
      .update(callers)
      .set({ revokedAt: new Date(), version: sql`${callers.version} + 1` })
      .where(eq(callers.id, stale.id));
    const { engine } = await startEngine(ctx.database, { model: scriptModel([{ text: "no" }]) });
    const refused = await engine
      .start({ caller: stale, origin: "a2a", messages: userMessage("1") })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(UnauthenticatedError);
    expect(await readRunningSlots(ctx.db, stale.id)).toBe(0);
    expect(await readDay(stale.id)).toBeUndefined();
    expect(await ctx.db.select().from(runs).where(eq(runs.callerId, stale.id))).toEqual([]);
  });
});
