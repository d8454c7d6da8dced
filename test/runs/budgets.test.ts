// Budgets (DESIGN §5), enforced while the run works: steps, tokens, cost (from the price table)
// and wall time stop a run cleanly as `failed` / `budget-exceeded` naming the budget; concurrent
// runs and daily totals are counted in Postgres and refused with RateLimitedError before anything
// is created.
import { eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { dailyUsage, runs } from "../../src/db/schema.ts";
import { RateLimitedError } from "../../src/errors.ts";
import { digestArgs } from "../../src/gate/args-digest.ts";
import { parsePriceTable } from "../../src/runs/prices.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  insertCaller,
  readRunRow,
  readToolCalls,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
  userMessage,
} from "./support.ts";

const timeCall = (id: string) => ({ id, name: "get_time", input: {} });

const prices = parsePriceTable(
  `models:
  "test:scripted": { inputUsdPerMillionTokens: 1000, outputUsdPerMillionTokens: 2000 }
`,
  "models.yaml",
);

describeEachDatabase("run budgets", (ctx) => {
  afterEach(stopEngines);

  it("stops at the step budget without running calls no step is left to read", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { steps: 2 } });
    const model = scriptModel([
      { calls: [timeCall("t1")] },
      { calls: [timeCall("t2")] },
      { text: "never" },
    ]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({
      status: "failed",
      error: { code: "budget-exceeded", budget: "steps" },
    });
    expect(outcome.error?.message).toMatch(/steps \(2 model steps per run\)/);
    expect(model.calls).toHaveLength(2);
    expect(tools.log.executed).toEqual(["get_time({})"]);
    const rows = await readToolCalls(ctx.database, runId);
    expect(rows.get("t1")?.status).toBe("completed");
    expect(rows.get("t2")).toMatchObject({ status: "not-started", code: "budget-exceeded" });
    // The conversation stays valid: every call has a result.
    expect(outcome.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
    ]);
  });

  it("caps each step's output at the tokens left and stops once they are spent", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { tokens: 100 } });
    const model = scriptModel([
      { calls: [timeCall("t1")], usage: { input: 50, output: 10 } },
      { calls: [timeCall("t2")], usage: { input: 60, output: 10 } },
    ]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({
      status: "failed",
      error: { code: "budget-exceeded", budget: "tokens" },
    });
    expect(model.calls[0]?.maxOutputTokens).toBe(100);
    expect(model.calls[1]?.maxOutputTokens).toBe(40);
    expect(tools.log.executed).toEqual(["get_time({})"]);
    expect((await readRunRow(ctx.database, runId)).budgetUsed).toMatchObject({
      tokens: 130,
      steps: 2,
    });
    const [daily] = await ctx.db
      .select()
      .from(dailyUsage)
      .where(eq(dailyUsage.callerId, caller.id));
    expect(daily).toMatchObject({ tokens: 130, runs: 1 });
  });

  it("stops at the cost budget, priced from the price table", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { costUsd: 0.1 } });
    const model = scriptModel([
      // $0.05 + $0.02
      { calls: [timeCall("t1")], usage: { input: 50, output: 10 } },
      { calls: [timeCall("t2")], usage: { input: 50, output: 10 } },
    ]);
    const { engine } = await startEngine(ctx.database, { model, priceTable: prices });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({ error: { code: "budget-exceeded", budget: "costUsd" } });
    // $0.03 left at $2000 per million output tokens: 15 tokens.
    expect(model.calls[1]?.maxOutputTokens).toBe(15);
    expect((await readRunRow(ctx.database, runId)).budgetUsed.costUsd).toBeCloseTo(0.14, 6);
    const [daily] = await ctx.db
      .select()
      .from(dailyUsage)
      .where(eq(dailyUsage.callerId, caller.id));
    expect(daily?.costUsd).toBeCloseTo(0.14, 6);
  });

  it("refuses a cost-budgeted run at once when the model has no price", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { daily: { costUsd: 5 } } });
    const { engine, model } = await startEngine(ctx.database);
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({ status: "failed", error: { code: "cost-unknown" } });
    expect(outcome.error?.message).toMatch(/test:scripted has no price/);
    expect(model.calls).toHaveLength(0);
    expect((await readRunRow(ctx.database, runId)).status).toBe("failed");
  });

  it("refuses to meter a token budget the model does not report", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { tokens: 1000 } });
    const model = scriptModel([{ text: "hi", noUsage: true }]);
    const { engine } = await startEngine(ctx.database, { model });
    const { outcome } = await runToEnd(engine, caller);
    expect(outcome).toMatchObject({ status: "failed", error: { code: "usage-unknown" } });
  });

  it("stops at the wall-time budget in the middle of a tool, interrupting it", async () => {
    const caller = await insertCaller(ctx.database, {
      tier: "internal",
      budgets: { durationMs: 300 },
    });
    const model = scriptModel([{ calls: [{ id: "slow", name: "ls", input: {} }] }]);
    // The deadline fires once the tool runs, whatever the machine's pace: a timer of 300 ms
    // could fire before the tool started on a loaded machine.
    const scheduled: number[] = [];
    let fire = () => {};
    const { engine, tools } = await startEngine(ctx.database, {
      model,
      options: {
        scheduleDeadline: (ms, onDeadline) => {
          scheduled.push(ms);
          fire = onDeadline;
          return () => {};
        },
      },
    });
    const running = runToEnd(engine, caller);
    await eventually("the tool to start", () => tools.log.signals.get("slow"));
    expect(scheduled).toEqual([300]);
    fire();
    const { runId, outcome } = await running;
    expect(outcome).toMatchObject({
      status: "failed",
      error: { code: "budget-exceeded", budget: "durationMs" },
    });
    expect(tools.log.signals.get("slow")?.aborted).toBe(true);
    expect((await readToolCalls(ctx.database, runId)).get("slow")).toMatchObject({
      status: "interrupted",
    });
    const row = await readRunRow(ctx.database, runId);
    expect(row.budgetUsed.durationMs).toBeGreaterThan(0);
  });

  it("gives a resumed run only what earlier segments left", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
      budgets: { tokens: 100 },
    });
    const model = scriptModel([
      {
        calls: [{ id: "w1", name: "write_file", input: { path: "a", content: "b" } }],
        usage: { input: 70, output: 10 },
      },
      { text: "done", usage: { input: 5, output: 5 } },
    ]);
    const { engine } = await startEngine(ctx.database, { model });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome.status).toBe("parked");
    const resumed = await engine.approveRun({
      runId,
      callId: "w1",
      argsDigest: digestArgs({ path: "a", content: "b", checked: true }),
    });
    expect((await resumed.outcome).status).toBe("completed");
    expect(model.calls[1]?.maxOutputTokens).toBe(20);
    expect((await readRunRow(ctx.database, runId)).budgetUsed.tokens).toBe(90);
  });

  it("refuses a run past the concurrent-run limit with Retry-After, creating nothing", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { concurrentRuns: 1 } });
    const model = scriptModel([{ hang: true }]);
    const { engine } = await startEngine(ctx.database, { model });
    const first = await engine.start({ caller, origin: "a2a", messages: userMessage("one") });
    let hookCalls = 0;
    const refused = await engine
      .start({
        caller,
        origin: "webhook",
        messages: userMessage("two"),
        atStart: () => {
          hookCalls += 1;
          return [];
        },
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect((refused as RateLimitedError).retryAfterSeconds).toBe(5);
    expect(hookCalls).toBe(0);
    const rows = await ctx.db.select().from(runs).where(eq(runs.callerId, caller.id));
    expect(rows.map((r) => r.id)).toEqual([first.runId]);

    expect(await engine.cancel(first.runId, "enough")).toBe(true);
    expect((await first.outcome).status).toBe("canceled");
    // The slot is free again.
    const again = await engine.start({ caller, origin: "a2a", messages: userMessage("three") });
    await engine.cancel(again.runId, "done");
    await again.outcome;
  });

  it("refuses a run past the daily run and token totals until the next UTC day", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { daily: { runs: 1 } } });
    const { engine } = await startEngine(ctx.database, {
      model: scriptModel([{ text: "one" }, { text: "two", usage: { input: 30, output: 0 } }]),
    });
    await runToEnd(engine, caller);
    const refused = await runToEnd(engine, caller).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RateLimitedError);
    const retry = (refused as RateLimitedError).retryAfterSeconds;
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(86_400);

    const tokenCaller = await insertCaller(ctx.database, { budgets: { daily: { tokens: 20 } } });
    expect((await runToEnd(engine, tokenCaller)).outcome.status).toBe("completed");
    await expect(runToEnd(engine, tokenCaller)).rejects.toBeInstanceOf(RateLimitedError);
  });
});
