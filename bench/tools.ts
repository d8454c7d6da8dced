// Tool runtime benchmark: `npm exec -- node bench/tools.ts`. Prints a markdown table of median
// wall times for the calls a run makes most, on a generated workspace in a temp directory
// (2 000 files in 100 directories, one 10 MB text file). Loopback only; nothing leaves the
// machine. The numbers say what a call costs on top of the model's latency.
import { chmod, chown, mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { createLogger } from "../src/log.ts";
import { listPolicyTools } from "../src/policy/policy-files.ts";
import { createInventory } from "../src/policy/tools.ts";
import { createBwrapBackend } from "../src/sandbox/bwrap.ts";
import { createNoneBackend } from "../src/sandbox/none.ts";
import { probeSandbox } from "../src/sandbox/probe.ts";
import type { SandboxBackend } from "../src/sandbox/types.ts";
import { checkCommandDenylist } from "../src/shell/denylist.ts";
import { assessShellRisk } from "../src/shell/risk.ts";
import { scanShell } from "../src/shell/scan.ts";
import { builtinDescriptors } from "../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../src/tools/runtime.ts";
import type { ToolCallContext, ToolRuntime } from "../src/tools/types.ts";

const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-bench-tools-")));
const workspace = path.join(base, "workspace");
for (let d = 0; d < 100; d++) {
  const dir = path.join(workspace, `pkg${d}`, "src");
  await mkdir(dir, { recursive: true });
  for (let f = 0; f < 20; f++) {
    const body = Array.from(
      { length: 50 },
      (_, i) => `export const v${i} = ${d * f + i}; // line ${i}`,
    );
    if (f === 7) body.push("// TODO: the needle");
    await writeFile(path.join(dir, `file${f}.ts`), `${body.join("\n")}\n`);
  }
}
await writeFile(path.join(workspace, "big.log"), `${"x".repeat(99)}\n`.repeat(100_000));

const server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "text/plain" });
  res.end("hello");
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const port = (server.address() as AddressInfo).port;

const built = createInventory(
  listPolicyTools({ commands: [], mcpServers: [] }, builtinDescriptors),
  "bench",
);
if (!built.ok) throw new Error("inventory");
const startedAt = performance.now();
const runtime: ToolRuntime = await createToolRuntime({
  policies: { inventory: built.inventory, toolsPolicy: { commands: [], mcpServers: [] } },
  workspace,
  dataDir: path.join(base, "data"),
  env: { PATH: process.env.PATH },
  webFetch: {
    resolve: async () => [{ address: "127.0.0.1", family: 4 }],
    allowAddresses: ["127.0.0.1"],
  },
  logger: createLogger({ level: "silent", write: () => {} }),
});
const startMs = performance.now() - startedAt;

const invocation: ToolCallContext = {
  signal: new AbortController().signal,
  workspace: runtime.workspace ?? "",
  callId: "bench",
  now: () => new Date(),
};

async function measure(label: string, runs: number, call: () => Promise<unknown>): Promise<string> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const result = (await call()) as { ok?: boolean; kind?: string };
    times.push(performance.now() - t);
    if (result.ok === false) throw new Error(`${label} failed: ${JSON.stringify(result)}`);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  return `| ${label} | ${runs} | ${median.toFixed(2)} | ${(times.at(-1) ?? 0).toFixed(2)} |`;
}

function call(name: string, args: unknown) {
  const tool = runtime.tools.get(name);
  if (tool === undefined) throw new Error(name);
  return () => tool.execute(tool.inputSchema.parse(args), invocation);
}

const rows = [
  await measure(
    "read_file, 2000-line window of a 10 MB file",
    20,
    call("read_file", { path: "big.log" }),
  ),
  await measure(
    "read_file, lines 90 000-90 100 of it",
    10,
    call("read_file", { path: "big.log", offset: 90_000, limit: 100 }),
  ),
  await measure("ls, 100 entries", 20, call("ls", {})),
  await measure("find *.ts over 2 200 entries", 10, call("find", { pattern: "*.ts", limit: 1000 })),
  await measure("grep TODO over 2 000 files", 10, call("grep", { pattern: "TODO", glob: "*.ts" })),
  await measure("stat", 50, call("stat", { path: "pkg1/src/file1.ts" })),
  await measure(
    "write_file proposal (diff of a 50-line file)",
    20,
    call("write_file", { path: "pkg1/src/file1.ts", content: "changed\n" }),
  ),
  await measure(
    "execute_command proposal (denylist + floor)",
    20,
    call("execute_command", { program: "sh", args: ["-c", "ls | wc -l"] }),
  ),
  await measure(
    "web_fetch on loopback",
    20,
    call("web_fetch", { url: `http://bench.test:${port}/` }),
  ),
  await measure("assessShellRisk, one-line script", 50, async () =>
    assessShellRisk("grep -rn x src | sort > /dev/null", "unknown"),
  ),
];

