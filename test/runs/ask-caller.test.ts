// A run asking its caller (ask_caller): the step whose only call is ask_caller ends the segment
// `input-required` with the question, holding no instance and no slot; only the run's own caller
// may answer, and the answer resumes the same run with the ceiling now ∩ the set it started with
// and what is left of its budgets. Waiting runs expire and are cancelled like parked ones.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { callers } from "../../src/db/schema.ts";
import { type LoadedPolicies, loadPolicies } from "../../src/load-policies.ts";
import { readRunningSlots } from "../../src/runs/run-queries.ts";
import { createAskCallerTool } from "../../src/tools/context/ask-caller.ts";
import { describeEachDatabase } from "../support/databases.ts";
import {
  agentYaml,
  createFakeTools,
  insertCaller,
  readRunRow,
  readToolCalls,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
} from "./support.ts";

const question = "Which file do you mean?";
const askCall = { id: "q1", name: "ask_caller", input: { question } };

/** The fake built-ins plus the real ask_caller (the model is offered what the process implements). */
function toolsWithAsk(): ReturnType<typeof createFakeTools> {
  const fake = createFakeTools();
  const tools = new Map(fake.runtime.tools);
  tools.set("ask_caller", createAskCallerTool());
  return { runtime: { ...fake.runtime, tools }, log: fake.log };
}

let policies: LoadedPolicies;
let policiesDir: string;

beforeAll(async () => {
  // The test agent, opting in to ask_caller by name.
  policiesDir = await mkdtemp(path.join(os.tmpdir(), "peergate-ask-caller-"));
  await writeFile(
    path.join(policiesDir, "agent.yaml"),
    agentYaml.replace("tools: [files, context, web, shell]", "tools: [files, context, ask_caller]"),
  );
  policies = await loadPolicies(policiesDir);
});
afterAll(async () => {
  await rm(policiesDir, { recursive: true, force: true });
});

