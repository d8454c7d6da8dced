// The bytes verified are the bytes run, attacked through the real tool runtime under both
// backends: a script and a pinned program swapped in the window between the check and the start
// (a backend that swaps them as it wraps the command), and swapped back and forth by another
// process for hundreds of calls. The changed bytes never run; a file found changed stays refused,
// even once restored, until the tools are built again (a reload), and each refusal is reported as
// a refused stage (the run's audit). On the old code the interpreter and exec opened the
// operator's path again and ran whatever was there.
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { createNoneBackend } from "../../../src/sandbox/none.ts";
import type { SandboxBackend } from "../../../src/sandbox/types.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import { stagingDirectory } from "../../../src/tools/declared/verified-files.ts";
import type { StageEvent, ToolResult, ToolRuntime } from "../../../src/tools/types.ts";
import { bwrapBackend, describeWithBwrap } from "../../sandbox/support.ts";
import { eventually } from "../../support/eventually.ts";
import { giveToSandboxUser } from "../../support/sandbox-workspace.ts";
import {
  baseEnv,
  buildPolicies,
  createSandbox,
  makeContext,
  type Sandbox,
  startRuntime,
} from "../support.ts";

const original = "#!/bin/sh\necho original\n";
/** The changed bytes leave a mark in the workspace (and say so) if they ever run. */
const changed = "#!/bin/sh\necho CHANGED; echo ran >> changed-ran.log\n";
const originalTool = "#!/bin/sh\necho tool-original\n";
const changedTool = "#!/bin/sh\necho TOOL-CHANGED; echo ran >> changed-ran.log\n";
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

let sandbox: Sandbox;
let script: string;
let program: string;
let runtime: ToolRuntime | undefined;
let attacker: ChildProcess | undefined;

beforeEach(async () => {
  sandbox = await createSandbox();
  await mkdir(path.join(sandbox.workspace, "scripts"));
  await mkdir(path.join(sandbox.workspace, "bin"));
  script = path.join(sandbox.workspace, "scripts", "check.sh");
  program = path.join(sandbox.workspace, "bin", "tool");
  await writeFile(script, original);
  await writeFile(program, originalTool);
  await chmod(program, 0o755);
  await writeFile(path.join(sandbox.workspace, "scripts", "reread.sh"), original);
  // A root server runs commands as the workspace's owner, never root (docs/sandbox.md).
  await chmod(sandbox.base, 0o755);
  await giveToSandboxUser(sandbox.workspace);
});

afterEach(async () => {
  if (attacker !== undefined && attacker.exitCode === null) {
    const exited = new Promise((resolve) => attacker?.once("exit", resolve));
    attacker.kill("SIGKILL");
    await exited;
  }
  attacker = undefined;
  await runtime?.close();
  runtime = undefined;
  await sandbox.cleanup();
});

const toolsYaml = () => `executables:
  - {id: tool, path: "\${workspace}/bin/tool", sha256: "${sha256(originalTool)}"}
commands:
  - {name: check, description: d, mode: script, script: scripts/check.sh, interpreter: /bin/sh}
  - {name: own, description: d, mode: script, script: scripts/check.sh, executable: true}
  - {name: pinned, description: d, mode: fixed, program: tool}
  - {name: reread, description: d, mode: script, script: scripts/reread.sh, interpreter: /bin/sh}
`;

async function start(backend: SandboxBackend) {
  await chmod(script, 0o755);
  const toolsPolicy = parseToolsPolicy(toolsYaml(), "tools.yaml", builtinDescriptors);
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(toolsPolicy),
    env: baseEnv(),
    sandbox: backend,
  });
  return runtime;
}

