// The lifetime of MCP server instances (src/tools/declared/mcp-instances.ts), with stand-in
// clients so the rules can be driven one by one: one instance per caller (or per run), the bound
// per server with the longest-idle instance closed first and a clear refusal when every one is
// busy, idle instances closed, a revoked caller's closed, an exited or failed one replaced. The
// declaration fields behind them are validated with a message that says what to write.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.ts";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import {
  createMcpInstances,
  type McpServerSlot,
} from "../../../src/tools/declared/mcp-instances.ts";
import { ToolCallError } from "../../../src/tools/tool-call-error.ts";
import { eventually } from "../../support/eventually.ts";
import { silentLogger } from "../support.ts";

type Started = { id: number; closed: boolean; exit: () => void };

/** A slot whose instances are stand-ins: each records that it started and whether it closed. */
function fakeSlot(overrides: Partial<McpServerSlot> = {}) {
  const started: Started[] = [];
  const slot: McpServerSlot = {
    name: "fake",
    scope: "caller",
    idleTimeoutMs: 60_000,
    maxInstances: 16,
    open: async (onExit) => {
      const entry: Started = { id: started.length, closed: false, exit: onExit };
      started.push(entry);
      return {
        close: async () => {
          entry.closed = true;
        },
      } as unknown as Client;
    },
    ...overrides,
  };
  return { slot, started };
}

function setUp() {
  let now = 0;
  const instances = createMcpInstances({ logger: silentLogger, clock: () => now++ });
  const generation = {};
  return { instances, generation };
}

const owner = (callerId: string, runId = `${callerId}-run`) => ({ callerId, runId });

