// Revoking a caller closes its parked runs through the one function that closes parked runs: the
// pending approval and batch are cleared, the parked calls closed, each run gets a `run.revoked`
// audit event, and the caller event names the runs, so the run's surface (A2A) learns it settled.
// Driven through the real revocation verb and the real caller directory (LISTEN/NOTIFY).
import { and, eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { auditEvents } from "../../src/db/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { openCallerDirectory } from "../../src/services/caller-directory.ts";
import type { ServiceContext } from "../../src/services/context.ts";
import { revokeCaller } from "../../src/services/revoke-caller.ts";
import type { SettledRun } from "../../src/services/runs/engine.ts";
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
} from "./support.ts";

const writeCall = { id: "w1", name: "write_file", input: { path: "a.txt", content: "hi" } };

describeEachDatabase("revoking a caller with a parked run", (ctx) => {
  afterEach(stopEngines);

  it("ends the run revoked, its calls closed, audited, and tells its surface", async () => {
    const caller = await insertCaller(ctx.database, {
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const directory = await openCallerDirectory({ database: ctx.database, logger: silentLogger });
    try {
      const { engine } = await startEngine(ctx.database, {
        model: scriptModel([{ calls: [writeCall] }]),
        options: { subscribeCallerEvents: (listener) => directory.onCallerEvent(listener) },
      });
      const settled: SettledRun[] = [];
      engine.onRunSettled((s) => settled.push(s));
      const { runId, outcome } = await runToEnd(engine, caller);
      expect(outcome.status).toBe("parked");
      expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("parked");

      const services = {
        database: ctx.database,
        db: ctx.db,
        now: () => new Date(),
        logger: silentLogger,
      } as unknown as ServiceContext;
      const revoked = await revokeCaller({ services, name: caller.name, actor: "admin" });
      expect(revoked.waitingRunsRevoked).toBe(1);

      const row = await readRunRow(ctx.database, runId);
      expect(row).toMatchObject({
        status: "revoked",
        error: { code: "caller-revoked" },
        pendingApproval: null,
        pendingBatch: null,
      });
      expect(row.finishedAt).not.toBeNull();
      expect((await readToolCalls(ctx.database, runId)).get("w1")?.status).toBe("not-started");
      const rejected = await ctx.db
        .select()
        .from(auditEvents)
        .where(and(eq(auditEvents.subject, `run:${runId}`), eq(auditEvents.kind, "run.revoked")));
      expect(rejected).toHaveLength(1);
      expect(rejected[0]).toMatchObject({ actor: "admin", data: { callId: "w1" } });
      const [callerEvent] = await ctx.db
        .select()
        .from(auditEvents)
        .where(eq(auditEvents.kind, "caller.revoked"));
      expect(callerEvent?.data).toMatchObject({ waitingRunsRevoked: [runId] });

      // The caller event carried the run's id: the surface hears the run settled.
      await eventually("the run to settle", () => settled.some((s) => s.runId === runId));
      expect(settled.find((s) => s.runId === runId)).toMatchObject({
        callerId: caller.id,
        outcome: { status: "revoked", error: { code: "caller-revoked" } },
      });
    } finally {
      await directory.close();
    }
  });
});
