// A stdio MCP server's sandbox ends on every stop, whatever became of its outer bwrap. The
// sandbox's PID 1 arms --die-with-parent only at the end of its setup (orphaned-sandbox.test.ts
// says why that matters): an MCP server's PID 1 must be killed by its own pid too, which only a
// spawn that asks bwrap for it (--json-status-fd) knows.
//
// The server here will not stop on its own (test/sandbox/fixtures/stubborn-mcp-server.mjs: it
// ignores SIGTERM and the end of its stdin, and keeps a `sleep` of its own in a new session).
// Its sandbox is started through a bwrap that drops --die-with-parent (the window, made to
// last); then it is stopped by each path that stops an instance — its caller's revocation, its
// run's end, a policy reload, shutdown, a forced exit of the server, its outer bwrap killed
// under it — and no process of it may be left. Last, stops land at every moment of real
// sandboxes' start (a stop while an instance starts abandons the start and kills it at once).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import type { SandboxBackend } from "../../src/sandbox/types.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createMcpInstances, type McpInstances } from "../../src/tools/declared/mcp-instances.ts";
import { mcpLimits } from "../../src/tools/declared/mcp-tools.ts";
import { killCommandGroups } from "../../src/tools/run-process.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { eventually } from "../support/eventually.ts";
import { buildPolicies, callTool, expectSuccess, silentLogger } from "../tools/support.ts";
import {
  alive,
  backendWithoutDieWithParent,
  bwrapBackend,
  commandName,
  descendantsOf,
  describeWithBwrap,
  hostProcessesWith,
  inSandbox,
  makeSandboxWorkspace,
  parentOf,
} from "./support.ts";

const fixture = fileURLToPath(new URL("./fixtures/stubborn-mcp-server.mjs", import.meta.url));
const owner = { callerId: "caller-mcp", runId: "run-mcp" };

/** Processes of a failing test's sandbox, killed after the suite whatever happened. */
const survivors: number[] = [];

function uniqueMarker(): string {
  return `peergate-mcp-orphan-${randomBytes(6).toString("hex")}`;
}

type Started = { runtime: ToolRuntime; instances: McpInstances; marker: string };

