// The declaration language's examples exactly as shipped (commented out) in policies/tools.yaml,
// uncommented, loaded by the real loader and run by the real run engine for a caller whose
// ceiling admits them: each example works, the secret never reaches the model or the records,
// and the caller without an allow list gets none of them.
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type LoadedPolicies, loadPolicies } from "../../../src/load-policies.ts";
import { silentLogger } from "../../../src/log.ts";
import { createToolRuntime } from "../../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import {
  insertCaller,
  readToolCalls,
  runToEnd,
  scriptModel,
  startEngine,
  stopEngines,
} from "../../runs/support.ts";
import { describeEachDatabase } from "../../support/databases.ts";
import { shippedPoliciesDir } from "../../support/shipped-policies.ts";

const secret = "tok-5a4b3c2d1e0f-secret";
let base: string;
let policies: LoadedPolicies;
let runtime: ToolRuntime;

/** The lines between the markers in the shipped file, with their `# ` removed. */
export async function shippedExamples(): Promise<string> {
  const shipped = await readFile(path.join(shippedPoliciesDir, "tools.yaml"), "utf8");
  const lines = shipped.split("\n");
  const first = lines.indexOf("# --- examples begin ---");
  const last = lines.indexOf("# --- examples end ---");
  return lines
    .slice(first + 1, last)
    .map((line) => (line === "#" ? "" : line.slice(2)))
    .join("\n");
}

beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "peergate-examples-"));
  const policiesDir = path.join(base, "policies");
  const workspace = path.join(base, "workspace");
  const bin = path.join(base, "bin");
  for (const dir of [
    policiesDir,
    bin,
    path.join(workspace, "config"),
    path.join(workspace, "scripts"),
    path.join(workspace, "tools"),
  ]) {
    await mkdir(dir, { recursive: true });
  }
  // Stand-ins for programs this machine may lack (and for curl, which must not go anywhere).
  const printArgs = `#!/bin/sh\necho "$(basename "$0")"\nfor a in "$@"; do printf '[%s]\\n' "$a"; done\n`;
  for (const name of ["rg", "curl"]) {
    await writeFile(path.join(bin, name), printArgs);
    await chmod(path.join(bin, name), 0o755);
  }
  await writeFile(path.join(workspace, "config", "query.json"), "{}\n");
  await writeFile(
    path.join(workspace, "scripts", "check-project.sh"),
    'echo "checks $*"\necho "\\033[31mred\\033[0m"\n',
  );
  await writeFile(
    path.join(workspace, "scripts", "check-project"),
    "#!/bin/sh\necho exec-checks\n",
  );
  await chmod(path.join(workspace, "scripts", "check-project"), 0o755);
  const lint = "#!/bin/sh\necho lint-ok\n";
  await writeFile(path.join(workspace, "tools", "lint"), lint);
  await chmod(path.join(workspace, "tools", "lint"), 0o755);
  await writeFile(
    path.join(workspace, "Makefile"),
    "build:\n\t@echo built\ntest:\n\t@echo tested\n",
  );
  const pin = createHash("sha256").update(lint).digest("hex");
  const examples = (await shippedExamples()).replace(/"0{64}"/, `"${pin}"`);
  await writeFile(path.join(policiesDir, "tools.yaml"), `${examples}\nmcpServers: []\n`);
  await writeFile(
    path.join(policiesDir, "agent.yaml"),
    [
      "name: examples",
      "description: Serves the examples",
      'version: "1.0.0"',
      "skills: []",
      "instructions: Use them.",
      "tools: [custom]",
      "deniedTools: []",
    ].join("\n"),
  );
  policies = await loadPolicies(policiesDir);
  runtime = await createToolRuntime({
    policies,
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: `${bin}:/usr/bin:/bin`, API_TOKEN: secret },
    logger: silentLogger,
  });
});

afterAll(async () => {
  await runtime?.close();
  await rm(base, { recursive: true, force: true });
});

