// Parking (DESIGN §5): under a risk policy a call above it waits for an operator, stored in
// Postgres; approving names the pending call and its argument digest (first valid answer wins) and
// resumes the run on whichever instance answered, with the recomputed ceiling ∩ its original set,
// its policy, and what is left of its budget. Rejecting feeds the reason to the model.
import { eq, sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { callers } from "../../src/db/schema.ts";
import { digestArgs } from "../../src/gate/args-digest.ts";
import { closeParkedRuns, lockParkedRunsOfCaller } from "../../src/runs/run-state.ts";
import type { SettledRun } from "../../src/services/runs/engine.ts";
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
} from "./support.ts";

const writeCall = { id: "w1", name: "write_file", input: { path: "a.txt", content: "hi" } };
const writeHalfArgs = { path: "a.txt", content: "hi", checked: true };

describeEachDatabase("parked runs", (ctx) => {
  afterEach(stopEngines);

  it("parks a two-phase call above a read-only policy, having changed nothing", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([{ text: "writing", calls: [writeCall] }]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId, outcome, events } = await runToEnd(engine, caller);

    expect(outcome.status).toBe("parked");
    // The proposal ran; the hidden half did not.
    expect(tools.log.executed).toEqual(['write_file({"path":"a.txt","content":"hi"})']);
    expect(events).toContainEqual({
      type: "tool-call",
      callId: "w1",
      tool: "write_file",
      state: "parked",
    });

    const row = await readRunRow(ctx.database, runId);
    expect(row.status).toBe("parked");
    expect(row.ownerInstanceId).toBeNull();
    expect(row.pendingApproval).toMatchObject({
      callId: "w1",
      tool: "execute_write_file",
      calledTool: "write_file",
      args: writeHalfArgs,
      argsDigest: digestArgs(writeHalfArgs),
      summary: "write_file would change things",
      previewDiff: "--- a\n+++ b\n",
    });
    expect(row.parkedUntil?.getTime()).toBeGreaterThan(Date.now() + 23 * 3600_000);
    expect((row.messages as unknown[]).length).toBe(2); // the user turn and the model's call
    expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("parked");

    const detail = await engine.getRun(runId);
    expect(detail?.pending?.args).toEqual(writeHalfArgs);
    expect(detail?.toolCalls.map((c) => [c.callId, c.status])).toEqual([["w1", "parked"]]);
    expect(await engine.getRun("not-a-run-id")).toBeUndefined();
    expect(await engine.listRuns({ callerId: "not-a-caller-id" })).toEqual([]);
    const listed = await engine.listRuns({ status: "parked" });
    expect(listed.map((r) => r.id)).toEqual([runId]);
    expect(listed[0]?.pendingApproval).not.toHaveProperty("args");
  });

  it("refuses answers naming another call or other arguments, then the first valid one wins", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([{ calls: [writeCall] }, { text: "written" }]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId } = await runToEnd(engine, caller);
    const argsDigest = digestArgs(writeHalfArgs);

    await expect(engine.approveRun({ runId, callId: "w2", argsDigest })).rejects.toMatchObject({
      code: "conflict",
    });
    await expect(
      engine.approveRun({ runId, callId: "w1", argsDigest: digestArgs({ path: "/etc/passwd" }) }),
    ).rejects.toMatchObject({ code: "conflict" });
    await expect(engine.rejectRun({ runId, callId: "w9" })).rejects.toMatchObject({
      code: "conflict",
    });
    expect((await readRunRow(ctx.database, runId)).status).toBe("parked");

    const answers = await Promise.allSettled([
      engine.approveRun({ runId, callId: "w1", argsDigest }),
      engine.approveRun({ runId, callId: "w1", argsDigest }),
    ]);
    const won = answers.filter((a) => a.status === "fulfilled");
    expect(won).toHaveLength(1);
    expect(answers.find((a) => a.status === "rejected")).toMatchObject({
      reason: { code: "conflict" },
    });
    const outcome = await (won[0] as PromiseFulfilledResult<{ outcome: Promise<unknown> }>).value
      .outcome;
    expect(outcome).toMatchObject({ status: "completed", text: "written" });
    expect(tools.log.executed.filter((e) => e.startsWith("execute_write_file"))).toHaveLength(1);
    await expect(engine.approveRun({ runId, callId: "w1", argsDigest })).rejects.toMatchObject({
      code: "conflict",
    });
    await expect(
      engine.approveRun({
        runId: "00000000-0000-4000-8000-000000000000",
        callId: "w1",
        argsDigest,
      }),
    ).rejects.toMatchObject({ code: "not-found" });
  });

  it("reads the operator's rejection reason as the call's result and goes on", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "low-risk",
    });
    const model = scriptModel([{ calls: [writeCall] }, { text: "ok, I will not write it" }]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId } = await runToEnd(engine, caller);

    const handle = await engine.rejectRun({ runId, reason: "not on a Friday" });
    const outcome = await handle.outcome;
    expect(outcome).toMatchObject({ status: "completed", text: "ok, I will not write it" });
    expect(model.toolResults(1)).toEqual([
      "write_file: An operator rejected this call; it did not run. Their reason: not on a Friday",
    ]);
    expect(tools.log.executed.some((e) => e.startsWith("execute_write_file"))).toBe(false);
    expect((await readToolCalls(ctx.database, runId)).get("w1")).toMatchObject({
      status: "rejected",
    });
  });

  it("parks a plain tool above the policy before it runs, and runs it once approved", async () => {
    const caller = await insertCaller(ctx.database, {
      tier: "internal",
      allow: ["mkdir", "execute_command"],
      approvalPolicy: "high-risk",
    });
    const model = scriptModel([
      {
        calls: [
          { id: "m1", name: "mkdir", input: { path: "d" } },
          { id: "x1", name: "execute_command", input: { command: "ls" } },
          { id: "t1", name: "get_time", input: {} },
        ],
      },
      { text: "done" },
    ]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const settled: SettledRun[] = [];
    engine.onRunSettled((s) => settled.push(s));
    const { runId, outcome } = await runToEnd(engine, caller);
    // mkdir is high-risk: at or below the policy, it may run. execute_command is unknown risk: it
    // parks under every policy but auto. A batch parks whole: only the proposal ran (it changes
    // nothing); mkdir and get_time wait for the answer.
    expect(outcome.status).toBe("parked");
    expect([...tools.log.executed]).toEqual(['execute_command({"command":"ls"})']);
    const row = await readRunRow(ctx.database, runId);
    expect(row.pendingApproval).toMatchObject({ callId: "x1", tool: "execute_execute_command" });

    const argsDigest = row.pendingApproval?.argsDigest ?? "";
    const resumed = await engine.approveRun({ runId, callId: "x1", argsDigest });
    expect((await resumed.outcome).status).toBe("completed");
    expect([...tools.log.executed].sort()).toEqual([
      'execute_command({"command":"ls"})',
      'execute_execute_command({"checked":true,"command":"ls"})',
      "get_time({})",
      'mkdir({"path":"d"})',
    ]);
    expect(model.toolResults(1)).toEqual([
      "mkdir: made",
      "execute_command: execute_command done",
      "get_time: 2026-01-01T00:00:00Z",
    ]);
    expect(settled.map((s) => s.outcome.status)).toEqual(["completed"]);
  });

  it("parks on each call of a batch in turn, gathering every request before the first park", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file", "mkdir"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([
      { calls: [writeCall, { id: "m1", name: "mkdir", input: { path: "d" } }] },
      { text: "both done" },
    ]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const settled: SettledRun[] = [];
    engine.onRunSettled((s) => settled.push(s));
    const { runId } = await runToEnd(engine, caller);
    // The plain tool never started; the proposal ran.
    expect(tools.log.executed).toEqual(['write_file({"path":"a.txt","content":"hi"})']);
    const first = await engine.approveRun({
      runId,
      callId: "w1",
      argsDigest: digestArgs(writeHalfArgs),
    });
    expect((await first.outcome).status).toBe("parked");
    // A batch parks whole: the approved write waits while mkdir still waits for its answer.
    expect(tools.log.executed).toEqual(['write_file({"path":"a.txt","content":"hi"})']);
    expect(settled.at(-1)).toMatchObject({ pendingTool: "mkdir", outcome: { status: "parked" } });
    const row = await readRunRow(ctx.database, runId);
    expect(row.pendingApproval).toMatchObject({ callId: "m1", tool: "mkdir" });
    const second = await engine.approveRun({
      runId,
      callId: "m1",
      argsDigest: digestArgs({ path: "d" }),
    });
    expect((await second.outcome).status).toBe("completed");
    expect(model.calls).toHaveLength(2);
    expect(model.toolResults(1)).toEqual(["write_file: write_file done", "mkdir: made"]);
    expect((await readRunRow(ctx.database, runId)).segments).toBe(3);
  });

  it("never resumes a revoked caller's run: the answer is refused and the run revoked", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([{ calls: [writeCall] }, { text: "should never be asked" }]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId } = await runToEnd(engine, caller);
    await ctx.db
      .update(callers)
      .set({ tier: "none", revokedAt: new Date(), version: sql`${callers.version} + 1` })
      .where(eq(callers.id, caller.id));

    await expect(
      engine.approveRun({ runId, callId: "w1", argsDigest: digestArgs(writeHalfArgs) }),
    ).rejects.toMatchObject({ code: "conflict", message: /revoked/ });
    const row = await readRunRow(ctx.database, runId);
    expect(row.status).toBe("revoked");
    expect(row.error).toMatchObject({ code: "caller-revoked" });
    expect(model.calls).toHaveLength(1);
    expect(tools.log.executed.some((e) => e.startsWith("execute_"))).toBe(false);
    expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("not-started");
  });

  it("tells the run's surface when a revocation ends its parked run", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const { engine, events } = await startEngine(ctx.database, {
      model: scriptModel([{ calls: [writeCall] }]),
    });
    const settled: SettledRun[] = [];
    engine.onRunSettled((s) => settled.push(s));
    const { runId } = await runToEnd(engine, caller);
    // What src/services/revoke-caller.ts does in the revocation's transaction; its caller event
    // names the runs it closed.
    const closedRunIds = await ctx.db.transaction(async (tx) => {
      await tx
        .update(callers)
        .set({ tier: "none", revokedAt: new Date(), version: sql`${callers.version} + 1` })
        .where(eq(callers.id, caller.id));
      return closeParkedRuns(tx, {
        runs: await lockParkedRunsOfCaller(tx, caller.id),
        status: "rejected",
        error: { code: "caller-revoked", message: "revoked" },
        actor: "admin",
        at: new Date(),
      });
    });
    expect(closedRunIds).toEqual([runId]);
    events.fire({ callerId: caller.id, change: "revoked", closedRunIds });
    await eventually("the run to settle", () => settled.length > 0);
    expect(settled).toMatchObject([{ runId, outcome: { status: "rejected" } }]);
  });

  it("resumes with the recomputed ceiling ∩ the original set: a grown allow list adds nothing", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([
      { calls: [writeCall] },
      { calls: [{ id: "m1", name: "mkdir", input: { path: "d" } }] },
      { text: "done" },
    ]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId } = await runToEnd(engine, caller);
    await ctx.db
      .update(callers)
      .set({
        tier: "private",
        allow: ["write_file", "mkdir", "web_fetch"],
        version: sql`${callers.version} + 1`,
      })
      .where(eq(callers.id, caller.id));

    const resumed = await engine.approveRun({
      runId,
      callId: "w1",
      argsDigest: digestArgs(writeHalfArgs),
    });
    expect((await resumed.outcome).status).toBe("completed");
    expect(model.offered(0)).toEqual(["get_time", "write_file"]);
    expect(model.offered(1)).toEqual(["get_time", "write_file"]);
    expect(model.toolResults(2).at(-1)).toBe('mkdir: Tool "mkdir" is not available in this run.');
    expect(tools.log.executed.some((e) => e.startsWith("mkdir"))).toBe(false);
  });

  it("refuses an approved call the recomputed ceiling no longer admits", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([{ calls: [writeCall] }, { text: "could not" }]);
    const { engine, tools } = await startEngine(ctx.database, { model });
    const { runId } = await runToEnd(engine, caller);
    await ctx.db
      .update(callers)
      .set({ allow: [], version: sql`${callers.version} + 1` })
      .where(eq(callers.id, caller.id));
    const resumed = await engine.approveRun({
      runId,
      callId: "w1",
      argsDigest: digestArgs(writeHalfArgs),
    });
    expect((await resumed.outcome).status).toBe("completed");
    expect(model.toolResults(1)).toEqual([
      'write_file: Tool "write_file" is not available in this run.',
    ]);
    expect(tools.log.executed.some((e) => e.startsWith("execute_"))).toBe(false);
    expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("refused");
  });

  it("expires a parked run nobody answered, and cancels one on request", async () => {
    let clock = Date.now();
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const model = scriptModel([{ calls: [writeCall] }, { calls: [writeCall] }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      options: { now: () => new Date(clock) },
    });
    const settled: SettledRun[] = [];
    engine.onRunSettled((s) => settled.push(s));
    const first = await runToEnd(engine, caller);
    const second = await runToEnd(engine, caller);

    expect(await engine.cancel(second.runId, "changed my mind")).toBe(true);
    expect(await readRunRow(ctx.database, second.runId)).toMatchObject({
      status: "canceled",
      error: { code: "canceled", message: "changed my mind" },
    });

    clock += 24 * 3600_000 + 1_000;
    await engine.sweep();
    const row = await readRunRow(ctx.database, first.runId);
    expect(row.status).toBe("expired");
    expect(row.error).toMatchObject({ code: "expired" });
    expect(settled.map((s) => [s.runId, s.outcome.status])).toEqual([
      [second.runId, "canceled"],
      [first.runId, "expired"],
    ]);
    await expect(
      engine.approveRun({
        runId: first.runId,
        callId: "w1",
        argsDigest: digestArgs(writeHalfArgs),
      }),
    ).rejects.toMatchObject({ code: "conflict" });
    expect(await engine.cancel(first.runId, "late")).toBe(false);
  });

  it.runIf(ctx.kind === "postgres")(
    "resumes on instance B a run parked on instance A",
    async () => {
      const caller = await insertCaller(ctx.database, {
        allow: ["write_file"],
        approvalPolicy: "read-only",
      });
      const model = scriptModel([{ calls: [writeCall] }, { text: "written on B" }]);
      const toolsA = createFakeTools();
      const toolsB = createFakeTools();
      const a = await startEngine(ctx.database, { model, tools: toolsA, instanceId: "a" });
      const { runId, outcome } = await runToEnd(a.engine, caller);
      expect(outcome.status).toBe("parked");
      await a.engine.stop();

      const second = await ctx.openSecondConnection();
      const b = await startEngine(second, { model, tools: toolsB, instanceId: "b" });
      const settled: SettledRun[] = [];
      b.engine.onRunSettled((s) => settled.push(s));
      const handle = await b.engine.approveRun({
        runId,
        callId: "w1",
        argsDigest: digestArgs(writeHalfArgs),
      });
      expect(await handle.outcome).toMatchObject({ status: "completed", text: "written on B" });
      expect(toolsA.log.executed).toEqual(['write_file({"path":"a.txt","content":"hi"})']);
      // The half ran on B, with the arguments the operator approved (jsonb reorders keys).
      expect(toolsB.log.executed).toHaveLength(1);
      const [ran] = toolsB.log.executed;
      expect(ran?.startsWith("execute_write_file(")).toBe(true);
      expect(JSON.parse(ran?.slice("execute_write_file(".length, -1) ?? "")).toEqual(writeHalfArgs);
      // The model on B saw the whole conversation from A, then the half's result.
      expect(model.calls[1]?.prompt.map((m) => m.role)).toEqual([
        "system",
        "user",
        "assistant",
        "tool",
      ]);
      const row = await readRunRow(ctx.database, runId);
      expect(row).toMatchObject({ status: "completed", segments: 2, ownerInstanceId: null });
      expect(row.budgetUsed.steps).toBe(2);
      expect(settled).toMatchObject([
        { runId, callerId: caller.id, outcome: { status: "completed" } },
      ]);
    },
  );
});
