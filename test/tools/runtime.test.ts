// The runtime as the run engine sees it: every inventory tool implemented (minus the two that
// never reach caller runs), halves named as the descriptors say, descriptor claims honoured (a
// read-only tool changes nothing), writes that are never half-done, and a grep that cannot hang.
import { spawn } from "node:child_process";
import { mkdir, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import {
  buildPolicies,
  callTool,
  createSandbox,
  expectApproval,
  expectFailure,
  expectSuccess,
  hashTree,
  runHalf,
  type Sandbox,
  startRuntime,
} from "./support.ts";

let sandbox: Sandbox;
let runtime: ToolRuntime;

beforeEach(async () => {
  sandbox = await createSandbox();
  runtime = await startRuntime(sandbox);
});

afterEach(async () => {
  await runtime.close();
  await sandbox.cleanup();
});

describe("the runtime and the inventory", () => {
  it("implements every built-in a caller run can reach, with the descriptors' hidden halves", () => {
    const expected = builtinTools.filter((t) => !t.needsPerson && !t.persistsOperatorState);
    expect([...runtime.tools.keys()].sort()).toEqual(expected.map((t) => t.name).sort());
    for (const descriptor of expected) {
      expect(runtime.tools.get(descriptor.name)?.executeHalf?.name, descriptor.name).toBe(
        descriptor.executeHalf,
      );
    }
    expect(runtime.tools.has("ask_user_question")).toBe(false);
    expect(runtime.tools.has("manage_memory")).toBe(false);
  });

  it("creates a missing workspace and reports its real path", async () => {
    const fresh = await startRuntime({ ...sandbox, workspace: path.join(sandbox.base, "new/ws") });
    expect(fresh.workspace).toBe(path.join(sandbox.base, "new/ws"));
    expect((await stat(path.join(sandbox.base, "new/ws"))).isDirectory()).toBe(true);
    await fresh.close();
  });

  it("refuses to start on a relative workspace or one that is the data directory", async () => {
    for (const workspace of ["relative/ws", sandbox.dataDir]) {
      const error = await startRuntime({ ...sandbox, workspace }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain("PEERGATE_WORKSPACE");
    }
  });

  it("refuses to start when the inventory names a tool nothing implements", async () => {
    const policies = buildPolicies();
    const inventory = {
      ...policies.inventory,
      tools: [
        ...policies.inventory.tools,
        { ...builtinTools[0], name: "phantom" } as (typeof builtinTools)[number],
      ],
    };
    const error = await startRuntime(sandbox, { policies: { ...policies, inventory } }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain("phantom");
  });
});

describe("descriptor claims", () => {
  /** Calls for every read-only, non-egress tool: happy paths and refusals alike. */
  const readOnlyCalls: Record<string, Record<string, unknown>[]> = {
    read_file: [
      { path: "a.txt" },
      { path: "dir/b.md", offset: 2 },
      { path: "nope" },
      { path: "../x" },
    ],
    ls: [{}, { path: "dir" }, { path: "a.txt" }],
    find: [{ pattern: "*" }, { pattern: "**/*.md" }],
    grep: [{ pattern: "line" }, { pattern: "(a+)+$", path: "dir" }, { pattern: "[" }],
    stat: [{ path: "a.txt" }, { path: "dir" }, { path: "link" }],
    get_time: [{}],
  };

  beforeEach(async () => {
    const ws = sandbox.workspace;
    await writeFile(path.join(ws, "a.txt"), "line one\nline two\n");
    await mkdir(path.join(ws, "dir"));
    await writeFile(path.join(ws, "dir/b.md"), "# b\nsecond line\n");
    await symlink("a.txt", path.join(ws, "link"));
  });

  it("every read-only, non-egress tool leaves the workspace byte-identical", async () => {
    const readOnly = builtinTools.filter(
      (t) => t.risk === "read-only" && !t.egress && !t.needsPerson,
    );
    expect(Object.keys(readOnlyCalls).sort()).toEqual(readOnly.map((t) => t.name).sort());
    const before = await hashTree(sandbox.base);
    for (const [name, calls] of Object.entries(readOnlyCalls)) {
      for (const args of calls) await callTool(runtime, name, args);
    }
    expect(await hashTree(sandbox.base)).toBe(before);
  });

  it("proposals of two-phase tools change nothing either", async () => {
    const before = await hashTree(sandbox.base);
    expectApproval(await callTool(runtime, "write_file", { path: "a.txt", content: "new" }));
    expectApproval(await callTool(runtime, "write_file", { path: "dir/c.txt", content: "new" }));
    expectApproval(
      await callTool(runtime, "edit_file", { path: "a.txt", oldString: "one", newString: "1" }),
    );
    expectApproval(
      await callTool(runtime, "execute_command", { program: "touch", args: ["made"] }),
    );
    expect(await hashTree(sandbox.base)).toBe(before);
  });
});

describe("writes are never half-done", () => {
  const old = "old content\n".repeat(1000);

  beforeEach(async () => {
    await writeFile(path.join(sandbox.workspace, "target.txt"), old);
  });

  it("a stop in the middle of a write leaves the old file and no temp file", async () => {
    const request = expectApproval(
      await callTool(runtime, "write_file", {
        path: "target.txt",
        content: "n".repeat(3 * 1024 * 1024),
      }),
    );
    // A signal that reads as stopped once two chunks have been written.
    let checks = 0;
    const stopping = {
      get aborted() {
        checks++;
        return checks > 3;
      },
    } as AbortSignal;
    expectFailure(await runHalf(runtime, "write_file", request, stopping), "interrupted");
    expect(checks).toBeGreaterThan(3);
    expect(await readFile(path.join(sandbox.workspace, "target.txt"), "utf8")).toBe(old);
    expect(await readdir(sandbox.workspace)).toEqual(["target.txt"]);
  });

  it("a process killed mid-write leaves the old file or the new one, whole", async () => {
    const child = fileURLToPath(new URL("./fixtures/write-then-die.ts", import.meta.url));
    const size = 48 * 1024 * 1024;
    // Killed as soon as it starts, and killed once the new content is part-written (the child
    // stops there and says so): the moments are conditions the test sees, not delays it hopes
    // land somewhere.
    for (const when of ["at its start", "mid-write"] as const) {
      await rm(sandbox.workspace, { recursive: true });
      await mkdir(sandbox.workspace);
      await writeFile(path.join(sandbox.workspace, "target.txt"), old);
      const proc = spawn(
        process.execPath,
        [
          child,
          sandbox.workspace,
          "target.txt",
          sandbox.dataDir,
          ...(when === "mid-write" ? ["pause"] : []),
        ],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      const said = (line: string) =>
        new Promise<void>((resolve) => {
          let out = "";
          const hear = (chunk: Buffer) => {
            out += chunk.toString();
            if (out.includes(`${line}\n`)) {
              proc.stdout.off("data", hear);
              resolve();
            }
          };
          proc.stdout.on("data", hear);
        });
      await said(when === "mid-write" ? "part-written" : "start");
      proc.kill("SIGKILL");
      await new Promise((resolve) => proc.once("close", resolve));
      const content = await readFile(path.join(sandbox.workspace, "target.txt"));
      const whole = content.equals(Buffer.from(old)) || content.equals(Buffer.alloc(size, "n"));
      expect(whole, `killed ${when}, the target is ${content.length} bytes`).toBe(true);
      if (when === "mid-write") {
        // The crash could not clean up: the temp file is left, the target untouched.
        expect(content.equals(Buffer.from(old))).toBe(true);
        expect((await readdir(sandbox.workspace)).some((n) => n.endsWith(".tmp"))).toBe(true);
      }
    }
  }, 60_000);
});

describe("grep cannot hang the process", () => {
  it("stops a catastrophically backtracking pattern at its deadline and stays responsive", async () => {
    const quick = await startRuntime(sandbox, { grep: { timeMs: 400 } });
    await writeFile(path.join(sandbox.workspace, "evil.txt"), `${"a".repeat(40)}!\nfine line\n`);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    const result = await callTool(quick, "grep", { pattern: "^(a+)+$" });
    clearInterval(timer);
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect(expectSuccess(result).stoppedBy).toBe("deadline");
    // The event loop kept turning while the regex ran in its worker.
    expect(ticks).toBeGreaterThanOrEqual(3);
    await quick.close();
  });
});

describe("no descriptors leak", () => {
  it("grep and find that stop early close every file and directory they opened", async () => {
    for (let d = 0; d < 5; d++) {
      await mkdir(path.join(sandbox.workspace, `d${d}`));
      for (let f = 0; f < 40; f++) {
        await writeFile(path.join(sandbox.workspace, `d${d}`, `f${f}.txt`), "needle\n");
      }
    }
    const openCount = async () => (await readdir("/proc/self/fd")).length;
    await callTool(runtime, "grep", { pattern: "needle", limit: 1 }); // the worker's own fds settle
    const before = await openCount();
    for (const limit of [1, 7, 150]) {
      const grep = await callTool(runtime, "grep", { pattern: "needle", limit });
      expect(grep).toMatchObject({ ok: true, truncated: true });
      const find = await callTool(runtime, "find", { pattern: "*.txt", limit });
      expect(find).toMatchObject({ ok: true, truncated: true });
    }
    expect(await openCount()).toBe(before);
  });
});
