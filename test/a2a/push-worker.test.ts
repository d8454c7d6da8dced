// The push worker against the checks it repeats before every attempt: a grant removed after the
// config was accepted, and a name whose DNS answer turned private (rebinding), are refused at
// delivery, recorded as failed in the outbox and the audit trail, and nothing reaches the target.
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { TaskState } from "@a2a-js/sdk";
import { eq } from "drizzle-orm";
import { afterEach, beforeEach, expect, it } from "vitest";
import { CallerUser, createCallContext } from "../../src/a2a/call-context.ts";
import { createPushStore } from "../../src/a2a/push-store.ts";
import { createPushEgress } from "../../src/a2a/push-targets.ts";
import { type PushWorker, startPushWorker } from "../../src/a2a/push-worker.ts";
import { createTaskStore } from "../../src/a2a/task-store.ts";
import { parseSecretKey } from "../../src/auth/sealed-secrets.ts";
import { auditEvents, callerPushHosts, callers, pushDeliveries } from "../../src/db/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { waitFor } from "./support.ts";

const secretKey = parseSecretKey("b".repeat(64));
if (!secretKey) throw new Error("no secret key");

function task(id: string, state: TaskState) {
  return {
    id,
    contextId: id,
    status: { state, message: undefined, timestamp: undefined },
    artifacts: [],
    history: [],
    metadata: undefined,
  };
}

describeEachDatabase("push worker", (ctx) => {
  let server: http.Server;
  let hits: number;
  let port: number;
  let worker: PushWorker | undefined;
  let callerId: string;

  beforeEach(async () => {
    hits = 0;
    server = http.createServer((_request, response) => {
      hits += 1;
      response.writeHead(200).end();
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
    const [row] = await ctx.db.insert(callers).values({ name: "alice", kind: "peer" }).returning();
    callerId = row?.id ?? "";
  });

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    server.closeAllConnections();
    server.close();
  });

  async function outcomeOf(taskId: string) {
    return waitFor(async () => {
      const rows = await ctx.db
        .select()
        .from(pushDeliveries)
        .where(eq(pushDeliveries.taskId, taskId));
      return rows.length > 0 && rows.every((r) => r.state !== "pending") ? rows : undefined;
    }, 15_000);
  }

  it("refuses at delivery a target whose grant was removed after the config was accepted", async () => {
    await ctx.db.insert(callerPushHosts).values({ callerId, entry: `http://127.0.0.1:${port}/` });
    const context = createCallContext(new CallerUser(callerId), "1.0");
    const configs = createPushStore(ctx.db, secretKey);
    await configs.save("t-grant", context, {
      tenant: "",
      id: "",
      taskId: "t-grant",
      url: `http://127.0.0.1:${port}/hook`,
      token: "",
      authentication: undefined,
    });
    // The operator narrows the caller before the task's update is delivered.
    await ctx.db.delete(callerPushHosts).where(eq(callerPushHosts.callerId, callerId));
    const tasks = createTaskStore(ctx.db);
    await tasks.save(task("t-grant", TaskState.TASK_STATE_COMPLETED), context);
    worker = startPushWorker({
      database: ctx.database,
      secretKey,
      egress: createPushEgress({ allowAddresses: ["127.0.0.1"] }),
      logger: silentLogger,
    });
    const rows = await outcomeOf("t-grant");
    expect(rows.map((r) => r.state)).toEqual(["failed"]);
    expect(rows[0]?.lastError).toContain("outside the hosts");
    expect(hits).toBe(0);
    const audit = await ctx.db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.kind, "push.failed"));
    expect(JSON.stringify(audit.map((e) => e.data))).toContain("t-grant");
  });

  it("refuses at delivery a granted name that now resolves to a loopback address", async () => {
    await ctx.db
      .insert(callerPushHosts)
      .values({ callerId, entry: `http://hooks.example.org:${port}/` });
    const context = createCallContext(new CallerUser(callerId), "1.0");
    const configs = createPushStore(ctx.db, secretKey);
    await configs.save("t-dns", context, {
      tenant: "",
      id: "",
      taskId: "t-dns",
      url: `http://hooks.example.org:${port}/hook`,
      token: "",
      authentication: undefined,
    });
    const tasks = createTaskStore(ctx.db);
    await tasks.save(task("t-dns", TaskState.TASK_STATE_COMPLETED), context);
    worker = startPushWorker({
      database: ctx.database,
      secretKey,
      // No allow list: the rebinding answer points at this machine.
      egress: createPushEgress({ resolve: async () => [{ address: "127.0.0.1", family: 4 }] }),
      logger: silentLogger,
    });
    const rows = await outcomeOf("t-dns");
    expect(rows.map((r) => r.state)).toEqual(["failed"]);
    expect(rows[0]?.lastError).toContain("loopback");
    expect(hits).toBe(0);
  });
});