async function call(rt: ToolRuntime, name: string, events: StageEvent[] = []) {
  const tool = rt.tools.get(name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const result: ToolResult = await tool.execute(tool.inputSchema.parse({}), {
    ...makeContext(rt),
    onStage: (event) => events.push(event),
  });
  return result as { ok: boolean; code?: string; content?: { stdout?: string } };
}

const changedRan = () => existsSync(path.join(sandbox.workspace, "changed-ran.log"));

/** A backend that swaps the files after every check, as it wraps the command about to start. */
function swappingBackend(inner: SandboxBackend): SandboxBackend {
  return {
    ...inner,
    wrap(request) {
      writeFileSync(script, changed);
      writeFileSync(program, changedTool);
      return inner.wrap(request);
    },
  };
}

function attacks(name: string, backend: () => SandboxBackend) {
  describe(name, () => {
    it("runs the verified bytes when the files are swapped between the check and the start", async () => {
      for (const tool of ["check", "own", "pinned"]) {
        await writeFile(script, original);
        await writeFile(program, originalTool);
        const rt = await start(swappingBackend(backend()));
        const result = await call(rt, tool);
        expect(result.ok, JSON.stringify(result)).toBe(true);
        expect(result.content?.stdout).toBe(tool === "pinned" ? "tool-original\n" : "original\n");
        expect(changedRan()).toBe(false);
        await runtime?.close();
        runtime = undefined;
      }
    }, 60_000);

    it("runs the verified bytes when the file is renamed over while the script runs and reads itself again", async () => {
      // The verified script waits for the attacker, then reads the file it was started from again
      // (`. "$0"`), as an interpreter that opens its script by path after exec does. Meanwhile a
      // process outside renames changed bytes over the operator's path: a copy bound there was
      // detached by the rename (a mount point renamed over in another mount namespace), and the
      // second read found the changed file.
      const reread = path.join(sandbox.workspace, "scripts", "reread.sh");
      await writeFile(
        reread,
        [
          "#!/bin/sh",
          "if [ -e read-once ]; then echo original-again; exit 0; fi",
          ": > read-once",
          "while [ ! -e go ]; do sleep 0.05; done",
          '. "$0"',
          "",
        ].join("\n"),
      );
      await giveToSandboxUser(sandbox.workspace);
      const rt = await start(backend());
      const running = call(rt, "reread");
      await eventually("the script to have started", () =>
        existsSync(path.join(sandbox.workspace, "read-once")),
      );
      const swap = path.join(sandbox.workspace, "scripts", ".swap");
      await writeFile(swap, changed);
      await rename(swap, reread);
      await writeFile(path.join(sandbox.workspace, "go"), "");
      const result = await running;
      expect(result.content?.stdout).toBe("original-again\n");
      expect(changedRan()).toBe(false);
    }, 60_000);

    it("keeps a changed file refused, even once restored, until the tools are built again", async () => {
      const rt = await start(backend());
      expect((await call(rt, "check")).content?.stdout).toBe("original\n");
      expect((await call(rt, "pinned")).content?.stdout).toBe("tool-original\n");
      expect(rt.tools.get("check")?.changedSinceLoad?.()).toBe(false);

      await writeFile(script, changed);
      await writeFile(program, changedTool);
      const events: StageEvent[] = [];
      expect((await call(rt, "check", events)).code).toBe("script-changed");
      expect((await call(rt, "own", events)).code).toBe("script-changed");
      expect((await call(rt, "pinned", events)).code).toBe("refused");
      // Every refusal is reported as a refused stage, naming why.
      const refusals = events.filter((e) => e.event === "refused");
      expect(refusals.map((e) => [e.tool, e.event])).toEqual([
        ["check", "refused"],
        ["own", "refused"],
        ["pinned", "refused"],
      ]);
      expect(events.some((e) => e.event === "started")).toBe(false);
      expect(refusals[0]?.reason).toMatch(/changed since peergate loaded it.*until .*reloaded/);

      // Restored byte for byte: still refused, and still reported.
      await writeFile(script, original);
      await writeFile(program, originalTool);
      const again: StageEvent[] = [];
      expect((await call(rt, "check", again)).code).toBe("script-changed");
      expect((await call(rt, "pinned", again)).code).toBe("refused");
      expect(again.filter((e) => e.event === "refused")).toHaveLength(2);
      expect(again.some((e) => e.event === "started")).toBe(false);
      for (const name of ["check", "own", "pinned"]) {
        expect(rt.tools.get(name)?.changedSinceLoad?.()).toBe(true);
      }
      expect(changedRan()).toBe(false);

      // A reload builds the tools again from what is there now.
      await runtime?.close();
      const rebuilt = await start(backend());
      expect((await call(rebuilt, "check")).content?.stdout).toBe("original\n");
      expect((await call(rebuilt, "pinned")).content?.stdout).toBe("tool-original\n");
    }, 60_000);

    it("never runs the changed bytes while another process swaps the files for hundreds of calls", async () => {
      const rt = await start(backend());
      const alt = path.join(sandbox.base, "alternate");
      await mkdir(alt);
      for (const [file, text] of [
        ["script-a", original],
        ["script-b", changed],
        ["tool-a", originalTool],
        ["tool-b", changedTool],
      ] as const) {
        await writeFile(path.join(alt, file), text);
        await chmod(path.join(alt, file), 0o755);
      }
      // In place (cp truncates and writes) and by rename (mv), back and forth, as fast as it can.
      attacker = spawn(
        "/bin/sh",
        [
          "-c",
          `while :; do cp ${alt}/script-b "$1"; cp ${alt}/tool-b "$2"; cp ${alt}/script-a "$1"; cp ${alt}/tool-a "$2"; ` +
            `cp ${alt}/script-b ${alt}/s.tmp; mv ${alt}/s.tmp "$1"; cp ${alt}/script-a ${alt}/s.tmp; mv ${alt}/s.tmp "$1"; done`,
          "attacker",
          script,
          program,
        ],
        { stdio: "ignore" },
      );
      const names = ["check", "own", "pinned"];
      const outcomes: { tool: string; outcome: string }[] = [];
      for (let i = 0; i < 300; i++) {
        const tool = names[i % 3] as string;
        const result = await call(rt, tool);
        const stdout = result.content?.stdout ?? "";
        outcomes.push({ tool, outcome: result.ok ? stdout.trim() : (result.code ?? "failed") });
        expect(stdout).not.toMatch(/CHANGED/);
      }
      expect(changedRan()).toBe(false);
      const allowed = ["original", "tool-original", "script-changed", "refused"];
      expect(outcomes.filter((o) => !allowed.includes(o.outcome))).toEqual([]);
      // Once a file was found changed, the tools running it never ran again, whatever it held later.
      const refused = (o: { outcome: string }) =>
        o.outcome === "script-changed" || o.outcome === "refused";
      for (const group of [["check", "own"], ["pinned"]]) {
        const calls = outcomes.filter((o) => group.includes(o.tool));
        const first = calls.findIndex(refused);
        expect(first, `${group.join(", ")} was never refused`).toBeGreaterThanOrEqual(0);
        expect(calls.slice(first).every(refused)).toBe(true);
      }
      expect(await readFile(path.join(alt, "script-a"), "utf8")).toBe(original);
    }, 300_000);
  });
}

attacks("under PEERGATE_SANDBOX=none", () => createNoneBackend());

describeWithBwrap("under bwrap", () => {
  attacks("the verified copy bound at the script's path", () => bwrapBackend);

  it("a running script cannot change, remove or replace its own file, nor see the copies", async () => {
    await writeFile(
      script,
      [
        "#!/bin/sh",
        'echo changed > "$0" 2>/dev/null || echo write-refused',
        'rm -f "$0" 2>/dev/null || echo remove-refused',
        'echo x > "$0.new" && mv -f "$0.new" "$0" 2>/dev/null || echo replace-refused',
        // The staging directory itself is not in the sandbox (its /tmp is a fresh one).
        `ls ${stagingDirectory()} >/dev/null 2>&1 || echo staging-hidden`,
        "",
      ].join("\n"),
    );
    const rt = await start(bwrapBackend);
    const result = await call(rt, "check");
    expect(result.content?.stdout).toBe(
      "write-refused\nremove-refused\nreplace-refused\nstaging-hidden\n",
    );
    // The operator's file is as it was loaded, so the next call is not refused.
    expect(await readFile(script, "utf8")).toContain("write-refused");
    expect((await call(rt, "check")).ok).toBe(true);
  }, 60_000);
});
