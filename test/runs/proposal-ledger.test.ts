// The ledger marks a side effect's start, not a proposal's (DESIGN §5): a two-phase call stopped
// while it proposes (which changes nothing) is recorded and reported as not started, never as
// "may have made part of its changes".
import { afterEach, expect, it } from "vitest";
import { z } from "zod";
import type { ToolImplementation } from "../../src/tools/types.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import {
  createFakeTools,
  insertCaller,
  readToolCalls,
  scriptModel,
  startEngine,
  stopEngines,
  userMessage,
  waitForAbort,
} from "./support.ts";

describeEachDatabase("the tool-call ledger", (ctx) => {
  afterEach(stopEngines);

  it("a call stopped during its proposal is reported as not started, not as partly done", async () => {
    const caller = await insertCaller(ctx.database, { allow: ["write_file"] });
    const model = scriptModel([
      {
        calls: [
          { id: "the proposal to be under way", name: "write_file", input: { path: "a.txt" } },
        ],
      },
    ]);
    const tools = createFakeTools();
    let proposing = false;
    let halfRan = false;
    const slowProposal: ToolImplementation = {
      name: "write_file",
      description: "a proposal that takes its time",
      inputSchema: z.looseObject({}),
      async execute(_args, callCtx) {
        proposing = true;
        await waitForAbort(callCtx.signal);
        return { ok: false, code: "interrupted", error: "stopped while proposing" };
      },
      executeHalf: {
        name: "execute_write_file",
        inputSchema: z.looseObject({}),
        async execute() {
          halfRan = true;
          return { ok: true, content: "written" };
        },
      },
    };
    (tools.runtime.tools as Map<string, ToolImplementation>).set("write_file", slowProposal);
    const { engine } = await startEngine(ctx.database, { model, tools });
    const handle = await engine.start({ caller, origin: "a2a", messages: userMessage("go") });
    await eventually("the proposal to be under way", () => proposing, { withinMs: 120_000 });
    expect(await engine.cancel(handle.runId, "stop")).toBe(true);
    const outcome = await handle.outcome;
    expect(outcome.status).toBe("canceled");
    const rows = await readToolCalls(ctx.database, handle.runId);
    expect(rows.get("the proposal to be under way")?.status).toBe("not-started");
    expect(rows.get("the proposal to be under way")?.startedAt).toBeNull();
    const text = JSON.stringify(outcome.messages.at(-1));
    expect(text).toContain("it changed nothing");
    expect(text).not.toContain("may have made part of its changes");
    expect(halfRan).toBe(false);
  }, 180_000);
});
