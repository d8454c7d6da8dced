// What an MCP server instance per caller costs: `npm exec -- node bench/mcp-instances.ts [--callers N]`.
// Runs a small stdio MCP server (test/sandbox/fixtures/memory-mcp-server.mjs, Node built-ins
// only) through the real tool runtime, plainly (PEERGATE_SANDBOX=none) and through bubblewrap when
// it works here. For each of N callers it times the caller's first call (start the instance,
// MCP handshake, call) and then a second call (the warm instance), and reads the resident memory
// of the processes one instance holds. Prints a markdown table. Nothing leaves the machine.
import { mkdir, mkdtemp, readdir, readFile, realpath, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createLogger } from "../src/log.ts";
import { listPolicyTools, parseToolsPolicy } from "../src/policy/policy-files.ts";
import { createInventory } from "../src/policy/tools.ts";
import { createBwrapBackend } from "../src/sandbox/bwrap.ts";
import { createNoneBackend } from "../src/sandbox/none.ts";
import { probeSandbox } from "../src/sandbox/probe.ts";
import type { SandboxBackend } from "../src/sandbox/types.ts";
import { builtinDescriptors } from "../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../src/tools/runtime.ts";
import type { ToolRuntime } from "../src/tools/types.ts";

const { values } = parseArgs({ options: { callers: { type: "string", default: "20" } } });
const callers = Number(values.callers);
const fixture = fileURLToPath(
  new URL("../test/sandbox/fixtures/memory-mcp-server.mjs", import.meta.url),
);
const marker = `bench-mcp-${process.pid}`;
const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-bench-mcp-")));
const workspace = path.join(base, "workspace");
await mkdir(workspace, { recursive: true });

const toolsPolicy = parseToolsPolicy(
  `mcpServers:
  - name: mem
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(fixture)}, ${marker}]
    maxInstances: ${callers + 1}
    tools:
      recall: {description: Recall., risk: read-only, disclosure: public, egress: false}
`,
  "tools.yaml",
  builtinDescriptors,
);
const built = createInventory(listPolicyTools(toolsPolicy, builtinDescriptors), "bench");
if (!built.ok) throw new Error("inventory");
const inventory = built.inventory;

/** Resident memory (KiB) of every process whose command line carries the marker. */
async function residentKib(): Promise<{ processes: number; kib: number }> {
  let processes = 0;
  let kib = 0;
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!(await readFile(`/proc/${name}/cmdline`, "utf8")).includes(marker)) continue;
      const status = await readFile(`/proc/${name}/status`, "utf8");
      processes += 1;
      kib += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    } catch {
      // Gone while we looked.
    }
  }
  return { processes, kib };
}

const median = (times: number[]) =>
  [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)] ?? 0;
const worst = (times: number[]) => Math.max(...times);

async function measure(label: string, sandbox: SandboxBackend): Promise<string[]> {
  const runtime: ToolRuntime = await createToolRuntime({
    policies: { inventory, toolsPolicy },
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: process.env.PATH },
    sandbox,
    logger: createLogger({ level: "silent", write: () => {} }),
  });
  const tool = runtime.tools.get("mem.recall");
  if (tool === undefined) throw new Error("no mem.recall");
  const callAs = async (callerId: string) => {
    const started = performance.now();
    const result = await tool.execute(
      {},
      {
        signal: new AbortController().signal,
        workspace: runtime.workspace ?? workspace,
        callId: "bench",
        now: () => new Date(),
        run: { callerId, runId: `${callerId}-run` },
      },
    );
    if (!("ok" in result) || !result.ok) throw new Error(JSON.stringify(result));
    return performance.now() - started;
  };
  const first: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < callers; i++) {
    first.push(await callAs(`caller-${i}`));
    warm.push(await callAs(`caller-${i}`));
  }
  const memory = await residentKib();
  await runtime.close();
  const perCaller = (n: number) => (n / callers).toFixed(1);
  return [
    `| ${label} | first call of a caller (starts its instance) | ${callers} | ${median(first).toFixed(1)} | ${worst(first).toFixed(1)} |`,
    `| ${label} | a later call of the same caller | ${callers} | ${median(warm).toFixed(1)} | ${worst(warm).toFixed(1)} |`,
    `| ${label} | per live instance: ${perCaller(memory.processes)} processes, ${perCaller(memory.kib / 1024)} MiB resident | | | |`,
  ];
}

const rows = await measure("none", createNoneBackend());
const bwrap = createBwrapBackend();
const probe = await probeSandbox(bwrap);
if (probe.ok) rows.push(...(await measure("bwrap", bwrap)));
else rows.push(`| bwrap | skipped: ${probe.problem} | | | |`);
await rm(base, { recursive: true, force: true });

console.log(
  `MCP server instance per caller (${os.cpus().length} CPUs, load ${os.loadavg()[0]?.toFixed(1)})`,
);
console.log("");
console.log("| sandbox | what | calls | median ms | worst ms |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(row);
