// A revocation is recorded on the runs it stops, as a cancel is: the engine that runs them reads the
// record at its heartbeat (`sweep`), so no caller event is needed here (none is ever fired: the
// engine's subscription is a fake). Stopped mid-tool-call, the tool's AbortSignal fires; mid-model-
// call, the model call's. The run ends `revoked` in every case, and the record outlives a restore
// that comes before the heartbeat.
import { and, eq, sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { auditEvents, callers } from "../../src/db/schema.ts";
import { silentLogger } from "../../src/log.ts";
import type { ServiceContext } from "../../src/services/context.ts";
import { revokeCaller } from "../../src/services/revoke-caller.ts";
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

const longCall = { calls: [{ id: "long", name: "ls", input: {} }] };

describeEachDatabase("a revocation recorded on the run", (ctx) => {
  afterEach(stopEngines);

  const services = () =>
    ({
      database: ctx.database,
      db: ctx.db,
      now: () => new Date(),
      logger: silentLogger,
    }) as unknown as ServiceContext;

  it("stops a run in a long tool call at the next heartbeat, with no notification", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const { engine, tools } = await startEngine(ctx.database, {
      model: scriptModel([longCall, { text: "never" }]),
    });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the long tool to be running", () => tools.log.signals.has("long"));

    const revoked = await revokeCaller({ services: services(), name: caller.name, actor: "admin" });
    expect(revoked).toMatchObject({ workingRunsStopped: 1, waitingRunsRevoked: 0 });
    expect(await readRunRow(ctx.database, handle.runId)).toMatchObject({
      status: "working",
      stopKind: "revoked",
      cancelReason: "the caller was revoked",
    });
    // Nothing was heard: the run is still in its tool call until the heartbeat reads the record.
    expect(tools.log.signals.get("long")?.aborted).toBe(false);
    await engine.sweep();

    expect(await handle.outcome).toMatchObject({
      status: "revoked",
      error: { code: "caller-revoked" },
    });
    expect(tools.log.signals.get("long")?.aborted).toBe(true);
    expect((await readToolCalls(ctx.database, handle.runId)).get("long")?.status).toBe(
      "interrupted",
    );
    const ended = await ctx.db
      .select()
      .from(auditEvents)
      .where(
        and(eq(auditEvents.subject, `run:${handle.runId}`), eq(auditEvents.kind, "run.revoked")),
      );
    expect(ended).toHaveLength(1);
    const [event] = await ctx.db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.kind, "caller.revoked"));
    expect(event?.data).toMatchObject({ workingRunsStopped: [handle.runId] });
  });

  it("still stops the run when the caller is restored before the heartbeat", async () => {
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const { engine, tools } = await startEngine(ctx.database, {
      model: scriptModel([longCall, { text: "never" }]),
    });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the long tool to be running", () => tools.log.signals.has("long"));
    await revokeCaller({ services: services(), name: caller.name, actor: "admin" });
    // Restored at once (as restoreCaller sets it): the run that was stopped stays stopped.
    await ctx.db
      .update(callers)
      .set({ tier: "internal", revokedAt: null, version: sql`${callers.version} + 1` })
      .where(eq(callers.id, caller.id));
    await engine.sweep();
    expect((await handle.outcome).status).toBe("revoked");
    expect(tools.log.signals.get("long")?.aborted).toBe(true);
  });

  it("stops a run mid-model-call whose caller is revoked with no record on the run", async () => {
    // As for a run admitted while its caller's revocation committed: the run row carries nothing,
    // the caller row says revoked.
    const caller = await insertCaller(ctx.database, { tier: "internal" });
    const model = scriptModel([{ text: "thinking…", hang: true }]);
    const { engine } = await startEngine(ctx.database, { model });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the first model call", () => model.calls.length === 1);
    await ctx.db
      .update(callers)
      .set({ tier: "none", revokedAt: new Date(), version: sql`${callers.version} + 1` })
      .where(eq(callers.id, caller.id));
    await engine.sweep();
    expect(await handle.outcome).toMatchObject({
      status: "revoked",
      error: { code: "caller-revoked" },
    });
    expect(model.calls[0]?.abortSignal?.aborted).toBe(true);
  });

  it("a run that parks after the revocation marked it is closed revoked, not left parked", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    // The caller is revoked while the model answers (no notification reaches the engine); the
    // answer's call needs an operator, so the run parks after the revocation committed, as a
    // working run. (A batch parks whole: nothing of it runs before the park.)
    let revoked: Awaited<ReturnType<typeof revokeCaller>> | undefined;
    const tools = createFakeTools({});
    const model = scriptModel([
      { calls: [{ id: "w1", name: "write_file", input: { path: "a.txt", content: "hi" } }] },
    ]);
    const answer = model.model.doStream.bind(model.model);
    model.model.doStream = async (options) => {
      revoked ??= await revokeCaller({ services: services(), name: caller.name, actor: "admin" });
      return answer(options);
    };
    const { engine } = await startEngine(ctx.database, { model, tools });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    expect(await handle.outcome).toMatchObject({
      status: "revoked",
      error: { code: "caller-revoked" },
    });
    expect(revoked).toMatchObject({ workingRunsStopped: 1, waitingRunsRevoked: 0 });
    const row = await readRunRow(ctx.database, handle.runId);
    expect(row).toMatchObject({ status: "revoked", pendingApproval: null });
    expect((await readToolCalls(ctx.database, handle.runId)).get("w1")?.status).toBe("not-started");
  });
});