// The bash reader, per script: one parse, the floor on it, and the denylist on `sh -c script`,
// over scripts of the kinds models send (median of batches; each row is per script). Before the
// one reader, the floor cost 4.5-8.9 ms per script (sh-syntax instantiated per parse) and the hand
// lexer 0.003 ms; measured side by side in one run in the commit that brought tree-sitter in.
const scripts = [
  "ls -la",
  "git status --short",
  "grep -rn 'TODO' src | sort | head -20",
  'for f in *.ts; do wc -l "$f"; done > /dev/null',
  "npm test -- --reporter=dot 2>&1 && echo ok || echo failed",
  'find . -name "*.log" -mtime +7 -print | xargs -r rm -f',
];
async function perScript(label: string, rounds: number, run: (script: string) => unknown) {
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    for (const script of scripts) await run(script);
    times.push((performance.now() - t) / scripts.length);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  return `| ${label} | ${rounds * scripts.length} | ${median.toFixed(3)} | ${(times.at(-1) ?? 0).toFixed(3)} |`;
}
rows.push(
  await perScript("shell: parse (tree-sitter bash)", 200, (s) => scanShell(s)),
  await perScript("shell: parse + floor", 200, (s) => assessShellRisk(s, "unknown")),
  await perScript("shell: denylist of sh -c script", 200, (s) =>
    checkCommandDenylist("sh", ["-c", s]),
  ),
);
// ---------------------------------------------------------------- the sandbox's start cost
// One declared command tool running /usr/bin/true, spawned plainly (PEERGATE_SANDBOX=none) and
// through bubblewrap: the difference of the medians is what confinement adds to every command.
const trueTool = {
  name: "run_true",
  description: "Runs true.",
  mode: "fixed" as const,
  program: "/usr/bin/true",
  args: [],
  risk: "read-only" as const,
  disclosure: "public" as const,
  egress: false,
};
async function measureCommand(label: string, backend: SandboxBackend): Promise<number> {
  const toolsPolicy = { commands: [trueTool], mcpServers: [] };
  const inventory = createInventory(
    listPolicyTools(toolsPolicy, builtinDescriptors),
    "bench-sandbox",
  );
  if (!inventory.ok) throw new Error("inventory");
  const commands = await createToolRuntime({
    policies: { inventory: inventory.inventory, toolsPolicy },
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: process.env.PATH },
    sandbox: backend,
    logger: createLogger({ level: "silent", write: () => {} }),
  });
  const tool = commands.tools.get("run_true");
  if (tool === undefined) throw new Error("run_true");
  const times: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t = performance.now();
    const result = (await tool.execute({ arguments: [] }, invocation)) as { ok?: boolean };
    times.push(performance.now() - t);
    if (result.ok === false) throw new Error(`${label} failed: ${JSON.stringify(result)}`);
  }
  await commands.close();
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  rows.push(`| ${label} | 30 | ${median.toFixed(2)} | ${(times.at(-1) ?? 0).toFixed(2)} |`);
  return median;
}
const plain = await measureCommand("command `true`, PEERGATE_SANDBOX=none", createNoneBackend());
const bwrap = createBwrapBackend();
// A root server runs commands as the workspace's owner and refuses a root-owned workspace.
if (process.geteuid?.() === 0) {
  await chmod(base, 0o755);
  await chown(workspace, 65534, 65534);
}
const probe = await probeSandbox(bwrap, { workspace });
let sandboxNote = "";
if (probe.ok) {
  const confined = await measureCommand("command `true`, PEERGATE_SANDBOX=bwrap", bwrap);
  rows.push(
    `| sandbox start cost added per command (bwrap − none; target < 15) | 30 | ${(confined - plain).toFixed(2)} | - |`,
  );
} else {
  sandboxNote = `\nbwrap not measured: ${probe.problem}\n`;
}

// ---------------------------------------------------------------- declared shell tools
// A chain of three stages and a script tool (src/tools/declared/), beside execute_command's
// hidden half running the same pipeline through `sh -c`: what parsing, resolving, checking and
// spawning each stage on its own costs next to one shell. Same backend for all three (none).
{
  await mkdir(path.join(workspace, "scripts"), { recursive: true });
  await writeFile(path.join(workspace, "scripts", "count.sh"), "ls | tr a-z A-Z | wc -l\n");
  const toolsPolicy = {
    commands: [
      {
        name: "bench_chain",
        description: "A three-stage chain.",
        mode: "chain" as const,
        programs: ["ls", "tr", "wc"],
        risk: "read-only" as const,
        disclosure: "public" as const,
        egress: false,
      },
      {
        name: "bench_script",
        description: "A script.",
        mode: "script" as const,
        script: "scripts/count.sh",
        interpreter: "/bin/sh",
        args: [],
        risk: "read-only" as const,
        disclosure: "public" as const,
        egress: false,
      },
    ],
    mcpServers: [],
  };
  const inventory = createInventory(
    listPolicyTools(toolsPolicy, builtinDescriptors),
    "bench-declared",
  );
  if (!inventory.ok) throw new Error("inventory");
  const declared = await createToolRuntime({
    policies: { inventory: inventory.inventory, toolsPolicy },
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: process.env.PATH },
    sandbox: createNoneBackend(),
    logger: createLogger({ level: "silent", write: () => {} }),
  });
  const run = (name: string, args: unknown) => {
    const tool = declared.tools.get(name);
    if (tool === undefined) throw new Error(name);
    return () => tool.execute(args, invocation);
  };
  const half = declared.tools.get("execute_command")?.executeHalf;
  rows.push(
    await measure("execute_command half: sh -c, ls piped to tr piped to wc", 30, async () =>
      half?.execute(
        { program: "sh", args: ["-c", "ls | tr a-z A-Z | wc -l"], cwd: "." },
        invocation,
      ),
    ),
    await measure(
      "declared chain: ls piped to tr piped to wc (3 stages)",
      30,
      run("bench_chain", { command: "ls | tr a-z A-Z | wc -l" }),
    ),
    await measure(
      "declared script: /bin/sh scripts/count.sh (re-verified)",
      30,
      run("bench_script", {}),
    ),
  );
  await declared.close();
}

console.log(`createToolRuntime: ${startMs.toFixed(1)} ms\n`);
console.log("| call | runs | median ms | max ms |\n|---|---|---|---|");
console.log(rows.join("\n"));
if (sandboxNote) console.log(sandboxNote);

await runtime.close();
server.close();
await rm(base, { recursive: true, force: true });
