// The stdio transport peergate spawns MCP servers with (src/tools/declared/mcp-stdio.ts), under
// the `none` backend: it reads the SDK's framing (one JSON-RPC message a line, a bad line
// skipped and reported, as the SDK's own stdio transport does), and its close ends the server
// even when the server ignores the end of its stdin and SIGTERM.
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { createNoneBackend } from "../../../src/sandbox/none.ts";
import { defaultSandboxLimits } from "../../../src/sandbox/types.ts";
import { SandboxedStdioTransport } from "../../../src/tools/declared/mcp-stdio.ts";
import { eventually } from "../../support/eventually.ts";

const backend = createNoneBackend();

function transportFor(script: string): SandboxedStdioTransport {
  return new SandboxedStdioTransport({
    command: backend.wrap({
      argv: [process.execPath, "-e", script],
      workspace: process.cwd(),
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      egress: false,
      limits: defaultSandboxLimits,
    }),
    backend,
    graceMs: 100,
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("the sandboxed stdio transport", () => {
  it("reads one message a line, skipping and reporting a line that is not one", async () => {
    const transport = transportFor(
      `process.stdout.write("not json\\n" + JSON.stringify({jsonrpc: "2.0", method: "notifications/hello"}) + "\\n"); setInterval(() => {}, 1000);`,
    );
    const messages: JSONRPCMessage[] = [];
    const errors: Error[] = [];
    transport.onmessage = (message) => messages.push(message);
    transport.onerror = (error) => errors.push(error);
    await transport.start();
    await eventually("the message", () => messages.length === 1);
    expect(messages[0]).toMatchObject({ method: "notifications/hello" });
    expect(errors).toHaveLength(1);
    await transport.close();
  });

  it("ends a server that ignores the end of its stdin and SIGTERM, and says it closed", async () => {
    const transport = transportFor(
      `process.on("SIGTERM", () => {}); process.stdin.resume(); process.stdin.on("end", () => {}); console.log(JSON.stringify({jsonrpc: "2.0", method: "notifications/pid", params: {pid: process.pid}})); setInterval(() => {}, 1000);`,
    );
    let pid: number | undefined;
    let closed = false;
    transport.onmessage = (message) => {
      pid = (message as { params?: { pid?: number } }).params?.pid;
    };
    transport.onclose = () => {
      closed = true;
    };
    await transport.start();
    const server = await eventually("the server's pid", () => pid);
    await transport.close();
    await eventually("the server to be gone", () => !alive(server));
    await eventually("onclose", () => closed);
  });
});
