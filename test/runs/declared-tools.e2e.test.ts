// Declared command tools and an MCP server, end to end: the real run engine drives the real tool
// runtime (a fixed command tool and the fixture stdio MCP server from test/tools/fixtures). A
// caller whose allow list names them gets them run; a caller without gets them refused — nothing
// executes, and the refusal is recorded.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type LoadedPolicies, loadPolicies } from "../../src/load-policies.ts";
import { silentLogger } from "../../src/log.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { describeEachDatabase } from "../support/databases.ts";
import {
  insertCaller,
  readToolCalls,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
} from "./support.ts";

const mcpFixture = fileURLToPath(new URL("../tools/fixtures/mcp-server.ts", import.meta.url));

let base: string;
let policies: LoadedPolicies;
let runtime: ToolRuntime;
let startLog: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "peergate-declared-"));
  const policiesDir = path.join(base, "policies");
  const workspace = path.join(base, "workspace");
  startLog = path.join(base, "mcp-starts.log");
  await mkdir(policiesDir, { recursive: true });
  await writeFile(
    path.join(policiesDir, "agent.yaml"),
    [
      "name: declared",
      "description: Serves declared tools",
      'version: "1.0.0"',
      "skills: []",
      "instructions: Use the declared tools.",
      "tools: [custom, mcp, context]",
      "deniedTools: []",
    ].join("\n"),
  );
  await writeFile(
    path.join(policiesDir, "tools.yaml"),
    [
      "commands:",
      "  - name: say",
      "    description: Print the given words.",
      "    mode: fixed",
      `    program: ${JSON.stringify(process.execPath)}`,
      `    args: ["-e", "process.stdout.write('said: ' + process.argv.slice(1).join(' '))"]`,
      "    risk: read-only",
      "    disclosure: public",
      "    egress: false",
      "mcpServers:",
      "  - name: fixture",
      "    transport: stdio",
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: [${JSON.stringify(mcpFixture)}, ${JSON.stringify(startLog)}]`,
      "    tools:",
      "      echo: {description: Echo text., risk: low-risk, disclosure: public, egress: false}",
    ].join("\n"),
  );
  policies = await loadPolicies(policiesDir);
  runtime = await createToolRuntime({
    policies,
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    logger: silentLogger,
  });
});

afterAll(async () => {
  await runtime?.close();
  await rm(base, { recursive: true, force: true });
});

describeEachDatabase("declared command tools and MCP tools in runs", (ctx) => {
  afterEach(stopEngines);

  const calls = [
    { id: "c_say", name: "say", input: { arguments: ["hello; rm -rf /", "$(id)"] } },
    { id: "c_echo", name: "fixture_echo", input: { text: "ping" } },
  ];

  it("runs them for a caller whose allow list names them", async () => {
    const model = scriptModel([{ calls }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      options: { policies, tools: runtime, workspace: runtime.workspace ?? base },
    });
    const caller = await insertCaller(ctx.database, {
      tier: "public",
      allow: ["say", "fixture.echo"],
    });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome.status).toBe("completed");
    // MCP names (`server.tool`) are offered under a provider-safe spelling and mapped back.
    expect(model.offered(0)).toEqual(expect.arrayContaining(["fixture_echo", "say"]));
    const results = model.toolResults(1).join("\n");
    // argv stays literal: the shell metacharacters are just words.
    expect(results).toContain("said: hello; rm -rf / $(id)");
    expect(results).toContain("echo: ping");
    const rows = await readToolCalls(ctx.database, runId);
    expect(rows.get("c_say")?.status).toBe("completed");
    expect(rows.get("c_echo")?.status).toBe("completed");
  });

  it("refuses them, without starting anything, for a caller whose allow list does not", async () => {
    const before = await readFile(startLog, "utf8").catch(() => "");
    const model = scriptModel([{ calls }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      options: { policies, tools: runtime, workspace: runtime.workspace ?? base },
    });
    // `say` is read-only, non-egress, public: the tier admits it. `fixture.echo` is low-risk: it
    // needs the allow list, which this caller does not have.
    const caller = await insertCaller(ctx.database, { tier: "public", allow: [] });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome.status).toBe("completed");
    expect(model.offered(0)).toContain("say");
    expect(model.offered(0)).not.toContain("fixture_echo");
    const rows = await readToolCalls(ctx.database, runId);
    expect(rows.get("c_say")?.status).toBe("completed");
    expect(rows.get("c_echo")?.status).toBe("refused");
    expect(model.toolResults(1).join("\n")).not.toContain("echo: ping");
    // The refused call did not even start an MCP server that was not already running.
    const after = await readFile(startLog, "utf8").catch(() => "");
    expect(after).toBe(before);
  });
});
