// A stdio MCP server runs in the sandbox like any other process: the runtime wraps its argv for
// the SDK's transport. The fixture server (one file, Node built-ins only) reports what it can
// see; it must not see the data dir, the server's /proc or environment, or a host listener when
// its tools are declared without egress.
import { chmod, mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { buildPolicies, callTool, expectSuccess, silentLogger } from "../tools/support.ts";
import { bwrapBackend, describeWithBwrap, giveToSandboxUser, snapshotTree } from "./support.ts";

const fixture = fileURLToPath(new URL("./fixtures/bare-mcp-server.mjs", import.meta.url));
const adminToken = `admin-${"m".repeat(40)}`;

let base: string;
let workspace: string;
let dataDir: string;
let runtime: ToolRuntime;
let listener: Server;
let port: number;
let connections = 0;

describeWithBwrap("a stdio MCP server in the bwrap sandbox", () => {
  beforeAll(async () => {
    base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-sandbox-mcp-")));
    workspace = path.join(base, "workspace");
    dataDir = path.join(base, "data");
    await mkdir(workspace, { recursive: true });
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, "admin-token"), adminToken);
    await chmod(base, 0o755);
    await giveToSandboxUser(workspace);
    listener = createServer((socket) => {
      connections++;
      socket.end();
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    port = (listener.address() as { port: number }).port;
    runtime = await createToolRuntime({
      policies: buildPolicies(
        parseToolsPolicy(
          `mcpServers:
  - name: bare
    transport: stdio
    command: /usr/bin/node
    args: [${JSON.stringify(fixture)}]
    envAllowlist: [LISTED_SETTING]
    tools:
      probe: {description: Probe., risk: read-only, disclosure: public, egress: false}
`,
          "tools.yaml",
          builtinDescriptors,
        ),
      ),
      workspace,
      dataDir,
      env: {
        PATH: "/usr/bin:/bin",
        LISTED_SETTING: "listed",
        UNLISTED_SETTING: "unlisted",
        PEERGATE_ADMIN_TOKEN: adminToken,
      },
      sandbox: bwrapBackend,
      logger: silentLogger,
    });
  });

  afterAll(async () => {
    await runtime?.close();
    await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
    if (base) await rm(base, { recursive: true, force: true });
  });

  it("sees only the workspace, its allowlisted environment and no network", async () => {
    const before = await snapshotTree(workspace);
    const result = expectSuccess(
      await callTool(runtime, "bare.probe", {
        paths: [
          path.join(dataDir, "admin-token"),
          "../data/admin-token",
          `/proc/${process.pid}/environ`,
          "/root",
          "/home",
          workspace,
        ],
        port,
      }),
    );
    const text = (result.content as { text: string }[])[0]?.text ?? "";
    expect(text).not.toContain(adminToken);
    const report = JSON.parse(text) as {
      reads: Record<string, string>;
      env: string[];
      pid1Environ: string;
      connect: string;
    };
    expect(report.reads[path.join(dataDir, "admin-token")]).toBe("error: ENOENT");
    expect(report.reads["../data/admin-token"]).toBe("error: ENOENT");
    expect(report.reads[`/proc/${process.pid}/environ`]).toBe("error: ENOENT");
    expect(report.reads["/root"]).toBe("error: ENOENT");
    expect(report.reads["/home"]).toBe("error: ENOENT");
    expect(report.reads[workspace]).toMatch(/^dir: /);
    expect(report.env).toContain("LISTED_SETTING");
    expect(report.env).not.toContain("UNLISTED_SETTING");
    expect(report.env).not.toContain("PEERGATE_ADMIN_TOKEN");
    // The SDK adds HOME, USER … of this process to the launcher's environment; they are
    // overridden, so PID 1 shows nothing of the server.
    expect(report.pid1Environ).not.toContain("/root");
    expect(report.pid1Environ).not.toContain(adminToken);
    expect(report.connect).not.toBe("connected");
    expect(connections).toBe(0);
    expect(await snapshotTree(workspace)).toEqual(before);
  });
});