const calls = [
  { id: "c_search", name: "search", input: { arguments: ["TODO; rm -rf /"] } },
  { id: "c_strict", name: "search_strict", input: { arguments: ["-e", "x"] } },
  { id: "c_query", name: "query_api", input: {} },
  { id: "c_lint", name: "lint", input: {} },
  {
    id: "c_shell",
    name: "project_shell",
    input: { program: "make", arguments: ["build"], rationale: "Verify the build" },
  },
  {
    id: "c_chain",
    name: "shell_chain",
    input: {
      command: "make build && make test | tee test.log",
      rationale: "Build and capture test output",
    },
  },
  {
    id: "c_chain_bad",
    name: "shell_chain",
    input: { command: "make build > out.log", rationale: "x" },
  },
  { id: "c_checks", name: "project_checks", input: { arguments: ["quick"] } },
  { id: "c_checks_exec", name: "project_checks_exec", input: {} },
  { id: "c_rg", name: "rg", input: { arguments: ["needle"] } },
];
const names = [...new Set(calls.map((c) => c.name))];

describeEachDatabase("the shipped declared shell tool examples in runs", (ctx) => {
  afterEach(stopEngines);

  it("each example runs for a caller whose ceiling admits it", async () => {
    const model = scriptModel([{ calls }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      options: { policies, tools: runtime, workspace: runtime.workspace ?? base },
    });
    const caller = await insertCaller(ctx.database, { tier: "private", allow: names });
    const { runId, outcome } = await runToEnd(engine, caller);
    expect(outcome.status).toBe("completed");
    expect(model.offered(0)).toEqual(expect.arrayContaining(names));
    const results = model.toolResults(1);
    const byCall = new Map(calls.map((c, i) => [c.id, results[i] ?? ""]));
    expect(byCall.get("c_search")).toContain("[--json]");
    expect(byCall.get("c_search")).toContain("[TODO; rm -rf /]");
    expect(byCall.get("c_strict")).toContain("[--]");
    expect(byCall.get("c_strict")).toContain("[-e]");
    expect(byCall.get("c_query")).toContain("[Authorization: Bearer [redacted]]");
    expect(byCall.get("c_query")).toContain("query.json]");
    expect(byCall.get("c_lint")).toContain("lint-ok");
    expect(byCall.get("c_shell")).toContain("built");
    expect(byCall.get("c_chain")).toContain("tested");
    expect(byCall.get("c_chain")).toContain("executable_sha256");
    expect(byCall.get("c_chain_bad")).toMatch(/redirection/);
    expect(byCall.get("c_checks")).toContain("checks --ci quick");
    expect(byCall.get("c_checks")).not.toContain("\u001b");
    expect(byCall.get("c_checks_exec")).toContain("exec-checks");
    expect(byCall.get("c_rg")).toContain("[needle]");
    expect(await readFile(path.join(runtime.workspace ?? base, "test.log"), "utf8")).toBe(
      "tested\n",
    );
    const rows = await readToolCalls(ctx.database, runId);
    expect(rows.get("c_chain")?.status).toBe("completed");
    expect(rows.get("c_chain_bad")?.status).toBe("failed");
    // The secret is in no result the model saw and in no record of the run.
    expect(results.join("\n")).not.toContain(secret);
    expect(JSON.stringify([...rows.values()])).not.toContain(secret);
  });

  it("a caller whose ceiling does not admit them gets none", async () => {
    const model = scriptModel([{ calls: calls.slice(0, 3) }]);
    const { engine } = await startEngine(ctx.database, {
      model,
      options: { policies, tools: runtime, workspace: runtime.workspace ?? base },
    });
    const caller = await insertCaller(ctx.database, { tier: "public", allow: [] });
    const { runId } = await runToEnd(engine, caller);
    const rows = await readToolCalls(ctx.database, runId);
    for (const call of calls.slice(0, 3)) expect(rows.get(call.id)?.status).toBe("refused");
    expect(model.toolResults(1).join("\n")).not.toContain("[--json]");
  });
});
