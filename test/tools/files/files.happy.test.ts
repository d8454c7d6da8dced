// The file tools doing their jobs: reading windows of text, listing, finding, grepping, stat,
// the clock, and the two-phase writes with their diffs.
import { chmod, mkdir, readdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import {
  approveAndRun,
  callTool,
  createSandbox,
  expectApproval,
  expectFailure,
  expectSuccess,
  runHalf,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let runtime: ToolRuntime;

beforeEach(async () => {
  sandbox = await createSandbox();
  runtime = await startRuntime(sandbox);
  const ws = sandbox.workspace;
  await mkdir(path.join(ws, "src/lib"), { recursive: true });
  await writeFile(path.join(ws, "README.md"), "# Title\nline two\nline three\n");
  await writeFile(path.join(ws, "src/main.ts"), "export const a = 1;\n// TODO: more\n");
  await writeFile(path.join(ws, "src/lib/util.ts"), "export function f() {}\n// todo lower\n");
  await writeFile(path.join(ws, "notes.txt"), "alpha\nbeta\ngamma\ndelta\n");
});

afterEach(async () => {
  await runtime.close();
  await sandbox.cleanup();
});

describe("read_file", () => {
  it("returns the whole file, or a window of lines", async () => {
    const all = expectSuccess(await callTool(runtime, "read_file", { path: "notes.txt" }));
    expect(all).toMatchObject({ path: "notes.txt", fromLine: 1, toLine: 4, more: false });
    expect(all.text).toBe("alpha\nbeta\ngamma\ndelta");
    const window = expectSuccess(
      await callTool(runtime, "read_file", { path: "notes.txt", offset: 2, limit: 2 }),
    );
    expect(window).toMatchObject({ fromLine: 2, toLine: 3, text: "beta\ngamma", more: true });
  });

  it("keeps a last line without a newline and reads an empty file", async () => {
    await writeFile(path.join(sandbox.workspace, "tail.txt"), "one\ntwo");
    expect(expectSuccess(await callTool(runtime, "read_file", { path: "tail.txt" })).text).toBe(
      "one\ntwo",
    );
    await writeFile(path.join(sandbox.workspace, "empty.txt"), "");
    const empty = expectSuccess(await callTool(runtime, "read_file", { path: "empty.txt" }));
    expect(empty).toMatchObject({ text: "", more: false });
  });

  it("says when the offset is past the end, and refuses a directory", async () => {
    expectFailure(
      await callTool(runtime, "read_file", { path: "notes.txt", offset: 50 }),
      "invalid-input",
    );
    expectFailure(await callTool(runtime, "read_file", { path: "src" }), "invalid-input");
    expectFailure(await callTool(runtime, "read_file", { path: "missing.txt" }), "not-found");
  });

  it("reads a file through a symlink that stays inside the workspace", async () => {
    await symlink("notes.txt", path.join(sandbox.workspace, "link.txt"));
    const read = expectSuccess(
      await callTool(runtime, "read_file", { path: "link.txt", limit: 1 }),
    );
    expect(read).toMatchObject({ path: "notes.txt", text: "alpha" });
  });
});

describe("ls", () => {
  it("lists names, types and file sizes, sorted", async () => {
    await symlink("notes.txt", path.join(sandbox.workspace, "zlink"));
    const listing = expectSuccess(await callTool(runtime, "ls", {}));
    expect(listing.entries).toEqual([
      { name: "README.md", type: "file", size: 28 },
      { name: "notes.txt", type: "file", size: 23 },
      { name: "src", type: "directory" },
      { name: "zlink", type: "symlink" },
    ]);
    const sub = expectSuccess(await callTool(runtime, "ls", { path: "src/lib" }));
    expect(sub).toMatchObject({ path: "src/lib", entries: [{ name: "util.ts", type: "file" }] });
  });

  it("refuses a file and flags a listing cut at its bound", async () => {
    expectFailure(await callTool(runtime, "ls", { path: "notes.txt" }), "invalid-input");
    const many = path.join(sandbox.workspace, "many");
    await mkdir(many);
    await Promise.all(
      Array.from({ length: 1005 }, (_, i) => writeFile(path.join(many, `f${i}`), "")),
    );
    const result = await callTool(runtime, "ls", { path: "many" });
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect(expectSuccess(result)).toMatchObject({ total: 1005 });
    expect((expectSuccess(result).entries as unknown[]).length).toBe(1000);
  });
});

describe("find / glob", () => {
  it("matches names at any depth, or paths when the pattern has a slash", async () => {
    const byName = expectSuccess(await callTool(runtime, "find", { pattern: "*.ts" }));
    expect(byName.matches).toEqual(["src/lib/util.ts", "src/main.ts"]);
    const byPath = expectSuccess(await callTool(runtime, "find", { pattern: "src/*.ts" }));
    expect(byPath.matches).toEqual(["src/main.ts"]);
    const deep = expectSuccess(
      await callTool(runtime, "find", { pattern: "**/*.ts", path: "src" }),
    );
    expect(deep.matches).toEqual(["src/lib/util.ts", "src/main.ts"]);
    const dirs = expectSuccess(await callTool(runtime, "find", { pattern: "lib" }));
    expect(dirs.matches).toEqual(["src/lib/"]);
  });

  it("stops at the result limit and says so", async () => {
    const result = await callTool(runtime, "find", { pattern: "*", limit: 2 });
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect((expectSuccess(result).matches as unknown[]).length).toBe(2);
    const all = await callTool(runtime, "find", { pattern: "*" });
    expect(all).toMatchObject({ ok: true, truncated: false });
  });
});

describe("grep", () => {
  it("finds matching lines with path and line number", async () => {
    const result = expectSuccess(await callTool(runtime, "grep", { pattern: "TODO" }));
    expect(result.matches).toEqual([{ path: "src/main.ts", line: 2, text: "// TODO: more" }]);
    const anyCase = expectSuccess(
      await callTool(runtime, "grep", { pattern: "todo", ignoreCase: true }),
    );
    expect((anyCase.matches as { path: string }[]).map((m) => m.path)).toEqual([
      "src/lib/util.ts",
      "src/main.ts",
    ]);
  });

  it("filters by glob, searches one file, and bounds the matches", async () => {
    const md = expectSuccess(await callTool(runtime, "grep", { pattern: "line", glob: "*.md" }));
    expect((md.matches as unknown[]).length).toBe(2);
    const one = expectSuccess(
      await callTool(runtime, "grep", { pattern: "^g", path: "notes.txt" }),
    );
    expect(one.matches).toEqual([{ path: "notes.txt", line: 3, text: "gamma" }]);
    const limited = await callTool(runtime, "grep", { pattern: "e", limit: 2 });
    expect(limited).toMatchObject({ ok: true, truncated: true });
    expect((expectSuccess(limited).matches as unknown[]).length).toBe(2);
  });

  it("refuses an invalid regular expression", async () => {
    expectFailure(await callTool(runtime, "grep", { pattern: "(unclosed" }), "invalid-input");
  });

  it("skips binary and oversized files and counts them", async () => {
    await writeFile(
      path.join(sandbox.workspace, "blob.bin"),
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0x54, 0x4f, 0x44, 0x4f]),
    );
    await writeFile(
      path.join(sandbox.workspace, "big.txt"),
      `TODO\n${"x".repeat(2 * 1024 * 1024)}`,
    );
    const result = expectSuccess(await callTool(runtime, "grep", { pattern: "TODO" }));
    expect(result.skipped).toEqual({ large: 1, binary: 1 });
    expect((result.matches as unknown[]).length).toBe(1);
  });
});

