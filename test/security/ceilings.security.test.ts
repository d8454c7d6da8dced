// Ceilings end to end: the real run engine, the REAL tool runtime over a temporary workspace, the
// real caller services and caller directory (so revocation reaches the engine the way it does in
// production, through NOTIFY), and a scripted model that asks for what it should not get:
// tools outside the set, hidden execute halves, aliases of denied tools, case and look-alike
// variants of an admitted acting tool; a second call after its caller was revoked; an approval
// after revocation; more tools after the caller was widened mid-park. The proof that nothing
// executed is the workspace's bytes, the tool_calls rows and the audit trail.
//
// Already proven, not repeated: the gate with fake tools (test/runs/executor.security.test.ts,
// test/runs/park.test.ts), and through the real server a tool outside the set, hidden halves, an
// unknown name and `LS`/Cyrillic `ls` (test/e2e/ceiling.e2e.test.ts), a revocation landing while
// the model is thinking (test/e2e/instances.e2e.test.ts).
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider";
import { MockLanguageModelV4 } from "ai/test";
import { and, eq } from "drizzle-orm";
import { afterEach, beforeEach, expect, it } from "vitest";
import type { Database } from "../../src/db/client.ts";
import { auditEvents, type Caller } from "../../src/db/schema.ts";
import { type LoadedPolicies, loadPolicies } from "../../src/load-policies.ts";
import { silentLogger } from "../../src/log.ts";
import { createCeilingCache } from "../../src/policy/ceiling-cache.ts";
import type { RunEvent } from "../../src/runs/types.ts";
import { addCaller } from "../../src/services/add-caller.ts";
import { findCallerRow } from "../../src/services/find-caller.ts";
import { revokeCaller } from "../../src/services/revoke-caller.ts";
import { createRunEngine, type PeergateRunEngine } from "../../src/services/runs/engine.ts";
import { updateCaller } from "../../src/services/update-caller.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { snapshotTree } from "../e2e/support.ts";
import { readRunRow, readToolCalls, type Step, scriptModel } from "../runs/support.ts";
import { createTestApp, operatorProof, repoPoliciesDir, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { expectRefused, recordCase } from "./cases.ts";

const agentYaml = (denied: string) => `name: ceilings
description: The agent the ceiling attacks run against
version: "1.0.0"
skills: []
instructions: Answer.
tools: [files, context, web, shell]
deniedTools: [${denied}]
`;

async function policiesDenying(denied: string): Promise<LoadedPolicies> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-ceilings-policies-"));
  try {
    for (const file of ["tools.yaml", "models.yaml"]) {
      await writeFile(
        path.join(dir, file),
        await readFile(path.join(repoPoliciesDir, file), "utf8"),
      );
    }
    await writeFile(path.join(dir, "agent.yaml"), agentYaml(denied));
    return await loadPolicies(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A scripted model whose steps may wait for something (a revocation) before answering. */
function hookedModel(steps: Step[], before: Record<number, () => Promise<void>> = {}) {
  const inner = scriptModel(steps);
  const model = new MockLanguageModelV4({
    doStream: async (options: LanguageModelV4CallOptions) => {
      const n = inner.calls.length;
      await before[n]?.();
      // A provider that ignores the abort: it answers with the step's calls all the same.
      return inner.model.doStream({ ...options, abortSignal: undefined });
    },
  });
  return { ...inner, model };
}

type Harness = {
  app: TestApp;
  engine: PeergateRunEngine;
  tools: ToolRuntime;
  workspace: string;
  close(): Promise<void>;
};

const call = (id: string, name: string, input: unknown) => ({ id, name, input });

describeEachDatabase("ceilings under attack", (db) => {
  let h: Harness | undefined;
  let workspaceRoot: string;

  beforeEach(async () => {
    workspaceRoot = await mkdtemp(path.join(os.tmpdir(), "peergate-ceilings-"));
  });
  afterEach(async () => {
    await h?.close();
    h = undefined;
    await rm(workspaceRoot, { recursive: true, force: true });
  });

  async function start(model: { model: MockLanguageModelV4 }, denied = "find"): Promise<Harness> {
    const workspace = path.join(workspaceRoot, "ws");
    await mkdir(path.join(workspace, "notes"), { recursive: true });
    await writeFile(path.join(workspace, "secret.txt"), "the operator's own notes\n");
    await writeFile(path.join(workspace, "notes", "todo.txt"), "- nothing\n");
    const policies = await policiesDenying(denied);
    const app = await createTestApp(db.database);
    const tools = await createToolRuntime({
      policies,
      workspace,
      dataDir: path.join(workspaceRoot, "data"),
      env: { PATH: process.env.PATH ?? "" },
      logger: silentLogger,
      killGraceMs: 200,
    });
    const engine = await createRunEngine({
      database: db.database,
      policies,
      ceilings: createCeilingCache(),
      tools,
      model: { ok: true, model: model.model, id: "test:ceilings" },
      instanceId: `ceilings-${db.kind}`,
      logger: silentLogger,
      heartbeatMs: 0,
      toolStopGraceMs: 500,
      maxToolConcurrency: 1,
      workspace: tools.workspace ?? workspace,
      subscribeCallerEvents: (listener) => app.directory.onCallerEvent(listener),
      // Callers get the default budgets, a cost budget among them: the scripted model is free.
      priceTable: {
        models: new Map([
          ["test:ceilings", { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }],
        ]),
        fallback: undefined,
      },
    });
    h = {
      app,
      engine,
      tools,
      workspace,
      async close() {
        await engine.stop();
        await tools.close();
        await app.close();
      },
    };
    return h;
  }

  async function caller(harness: Harness, input: Record<string, unknown>): Promise<Caller> {
    await addCaller({
      services: harness.app.services,
      input: { kind: "peer", ...input },
      actor: "admin",
      operator: operatorProof(harness.app),
    });
    return findCallerRow(db.database.db, String(input.name));
  }

  /** The kinds of the audit events about one run, in order. */
  async function runAudit(runId: string): Promise<string[]> {
    const rows = await db.database.db
      .select({ kind: auditEvents.kind })
      .from(auditEvents)
      .where(eq(auditEvents.subject, `run:${runId}`))
      .orderBy(auditEvents.xactId, auditEvents.id);
    return rows.map((r) => r.kind);
  }

  async function refusedAudit(database: Database, runId: string) {
    const rows = await database.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.kind, "tool.refused"), eq(auditEvents.subject, `run:${runId}`)));
    return new Map(
      rows.map((r) => {
        const data = r.data as { callId: string; tool: string; code: string };
        return [data.callId, data];
      }),
    );
  }

  // Every name the model tries; a match for any of them would change the workspace's bytes or
  // read what the caller's tier does not allow.
  const probes = [
    // Outside the set: private, acting, egress.
    call("out-read", "read_file", { path: "secret.txt" }),
    call("out-grep", "grep", { pattern: "operator" }),
    call("out-edit", "edit_file", { path: "secret.txt", oldText: "own", newText: "OWNED" }),
    call("out-mkdir", "mkdir", { path: "pwned-dir" }),
    call("out-exec", "execute_command", { program: "touch", args: ["pwned-exec"] }),
    call("out-fetch", "web_fetch", { url: "http://127.0.0.1:9/" }),
    // Hidden halves, of an admitted tool and of refused ones.
    call("half-write", "execute_write_file", { path: "pwned-half.txt", content: "x" }),
    call("half-edit", "execute_edit_file", { path: "secret.txt", oldText: "own", newText: "X" }),
    call("half-exec", "execute_execute_command", {
      program: "touch",
      args: ["pwned-half"],
      cwd: ".",
    }),
    // The denied tool by its name and by its alias.
    call("denied-find", "find", { pattern: "**" }),
    call("denied-glob", "glob", { pattern: "**" }),
    // Variants of the admitted acting tool write_file.
    call("var-upper", "WRITE_FILE", { path: "pwned-upper.txt", content: "x" }),
    call("var-title", "Write_File", { path: "pwned-title.txt", content: "x" }),
    call("var-cyrillic", "wr\u0456te_file", { path: "pwned-cyr.txt", content: "x" }),
    call("var-fullwidth", "\uff57rite_file", { path: "pwned-fw.txt", content: "x" }),
    call("var-zwsp", "write_file\u200b", { path: "pwned-zw.txt", content: "x" }),
    call("var-dash", "write-file", { path: "pwned-dash.txt", content: "x" }),
    call("var-space", " write_file", { path: "pwned-sp.txt", content: "x" }),
    call("var-nul", "write_file\u0000", { path: "pwned-nul.txt", content: "x" }),
    // The one admitted read: proves the run works and the gate is not simply closed.
    call("ok-ls", "ls", { path: "." }),
  ];

  for (const denied of ["find", "glob"]) {
    it(`refuses every name outside the set (deniedTools: [${denied}]); nothing executes, every refusal is audited`, async () => {
      const model = hookedModel([{ calls: probes }, { text: "done" }]);
      const harness = await start(model, denied);
      // Tier internal: ls and stat by tier; write_file only by name.
      const peer = await caller(harness, {
        name: "prober",
        tier: "internal",
        allow: ["write_file"],
      });
      const before = await snapshotTree(harness.workspace);

      const handle = await harness.engine.start({
        caller: peer,
        origin: "a2a",
        messages: [{ role: "user", content: "look around" }],
      });
      const outcome = await handle.outcome;
      expect(outcome.status).toBe("completed");

      // Denying either name of find removes both: the model is never offered it.
      expect(model.offered(0)).toEqual(["get_time", "ls", "stat", "write_file"]);
      expect(await snapshotTree(harness.workspace)).toEqual(before);
      const rows = await readToolCalls(db.database, handle.runId);
      const audited = await refusedAudit(db.database, handle.runId);
      for (const probe of probes.filter((p) => p.id !== "ok-ls")) {
        const row = rows.get(probe.id);
        const executed = row?.status !== "refused" || !audited.has(probe.id);
        expectRefused("ceilings", `${probe.name} (denied ${denied})`, executed);
        expect(audited.get(probe.id)?.code).toBe(
          probe.id.startsWith("half-write") ? "hidden-half" : "tool-unavailable",
        );
      }
      expect(rows.get("ok-ls")).toMatchObject({ status: "completed", tool: "ls" });
      // The model read the same words for every refusal, whatever the reason.
      const shown = model.toolResults(1).filter((r) => !r.startsWith("ls:"));
      const words = new Set(shown.map((r) => r.replace(/^.*?: Tool ".*" is/s, "Tool <name> is")));
      expect([...words]).toEqual(["Tool <name> is not available in this run."]);
    });
  }

  it("revocation between two tool calls of one run: the second never executes", async () => {
    let peer: Caller | undefined;
    let harness: Harness | undefined;
    const revokedSeen: string[] = [];
    const model = hookedModel(
      [
        { calls: [call("w1", "write_file", { path: "first.txt", content: "one\n" })] },
        // Asked for after the revocation; a provider that ignores the abort still sends it.
        { calls: [call("w2", "write_file", { path: "second.txt", content: "two\n" })] },
        { text: "never" },
      ],
      {
        1: async () => {
          if (!harness || !peer) throw new Error("not started");
          await revokeCaller({ services: harness.app.services, name: peer.name, actor: "admin" });
          await eventually("the revocation to be seen", () => revokedSeen.length > 0);
        },
      },
    );
    harness = await start(model);
    harness.app.directory.onCallerEvent((e) => {
      if (e.change === "revoked") revokedSeen.push(e.callerId);
    });
    peer = await caller(harness, { name: "two-steps", tier: "public", allow: ["write_file"] });

    const handle = await harness.engine.start({
      caller: peer,
      origin: "a2a",
      messages: [{ role: "user", content: "write twice" }],
    });
    const outcome = await handle.outcome;
    expect(outcome).toMatchObject({ status: "revoked", error: { code: "caller-revoked" } });
    const files = await snapshotTree(harness.workspace);
    expect(Object.keys(files)).toContain("first.txt");
    const rows = await readToolCalls(db.database, handle.runId);
    const second = rows.get("w2");
    const executed =
      "second.txt" in files || (second !== undefined && second.status !== "not-started");
    expectRefused("ceilings", "second write_file after revocation (next step)", executed);
    expect(rows.get("w1")?.status).toBe("completed");
    expect((await readRunRow(db.database, handle.runId)).status).toBe("revoked");
    // The trail: the first call ran, then the run was revoked; nothing ran after it.
    const kinds = await runAudit(handle.runId);
    expect(kinds.at(-1)).toBe("run.revoked");
    expect(kinds.filter((k) => k === "tool.called")).toHaveLength(
      kinds.includes("tool.called") ? 1 : 0,
    );
  });

  it("revocation while the first call of a batch runs: the queued call never starts", async () => {
    let harness: Harness | undefined;
    let peer: Caller | undefined;
    const model = hookedModel([
      {
        calls: [
          call("c1", "execute_command", { program: "sleep", args: ["600"] }),
          call("c2", "write_file", { path: "queued.txt", content: "queued\n" }),
        ],
      },
      { text: "never" },
    ]);
    harness = await start(model);
    peer = await caller(harness, {
      name: "batcher",
      tier: "public",
      allow: ["execute_command", "write_file"],
    });
    const events: RunEvent[] = [];
    let revoking: Promise<unknown> | undefined;
    const handle = await harness.engine.start(
      { caller: peer, origin: "a2a", messages: [{ role: "user", content: "sleep then write" }] },
      (event) => {
        events.push(event);
        if (event.type === "tool-call" && event.callId === "c1" && event.state === "started") {
          revoking ??= revokeCaller({
            services: harness?.app.services ?? ({} as never),
            name: peer?.name ?? "",
            actor: "admin",
          });
        }
      },
    );
    const outcome = await handle.outcome;
    await revoking;
    expect(outcome).toMatchObject({ status: "revoked", error: { code: "caller-revoked" } });
    const rows = await readToolCalls(db.database, handle.runId);
    const files = await snapshotTree(harness.workspace);
    const executed = "queued.txt" in files || rows.get("c2")?.status !== "not-started";
    expectRefused("ceilings", "queued write_file after revocation (same batch)", executed);
    // The sleep was interrupted, not waited out (it would outlast the test).
    expect(rows.get("c1")?.status).toBe("interrupted");
    expect((await runAudit(handle.runId)).at(-1)).toBe("run.revoked");
  });

  it("a parked run approved after its caller was revoked: refused, the write never happens", async () => {
    const model = hookedModel([
      { calls: [call("w1", "write_file", { path: "approved.txt", content: "late\n" })] },
      { text: "written" },
    ]);
    const harness = await start(model);
    const peer = await caller(harness, {
      name: "parker",
      tier: "public",
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const handle = await harness.engine.start({
      caller: peer,
      origin: "a2a",
      messages: [{ role: "user", content: "write it" }],
    });
    expect((await handle.outcome).status).toBe("parked");
    const pending = (await readRunRow(db.database, handle.runId)).pendingApproval;
    expect(pending).toMatchObject({ callId: "w1", tool: "execute_write_file" });

    const revoked = await revokeCaller({
      services: harness.app.services,
      name: "parker",
      actor: "admin",
    });
    expect(revoked.parkedRunsRejected).toBe(1);
    let refusedBy = "";
    try {
      await harness.engine.approveRun({
        runId: handle.runId,
        callId: "w1",
        argsDigest: pending?.argsDigest ?? "",
        actor: "operator",
      });
    } catch (error) {
      refusedBy = (error as { code?: string }).code ?? String(error);
    }
    recordCase(
      "ceilings",
      `approval after revocation (refused: ${refusedBy || "no"})`,
      refusedBy === "",
    );
    expect(refusedBy).toMatch(/conflict|not-found/);
    expect(await snapshotTree(harness.workspace)).not.toHaveProperty(["approved.txt"]);
    expect(model.calls).toHaveLength(1);
    const row = await readRunRow(db.database, handle.runId);
    expect(row).toMatchObject({ status: "revoked", error: { code: "caller-revoked" } });
    // The trail: parked, then the late answer refused (the revocation itself names the run).
    const kinds = await runAudit(handle.runId);
    expect(kinds).toContain("run.parked");
    expect(kinds.at(-1)).toBe("run.answer-refused");
    expect(kinds).not.toContain("run.approved");
    const [revokedEvent] = await db.database.db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.kind, "caller.revoked"));
    const revokedData = revokedEvent?.data as { waitingRunsRevoked?: string[] } | undefined;
    expect(revokedData?.waitingRunsRevoked).toEqual([handle.runId]);
    expect((await readToolCalls(db.database, handle.runId)).get("w1")?.status).not.toBe(
      "completed",
    );
  });

  it("a resumed run asking for more than it started with: the widened ceiling adds nothing", async () => {
    const model = hookedModel([
      { calls: [call("w1", "write_file", { path: "approved.txt", content: "ok\n" })] },
      {
        calls: [
          call("g-read", "read_file", { path: "secret.txt" }),
          call("g-mkdir", "mkdir", { path: "grown" }),
          call("g-exec", "execute_command", { program: "touch", args: ["grown-exec"] }),
          call("g-edit", "edit_file", { path: "secret.txt", oldText: "own", newText: "OWNED" }),
          call("g-half", "execute_mkdir", { path: "grown-half" }),
        ],
      },
      { text: "done" },
    ]);
    const harness = await start(model);
    const peer = await caller(harness, {
      name: "grower",
      tier: "public",
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const handle = await harness.engine.start({
      caller: peer,
      origin: "a2a",
      messages: [{ role: "user", content: "write, then more" }],
    });
    expect((await handle.outcome).status).toBe("parked");
    // While it waits, the admin widens the caller: private tier, acting tools by name.
    await updateCaller({
      services: harness.app.services,
      name: "grower",
      input: {
        tier: "private",
        allow: ["write_file", "mkdir", "execute_command", "edit_file"],
        approvalPolicy: "auto",
      },
      actor: "admin",
      operator: operatorProof(harness.app),
    });
    const before = await snapshotTree(harness.workspace);
    const pending = (await readRunRow(db.database, handle.runId)).pendingApproval;
    const resumed = await harness.engine.approveRun({
      runId: handle.runId,
      callId: "w1",
      argsDigest: pending?.argsDigest ?? "",
      actor: "operator",
    });
    expect((await resumed.outcome).status).toBe("completed");
    // The approved call ran; nothing else changed.
    const after = await snapshotTree(harness.workspace);
    const { "approved.txt": written, ...rest } = after;
    expect(written).toBeDefined();
    expect(rest).toEqual(before);
    // Offered on resume: what the run started with, not what the caller has now.
    expect(model.offered(1)).toEqual(model.offered(0));
    const rows = await readToolCalls(db.database, handle.runId);
    const audited = await refusedAudit(db.database, handle.runId);
    for (const id of ["g-read", "g-mkdir", "g-exec", "g-edit", "g-half"]) {
      const executed = rows.get(id)?.status !== "refused" || !audited.has(id);
      expectRefused(
        "ceilings",
        `resumed run asks for ${id.slice(2)} after the caller was widened`,
        executed,
      );
    }
  });
});
