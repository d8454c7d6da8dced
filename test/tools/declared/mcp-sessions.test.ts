// A remote MCP server keeps state per MCP session: peergate opens one session per caller, as it
// starts one stdio instance per caller (test/sandbox/mcp-per-caller.security.test.ts), so one
// caller's value never reaches another's session. And an MCP tool called with no caller is
// refused: there is no instance it may use.
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterEach, beforeEach, expect, it } from "vitest";
import { z } from "zod";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import {
  buildPolicies,
  callTool,
  createSandbox,
  expectFailure,
  expectSuccess,
  makeContext,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let runtime: ToolRuntime;
let server: Server;
const servers: McpServer[] = [];

/** A server that remembers per session, as a stateful remote MCP server would. */
function startStatefulServer(): Promise<number> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  server = createServer((req, res) => {
    const id = req.headers["mcp-session-id"];
    const known = typeof id === "string" ? sessions.get(id) : undefined;
    if (known !== undefined) {
      void known.handleRequest(req, res);
      return;
    }
    const values: string[] = [];
    const mcp = new McpServer({ name: "memory", version: "1.0.0" });
    servers.push(mcp);
    mcp.registerTool(
      "remember",
      { description: "Remember a value.", inputSchema: { value: z.string() } },
      async ({ value }) => {
        values.push(value);
        return { content: [{ type: "text", text: "ok" }] };
      },
    );
    mcp.registerTool("recall", { description: "Recall the values." }, async () => ({
      content: [{ type: "text", text: JSON.stringify(values) }],
    }));
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (session) => void sessions.set(session, transport),
    });
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
  );
}

beforeEach(async () => {
  sandbox = await createSandbox();
  const port = await startStatefulServer();
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(
      parseToolsPolicy(
        `mcpServers:\n  - {name: remote, transport: http, url: "http://127.0.0.1:${port}/mcp", tools: {remember: , recall: }}\n`,
        "tools.yaml",
        builtinDescriptors,
      ),
    ),
  });
});

afterEach(async () => {
  await runtime.close();
  await Promise.all(servers.splice(0).map((mcp) => mcp.close()));
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await sandbox.cleanup();
});

const recallText = (content: Record<string, unknown>) =>
  ((content.content as { text: string }[])[0]?.text ?? "").trim();

it("opens one session per caller: a caller recalls its own value, never another's", async () => {
  const a = { callerId: "caller-a", runId: "run-a1" };
  const b = { callerId: "caller-b", runId: "run-b1" };
  expectSuccess(await callTool(runtime, "remote.remember", { value: "secret-of-a" }, undefined, a));
  const later = { ...a, runId: "run-a2" };
  expect(
    recallText(expectSuccess(await callTool(runtime, "remote.recall", {}, undefined, later))),
  ).toBe('["secret-of-a"]');
  expect(
    recallText(expectSuccess(await callTool(runtime, "remote.recall", {}, undefined, b))),
  ).toBe("[]");
});

it("refuses an MCP call that belongs to no caller's run", async () => {
  const tool = runtime.tools.get("remote.recall");
  const { run: _none, ...noCaller } = makeContext(runtime);
  const message = expectFailure(
    (await tool?.execute({}, noCaller)) ?? { ok: true, content: "" },
    "refused",
  );
  expect(message).toContain("runs only in a caller's run");
  expect(servers).toHaveLength(0);
});