describeEachDatabase("runs that ask their caller", (ctx) => {
  afterEach(stopEngines);

  it("is offered only when the agent names it", async () => {
    const caller = await insertCaller(ctx.database);
    const model = scriptModel([{ text: "hi" }]);
    const { engine } = await startEngine(ctx.database, { model });
    await runToEnd(engine, caller);
    expect(model.offered(0)).not.toContain("ask_caller");

    const opted = scriptModel([{ text: "hi" }]);
    const second = await startEngine(ctx.database, {
      model: opted,
      instanceId: "instance-b",
      tools: toolsWithAsk(),
      options: { policies },
    });
    await runToEnd(second.engine, caller);
    expect(opted.offered(0)).toContain("ask_caller");
  });

  it("waits input-required holding nothing, and only its own caller's answer resumes it", async () => {
    const caller = await insertCaller(ctx.database, { budgets: { steps: 5 } });
    const stranger = await insertCaller(ctx.database);
    const model = scriptModel([{ text: "First:", calls: [askCall] }, { text: "Reading a.txt." }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      tools: toolsWithAsk(),
      options: { policies },
    });
    const { runId, outcome, events } = await runToEnd(engine, caller);

    expect(outcome).toMatchObject({ status: "input-required", text: question });
    expect(events).toContainEqual({ type: "status", status: "input-required", message: question });
    const row = await readRunRow(ctx.database, runId);
    expect(row.status).toBe("input-required");
    expect(row.ownerInstanceId).toBeNull();
    expect(row.pendingInput).toMatchObject({ callId: "q1", toolCallId: "q1", question });
    expect(row.parkedUntil?.getTime()).toBeGreaterThan(Date.now() + 23 * 3600_000);
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(0);
    expect((await readToolCalls(ctx.database, runId)).get("q1")?.status).toBe("parked");

    // Another caller's answer, or one for a run that does not exist, reads the same: not found.
    await expect(
      engine.answerInput({ caller: stranger, runId, answer: "mine now" }),
    ).rejects.toMatchObject({ code: "not-found" });
    await expect(
      engine.answerInput({ caller, runId: crypto.randomUUID(), answer: "x" }),
    ).rejects.toMatchObject({ code: "not-found" });
    expect((await readRunRow(ctx.database, runId)).status).toBe("input-required");

    const resumed = await engine.answerInput({ caller, runId, answer: "a.txt" });
    expect(resumed.runId).toBe(runId);
    // Claimed, it waits for the answering request to resume it.
    expect((await readRunRow(ctx.database, runId)).status).toBe("working");
    expect(model.calls).toHaveLength(1);
    resumed.resume();
    const end = await resumed.outcome;
    expect(end).toMatchObject({ status: "completed", text: "Reading a.txt." });
    expect(model.toolResults(1).join("\n")).toContain("a.txt");
    const done = await readRunRow(ctx.database, runId);
    expect(done.segments).toBe(2);
    expect(done.budgetUsed.steps).toBe(2);
    expect(done.pendingInput).toBeNull();
    expect((await readToolCalls(ctx.database, runId)).get("q1")?.status).toBe("completed");
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(0);

    // A run no longer waiting takes no answer.
    await expect(engine.answerInput({ caller, runId, answer: "again" })).rejects.toMatchObject({
      code: "conflict",
    });
  });

  it("resumes never wider than it started: a tool allowed while it waited stays out", async () => {
    const caller = await insertCaller(ctx.database);
    const writeCall = { id: "w1", name: "write_file", input: { path: "a.txt", content: "x" } };
    const model = scriptModel([{ calls: [askCall] }, { calls: [writeCall] }, { text: "ok" }]);
    const { engine, tools } = await startEngine(ctx.database, {
      model,
      tools: toolsWithAsk(),
      options: { policies },
    });
    const { runId } = await runToEnd(engine, caller);
    await ctx.db
      .update(callers)
      .set({ allow: ["write_file"], version: sql`${callers.version} + 1` })
      .where(eq(callers.id, caller.id));
    const [current] = await ctx.db.select().from(callers).where(eq(callers.id, caller.id));
    if (!current) throw new Error("no caller");

    const answered = await engine.answerInput({ caller: current, runId, answer: "go" });
    answered.resume();
    const end = await answered.outcome;
    expect(end.status).toBe("completed");
    expect(model.offered(1)).not.toContain("write_file");
    expect(tools.log.executed.some((e) => e.includes("write_file"))).toBe(false);
    expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("refused");
  });

  it("expires unanswered and cancels on request, closing the question's call", async () => {
    const caller = await insertCaller(ctx.database);
    const model = scriptModel([{ calls: [askCall] }, { calls: [askCall] }]);
    // The engine's clock, moved past the window by hand.
    let skewMs = 0;
    const { engine } = await startEngine(ctx.database, {
      model,
      tools: toolsWithAsk(),
      options: { policies, now: () => new Date(Date.now() + skewMs) },
    });
    const first = await runToEnd(engine, caller);
    expect(first.outcome.status).toBe("input-required");
    skewMs = 25 * 3600_000;
    await engine.sweep();
    skewMs = 0;
    const expired = await readRunRow(ctx.database, first.runId);
    expect(expired.status).toBe("expired");
    expect(expired.error?.message).toMatch(/^no answer came from the caller before /);
    expect((await readToolCalls(ctx.database, first.runId)).get("q1")?.status).toBe("not-started");
    await expect(
      engine.answerInput({ caller, runId: first.runId, answer: "late" }),
    ).rejects.toMatchObject({ code: "conflict" });

    const second = await runToEnd(engine, caller);
    expect(second.outcome.status).toBe("input-required");
    expect(await engine.cancel(second.runId, "no longer needed")).toBe(true);
    const canceled = await readRunRow(ctx.database, second.runId);
    expect(canceled.status).toBe("canceled");
    expect(canceled.pendingInput).toBeNull();
  });

  it("a claimed run that is never resumed goes on only to record its cancel", async () => {
    const caller = await insertCaller(ctx.database);
    const model = scriptModel([{ calls: [askCall] }, { text: "never said" }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      tools: toolsWithAsk(),
      options: { policies },
    });
    const { runId } = await runToEnd(engine, caller);
    const claimed = await engine.answerInput({ caller, runId, answer: "a.txt" });
    // The request that claimed it let go (its task refused the answer): it cancels the run.
    expect(await engine.cancel(runId, "the answer could not be delivered")).toBe(true);
    const end = await claimed.outcome;
    expect(end.status).toBe("canceled");
    expect(model.calls).toHaveLength(1);
    const row = await readRunRow(ctx.database, runId);
    expect(row.status).toBe("canceled");
    expect(await readRunningSlots(ctx.db, caller.id)).toBe(0);
    // A resume after the end changes nothing.
    claimed.resume();
    expect((await readRunRow(ctx.database, runId)).status).toBe("canceled");
  });
});