describeWithBwrap("an MCP server's sandbox", () => {
  let workspace: string;
  let dataDir: string;
  let wrapperDir: string;
  let wrapped: SandboxBackend;
  const closeGraceMs = mcpLimits.closeGraceMs;
  const runtimes: ToolRuntime[] = [];

  beforeAll(async () => {
    workspace = await makeSandboxWorkspace("peergate-mcp-orphan-");
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-mcp-orphan-data-"));
    ({ backend: wrapped, dir: wrapperDir } = await backendWithoutDieWithParent());
    // A stubborn server is given 200 ms after its stdin closes and again after SIGTERM.
    mcpLimits.closeGraceMs = 200;
  });

  afterAll(async () => {
    mcpLimits.closeGraceMs = closeGraceMs;
    for (const runtime of runtimes) await runtime.close().catch(() => undefined);
    for (const pid of survivors) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    if (workspace) await rm(workspace, { recursive: true, force: true });
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    if (wrapperDir) await rm(wrapperDir, { recursive: true, force: true });
  });

  /** A tool runtime declaring the stubborn server, with `marker` in its command line. */
  async function start(backend: SandboxBackend, scope: "caller" | "run"): Promise<Started> {
    const marker = uniqueMarker();
    const instances = createMcpInstances({ logger: silentLogger });
    const runtime = await createToolRuntime({
      policies: buildPolicies(
        parseToolsPolicy(
          `mcpServers:
  - name: stubborn
    transport: stdio
    command: /usr/bin/node
    args: [${JSON.stringify(fixture)}, ${marker}]
    scope: ${scope}
    tools:
      ping: {description: Ping., risk: read-only, disclosure: public, egress: false}
`,
          "tools.yaml",
          builtinDescriptors,
        ),
      ),
      workspace,
      dataDir,
      env: { PATH: "/usr/bin:/bin" },
      sandbox: backend,
      logger: silentLogger,
      mcpInstances: instances,
    });
    runtimes.push(runtime);
    return { runtime, instances, marker };
  }

  /** The running server's sandbox (its PID 1 first), with the server and its `sleep` in it. */
  async function runningSandbox(marker: string): Promise<number[]> {
    const server = await eventually("the sandboxed server to run", async () => {
      for (const pid of await hostProcessesWith(marker)) {
        if (inSandbox(pid) && (await commandName(pid)) === "node") return pid;
      }
      return undefined;
    });
    const init = parentOf(server) as number;
    expect(await commandName(init)).toBe("bwrap");
    const sandbox = [init, ...descendantsOf(init)];
    survivors.push(...sandbox);
    expect(sandbox.length).toBeGreaterThanOrEqual(3);
    return sandbox;
  }

  async function expectNothingLeft(marker: string, sandbox: readonly number[]): Promise<void> {
    await eventually(
      "every process of the server's sandbox to be gone",
      async () => (await hostProcessesWith(marker)).length === 0 && !sandbox.some(alive),
      { withinMs: 15_000 },
    );
  }

  const stops: [string, "caller" | "run", (started: Started) => Promise<unknown> | unknown][] = [
    ["its caller's revocation", "caller", ({ runtime }) => runtime.releaseCaller?.(owner.callerId)],
    [
      "the end of its run's segment (scope: run)",
      "run",
      ({ runtime }) => runtime.releaseRun?.(owner.runId),
    ],
    ["a policy reload (its tool runtime closes)", "caller", ({ runtime }) => runtime.close()],
    ["shutdown", "caller", ({ instances }) => instances.close()],
    ["a forced exit of the server", "caller", () => expect(killCommandGroups()).toBe(1)],
    [
      "nothing: its outer bwrap is killed under it",
      "caller",
      async ({ marker }) => {
        const init = (await runningSandbox(marker))[0] as number;
        process.kill(parentOf(init) as number, "SIGKILL");
      },
    ],
  ];

  for (const [name, scope, stop] of stops) {
    it(`is gone after ${name}, though its PID 1 never armed --die-with-parent`, async () => {
      const started = await start(wrapped, scope);
      const result = expectSuccess(
        await callTool(started.runtime, "stubborn.ping", {}, undefined, owner),
      );
      expect(JSON.stringify(result)).toContain("pong");
      const sandbox = await runningSandbox(started.marker);
      await stop(started);
      await expectNothingLeft(started.marker, sandbox);
    });
  }

  // The real bwrap: stops (a revocation) landing at every moment of the server's start, from the
  // launcher's first instructions to a connected server. Whatever the moment, nothing is left.
  it("leaves nothing when revocations land while its sandboxes start (the real --die-with-parent)", async () => {
    const { runtime, marker } = await start(bwrapBackend, "caller");
    // How long a start takes here and now, so the stops are spread over all of it however
    // loaded the machine is (the last ones land on a connected server).
    const began = performance.now();
    expectSuccess(await callTool(runtime, "stubborn.ping", {}, undefined, owner));
    const startMs = performance.now() - began;
    await runtime.releaseCaller?.(owner.callerId);
    const rounds = 30;
    for (let i = 0; i < rounds; i++) {
      const call = callTool(runtime, "stubborn.ping", {}, undefined, owner);
      await pause(Math.round(((i % 15) / 14) * startMs * 1.2));
      await runtime.releaseCaller?.(owner.callerId);
      await call;
    }
    await eventually(
      "every sandbox of the server to be gone",
      async () => {
        const left = await hostProcessesWith(marker);
        survivors.push(...left);
        return left.length === 0;
      },
      { withinMs: 15_000 },
    );
  }, 240_000);
});