describe("MCP server instances", () => {
  it("gives each caller its own instance and keeps it across the caller's runs", async () => {
    const { instances, generation } = setUp();
    const { slot, started } = fakeSlot();
    const seen: Client[] = [];
    const remember = async (client: Client) => void seen.push(client);
    await instances.use(slot, generation, owner("a", "run-1"), remember);
    await instances.use(slot, generation, owner("a", "run-2"), remember);
    await instances.use(slot, generation, owner("b", "run-3"), remember);
    expect(started).toHaveLength(2);
    expect(seen[0]).toBe(seen[1]);
    expect(seen[2]).not.toBe(seen[0]);
    await instances.close();
    expect(started.every((s) => s.closed)).toBe(true);
  });

  it("gives each run its own instance for a server declared scope: run, closed with the run", async () => {
    const { instances, generation } = setUp();
    const { slot, started } = fakeSlot({ scope: "run" });
    await instances.use(slot, generation, owner("a", "run-1"), async () => {});
    await instances.use(slot, generation, owner("a", "run-2"), async () => {});
    expect(started).toHaveLength(2);
    await instances.closeRun("run-1");
    expect(started.map((s) => s.closed)).toEqual([true, false]);
  });

  it("closes the longest-idle instance of a server at its bound, and only that one", async () => {
    const { instances, generation } = setUp();
    const { slot, started } = fakeSlot({ maxInstances: 2 });
    const other = fakeSlot({ name: "other" });
    await instances.use(other.slot, generation, owner("z"), async () => {});
    await instances.use(slot, generation, owner("a"), async () => {});
    await instances.use(slot, generation, owner("b"), async () => {});
    await instances.use(slot, generation, owner("a"), async () => {}); // b is now the longest idle
    await instances.use(slot, generation, owner("c"), async () => {});
    expect(started.map((s) => s.closed)).toEqual([false, true, false]);
    expect(other.started[0]?.closed).toBe(false);
    expect(instances.live).toBe(3);
  });

  it("refuses a new caller, saying why, when every instance of a server is busy", async () => {
    const { instances, generation } = setUp();
    const { slot, started } = fakeSlot({ maxInstances: 1 });
    let release = () => {};
    const busy = instances.use(
      slot,
      generation,
      owner("a"),
      () => new Promise<void>((resolve) => (release = resolve)),
    );
    await eventually("the instance to start", async () => started.length === 1);
    const refused = await instances
      .use(slot, generation, owner("b"), async () => "ran")
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ToolCallError);
    expect((refused as ToolCallError).message).toMatch(
      /limit of 1 instances and every one is busy; try again shortly .*maxInstances/,
    );
    // The busy caller itself is still served by its instance.
    expect(await instances.use(slot, generation, owner("a"), async () => "again")).toBe("again");
    release();
    await busy;
    expect(started).toHaveLength(1);
  });

  it("closes an instance idle for its server's idleTimeoutMs", async () => {
    const { instances, generation } = setUp();
    const { slot, started } = fakeSlot({ idleTimeoutMs: 5 });
    await instances.use(slot, generation, owner("a"), async () => {});
    await eventually("the idle instance to be closed", async () => started[0]?.closed === true);
    expect(instances.live).toBe(0);
    await instances.use(slot, generation, owner("a"), async () => {});
    expect(started).toHaveLength(2);
  });

  it("closes every instance of a revoked caller, in every generation, and no one else's", async () => {
    const { instances, generation } = setUp();
    const later = {};
    const { slot, started } = fakeSlot();
    await instances.use(slot, generation, owner("a"), async () => {});
    await instances.use(slot, later, owner("a"), async () => {});
    await instances.use(slot, generation, owner("b"), async () => {});
    await instances.closeCaller("a");
    expect(started.map((s) => s.closed)).toEqual([true, true, false]);
    await instances.closeGeneration(generation);
    expect(started.map((s) => s.closed)).toEqual([true, true, true]);
  });

  it("starts a fresh instance after one exits on its own or fails to start", async () => {
    const { instances, generation } = setUp();
    let failNext = true;
    const { slot, started } = fakeSlot();
    const flaky: McpServerSlot = {
      ...slot,
      open: (onExit, stop) => {
        if (failNext) {
          failNext = false;
          return Promise.reject(new ToolCallError("failed", "could not be reached"));
        }
        return slot.open(onExit, stop);
      },
    };
    await expect(instances.use(flaky, generation, owner("a"), async () => {})).rejects.toThrow(
      "could not be reached",
    );
    expect(instances.live).toBe(0);
    await instances.use(flaky, generation, owner("a"), async () => {});
    started[0]?.exit();
    await instances.use(flaky, generation, owner("a"), async () => {});
    expect(started).toHaveLength(2);
  });

  it("abandons an instance still starting when its caller is revoked, without waiting for it", async () => {
    const { instances, generation } = setUp();
    let stopped: AbortSignal | undefined;
    // A start that never finishes on its own: only the stop ends it.
    const slot: McpServerSlot = {
      ...fakeSlot().slot,
      open: (_onExit, stop) => {
        stopped = stop;
        return new Promise<Client>((_resolve, reject) => {
          stop.addEventListener("abort", () => reject(new ToolCallError("failed", "stopped")));
        });
      },
    };
    const call = instances.use(slot, generation, owner("a"), async () => {});
    expect(stopped?.aborted).toBe(false);
    await instances.closeCaller("a");
    expect(stopped?.aborted).toBe(true);
    await expect(call).rejects.toThrow("stopped");
    expect(instances.live).toBe(0);
  });

  it("refuses calls once closed", async () => {
    const { instances, generation } = setUp();
    await instances.close();
    await expect(
      instances.use(fakeSlot().slot, generation, owner("a"), async () => {}),
    ).rejects.toThrow("closed");
  });
});

describe("the declaration of an MCP server's instances", () => {
  const declare = (extra: string) =>
    parseToolsPolicy(
      `mcpServers:
  - name: mem
    transport: stdio
    command: /usr/bin/node
    args: []
${extra}`,
      "tools.yaml",
      builtinDescriptors,
    );
  const problemsOf = (extra: string) => {
    try {
      declare(extra);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems.map((p) => p.message).join("\n");
      throw error;
    }
    throw new Error("expected a ConfigError");
  };

  it("defaults to one instance per caller, closed after the default idle time", () => {
    const [server] = declare("").mcpServers;
    expect(server?.scope).toBe("caller");
    expect(server?.idleTimeoutMs).toBeUndefined();
    expect(server?.maxInstances).toBeUndefined();
    const [run] = declare(
      "    scope: run\n    idleTimeoutMs: 1000\n    maxInstances: 4\n",
    ).mcpServers;
    expect(run).toMatchObject({ scope: "run", idleTimeoutMs: 1000, maxInstances: 4 });
  });

  it.each([
    ["scope: process", /scope = "process": expected caller \(one instance per caller.*or run/],
    ["idleTimeoutMs: 10", /idleTimeoutMs = 10: expected milliseconds/],
    ["maxInstances: 0", /maxInstances = 0: expected instances at once, a whole number from 1/],
  ])("refuses %s, saying what to write", (line, expected) => {
    expect(problemsOf(`    ${line}\n`)).toMatch(expected);
  });
});