describe("stat and get_time", () => {
  it("describes a file without its contents", async () => {
    await chmod(path.join(sandbox.workspace, "notes.txt"), 0o640);
    const info = expectSuccess(await callTool(runtime, "stat", { path: "notes.txt" }));
    expect(info).toMatchObject({ path: "notes.txt", type: "file", size: 23, mode: "0640" });
    expect(JSON.stringify(info)).not.toContain("alpha");
    expect(expectSuccess(await callTool(runtime, "stat", { path: "src" })).type).toBe("directory");
  });

  it("tells the time from the run's clock", async () => {
    const time = expectSuccess(await callTool(runtime, "get_time", {}));
    expect(time).toMatchObject({ utc: "2026-01-02T03:04:05.000Z", unixMs: 1767323045000 });
    expect(typeof time.timeZone).toBe("string");
  });
});

describe("write_file", () => {
  it("proposes a real diff without writing, then the half creates the file", async () => {
    const request = expectApproval(
      await callTool(runtime, "write_file", { path: "src/new.ts", content: "hello\nworld\n" }),
    );
    expect(request.executeToolName).toBe("execute_write_file");
    expect(request.previewDiff).toBe(
      "--- /dev/null\n+++ b/src/new.ts\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
    );
    expect(request.summary).toContain("Create");
    await expect(stat(path.join(sandbox.workspace, "src/new.ts"))).rejects.toThrow();
    const done = expectSuccess(await runHalf(runtime, "write_file", request));
    expect(done).toMatchObject({ path: "src/new.ts", bytes: 12, created: true });
    expect(await readFile(path.join(sandbox.workspace, "src/new.ts"), "utf8")).toBe(
      "hello\nworld\n",
    );
  });

  it("overwrites keeping the file's permissions, and leaves no temp file behind", async () => {
    const file = path.join(sandbox.workspace, "notes.txt");
    await chmod(file, 0o600);
    const request = expectApproval(
      await callTool(runtime, "write_file", { path: "notes.txt", content: "alpha\nBETA\n" }),
    );
    expect(request.previewDiff).toContain(" alpha\n-beta\n-gamma\n-delta\n+BETA\n");
    expectSuccess(await runHalf(runtime, "write_file", request));
    expect(await readFile(file, "utf8")).toBe("alpha\nBETA\n");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await readdir(sandbox.workspace)).filter((n) => n.includes("peergate"))).toEqual([]);
  });

  it("the half refuses when the file changed, appeared or vanished after the proposal", async () => {
    const changed = expectApproval(
      await callTool(runtime, "write_file", { path: "notes.txt", content: "x\n" }),
    );
    await writeFile(path.join(sandbox.workspace, "notes.txt"), "someone else\n");
    expectFailure(await runHalf(runtime, "write_file", changed), "refused");
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toBe(
      "someone else\n",
    );

    const fresh = expectApproval(
      await callTool(runtime, "write_file", { path: "fresh.txt", content: "mine\n" }),
    );
    await writeFile(path.join(sandbox.workspace, "fresh.txt"), "theirs\n");
    expectFailure(await runHalf(runtime, "write_file", fresh), "refused");
    expect(await readFile(path.join(sandbox.workspace, "fresh.txt"), "utf8")).toBe("theirs\n");
  });

  it("needs the directory to exist and refuses a directory as target", async () => {
    expectFailure(
      await callTool(runtime, "write_file", { path: "no/such/dir/x.txt", content: "" }),
      "not-found",
    );
    expectFailure(
      await callTool(runtime, "write_file", { path: "src", content: "" }),
      "invalid-input",
    );
  });
});

