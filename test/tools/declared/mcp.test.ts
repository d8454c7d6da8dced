// MCP tools end to end with a real stdio server (test/tools/fixtures/mcp-server.ts): connected
// lazily on first use, named server.tool, results nested as data and bounded, errors and
// approval-shaped output turned into failures, and the server stopped by close().
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import { eventually } from "../../support/eventually.ts";
import {
  baseEnv,
  buildPolicies,
  callTool,
  createSandbox,
  expectFailure,
  expectSuccess,
  type Sandbox,
  startRuntime,
} from "../support.ts";

const fixture = fileURLToPath(new URL("../fixtures/mcp-server.ts", import.meta.url));

let sandbox: Sandbox;
let runtime: ToolRuntime;
let startLog: string;

beforeEach(async () => {
  sandbox = await createSandbox();
  startLog = path.join(sandbox.base, "starts.log");
  const toolsPolicy = parseToolsPolicy(
    `mcpServers:
  - name: fixture
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(fixture)}, ${JSON.stringify(startLog)}]
    tools:
      echo: {description: Echo text., risk: read-only, disclosure: public, egress: false}
      whoami:
      approval:
      approval_text:
      fail:
      big:
      image:
`,
    "tools.yaml",
    builtinDescriptors,
  );
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(toolsPolicy),
    env: baseEnv({ MCP_SECRET_TOKEN: "leak", SOME_SETTING: "x" }),
  });
});

afterEach(async () => {
  await runtime.close();
  await sandbox.cleanup();
});

async function starts(): Promise<number[]> {
  const text = await readFile(startLog, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("an MCP server over stdio", () => {
  it("offers exactly the policy's tools, namespaced, and starts the server only on first call", async () => {
    const names = [...runtime.tools.keys()].filter((n) => n.startsWith("fixture."));
    expect(names.sort()).toEqual(
      ["approval", "approval_text", "big", "echo", "fail", "image", "whoami"].map(
        (t) => `fixture.${t}`,
      ),
    );
    expect(runtime.tools.has("fixture.unlisted")).toBe(false);
    expect(runtime.tools.get("fixture.echo")?.description).toBe("Echo text.");
    expect(await starts()).toEqual([]);

    const result = expectSuccess(await callTool(runtime, "fixture.echo", { text: "hi" }));
    expect(result).toEqual({ content: [{ type: "text", text: "echo: hi" }] });
    expect((await starts()).length).toBe(1);
    expectSuccess(await callTool(runtime, "fixture.echo", { text: "again" }));
    expect((await starts()).length).toBe(1);
  });

  it("starts the server in the workspace with only a few harmless variables", async () => {
    const result = expectSuccess(await callTool(runtime, "fixture.whoami", {}));
    const info = JSON.parse((result.content as { text: string }[])[0]?.text ?? "{}");
    expect(info.cwd).toBe(sandbox.workspace);
    expect(info.env).not.toContain("MCP_SECRET_TOKEN");
    expect(info.env).not.toContain("SOME_SETTING");
    expect(info.env).toContain("PATH");
  });

  it("turns approval-shaped output into an error, whether structured or inside text", async () => {
    for (const tool of ["fixture.approval", "fixture.approval_text"]) {
      const result = await callTool(runtime, tool, {});
      expect((result as { kind?: string }).kind).toBeUndefined();
      expect(expectFailure(result, "refused")).toContain("approval request");
    }
  });

  it("reports a tool error as a failed call", async () => {
    expect(expectFailure(await callTool(runtime, "fixture.fail", {}), "failed")).toContain("boom");
  });

  it("bounds large results and summarises binary parts", async () => {
    const big = await callTool(runtime, "fixture.big", {});
    expect(big).toMatchObject({ ok: true, truncated: true });
    expect(JSON.stringify(expectSuccess(big)).length).toBeLessThanOrEqual(256 * 1024);
    const image = expectSuccess(await callTool(runtime, "fixture.image", {}));
    expect(image.content).toEqual([
      { type: "image", mimeType: "image/png", bytes: 16, note: "binary content not shown" },
    ]);
  });

  it("forwards arguments to the server, which validates them", async () => {
    const result = await callTool(runtime, "fixture.echo", { wrong: 1 });
    expect(result).toMatchObject({ ok: false, code: "failed" });
  });

  it("stops the server on close(), and close() is idempotent", async () => {
    expectSuccess(await callTool(runtime, "fixture.echo", { text: "x" }));
    const [pid] = await starts();
    expect(pid !== undefined && isAlive(pid)).toBe(true);
    await runtime.close();
    await runtime.close();
    expect(pid).toBeDefined();
    await eventually("the MCP server process to be gone", () => !isAlive(pid as number));
    expectFailure(await callTool(runtime, "fixture.echo", { text: "x" }), "failed");
  });
});

describe("an MCP server that cannot be reached", () => {
  it("fails each call with a tool error instead of hanging or throwing", async () => {
    const toolsPolicy = parseToolsPolicy(
      `mcpServers:
  - {name: broken, transport: stdio, command: /nonexistent/mcp-server, tools: {x: }}
`,
      "tools.yaml",
      builtinDescriptors,
    );
    const broken = await startRuntime(sandbox, { policies: buildPolicies(toolsPolicy) });
    try {
      expectFailure(await callTool(broken, "broken.x", {}), "failed");
      expectFailure(await callTool(broken, "broken.x", {}), "failed");
    } finally {
      await broken.close();
    }
  });
});

describe("an MCP server over streamable HTTP (loopback)", () => {
  it("connects lazily on first call and returns the result as data", async () => {
    const mcp = new McpServer({ name: "http-fixture", version: "1.0.0" });
    mcp.registerTool(
      "shout",
      { description: "Upper-cases text.", inputSchema: { text: z.string() } },
      async ({ text }) => ({
        content: [{ type: "text", text: text.toUpperCase() }],
      }),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
    await mcp.connect(transport);
    let requests = 0;
    const server = createServer((req, res) => {
      requests++;
      void transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const toolsPolicy = parseToolsPolicy(
      `mcpServers:\n  - {name: remote, transport: http, url: "http://127.0.0.1:${port}/mcp", tools: {shout: }}\n`,
      "tools.yaml",
      builtinDescriptors,
    );
    const remote = await startRuntime(sandbox, { policies: buildPolicies(toolsPolicy) });
    try {
      expect(requests).toBe(0);
      const result = expectSuccess(await callTool(remote, "remote.shout", { text: "quiet" }));
      expect(result).toEqual({ content: [{ type: "text", text: "QUIET" }] });
      expect(requests).toBeGreaterThan(0);
    } finally {
      await remote.close();
      await mcp.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