describe("edit_file", () => {
  it("replaces one exact occurrence and returns the diff", async () => {
    const request = expectApproval(
      await callTool(runtime, "edit_file", {
        path: "notes.txt",
        oldString: "beta\n",
        newString: "BETA\n",
      }),
    );
    expect(request.executeToolName).toBe("execute_edit_file");
    expect(request.previewDiff).toBe(
      "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,4 +1,4 @@\n alpha\n-beta\n+BETA\n gamma\n delta\n",
    );
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toContain("beta");
    const done = expectSuccess(await runHalf(runtime, "edit_file", request));
    expect(done).toMatchObject({ path: "notes.txt", replacements: 1 });
    expect(done.diff).toBe(request.previewDiff);
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toBe(
      "alpha\nBETA\ngamma\ndelta\n",
    );
  });

  it("refuses an ambiguous match unless replaceAll, and a missing one", async () => {
    const error = expectFailure(
      await callTool(runtime, "edit_file", {
        path: "notes.txt",
        oldString: "a\n",
        newString: "A\n",
      }),
      "invalid-input",
    );
    expect(error).toContain("occurs 4 times");
    expectFailure(
      await callTool(runtime, "edit_file", {
        path: "notes.txt",
        oldString: "zeta",
        newString: "x",
      }),
      "invalid-input",
    );
    const all = await approveAndRun(runtime, "edit_file", {
      path: "notes.txt",
      oldString: "a\n",
      newString: "A\n",
      replaceAll: true,
    });
    expect(expectSuccess(all).replacements).toBe(4);
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toBe(
      "alphA\nbetA\ngammA\ndeltA\n",
    );
  });

  it("inserts replacement text literally ($& and $1 are not patterns)", async () => {
    await approveAndRun(runtime, "edit_file", {
      path: "notes.txt",
      oldString: "gamma",
      newString: "$&-$1-$$",
    });
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toBe(
      "alpha\nbeta\n$&-$1-$$\ndelta\n",
    );
  });

  it("the half refuses if the file changed after the proposal, even if the text still matches", async () => {
    const request = expectApproval(
      await callTool(runtime, "edit_file", {
        path: "notes.txt",
        oldString: "beta",
        newString: "BETA",
      }),
    );
    await writeFile(
      path.join(sandbox.workspace, "notes.txt"),
      "alpha\nbeta\ngamma\ndelta\nepsilon\n",
    );
    expectFailure(await runHalf(runtime, "edit_file", request), "refused");
    expect(await readFile(path.join(sandbox.workspace, "notes.txt"), "utf8")).toContain("beta\n");
  });
});

describe("mkdir", () => {
  it("creates a directory with its parents and reports what it created", async () => {
    const result = expectSuccess(await callTool(runtime, "mkdir", { path: "a/b/c" }));
    expect(result).toMatchObject({ created: ["a", "a/b", "a/b/c"], existed: false });
    expect((await stat(path.join(sandbox.workspace, "a/b/c"))).isDirectory()).toBe(true);
    expect(expectSuccess(await callTool(runtime, "mkdir", { path: "a/b/c" }))).toMatchObject({
      created: [],
      existed: true,
    });
  });

  it("without parents, refuses a missing parent and creates nothing", async () => {
    expectFailure(await callTool(runtime, "mkdir", { path: "x/y", parents: false }), "not-found");
    await expect(stat(path.join(sandbox.workspace, "x"))).rejects.toThrow();
    expectFailure(await callTool(runtime, "mkdir", { path: "notes.txt/sub" }), "invalid-input");
  });

  it("is single-phase, as its descriptor says", () => {
    expect(runtime.tools.get("mkdir")?.executeHalf).toBeUndefined();
  });
});
