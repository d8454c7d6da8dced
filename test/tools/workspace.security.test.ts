// Confinement under attack: traversal, symlinks pointing out (made before and after the check),
// a path swapped between check and open, devices and FIFOs, the data directory, huge and binary
// files. Every refusal must also leave the outside untouched and unread.
import { spawnSync } from "node:child_process";
import {
  link,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeFileAtomically } from "../../src/tools/files/atomic-write.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { createWorkspace, type Workspace } from "../../src/tools/workspace.ts";
import {
  callTool,
  createSandbox,
  expectApproval,
  expectFailure,
  expectSuccess,
  runHalf,
  type Sandbox,
  startRuntime,
} from "./support.ts";

const secret = "TOP-SECRET-OUTSIDE";

let sandbox: Sandbox;
let runtime: ToolRuntime;

async function setUp(options: { dataInside?: boolean } = {}) {
  sandbox = await createSandbox(options);
  runtime = await startRuntime(sandbox);
  await writeFile(path.join(sandbox.outside, "secret.txt"), `${secret}\n`);
  await mkdir(path.join(sandbox.workspace, "dir"));
  await writeFile(path.join(sandbox.workspace, "dir/a.txt"), "inside\n");
  await writeFile(path.join(sandbox.workspace, "a.txt"), "inside\n");
}

afterEach(async () => {
  await runtime.close();
  await sandbox.cleanup();
});

/** Every file-touching tool called on one path; each must refuse with a message naming it. */
async function expectAllRefuse(given: string, code = "refused") {
  const calls: [string, Record<string, unknown>][] = [
    ["read_file", { path: given }],
    ["stat", { path: given }],
    ["ls", { path: given }],
    ["grep", { pattern: "SECRET", path: given }],
    ["find", { pattern: "*", path: given }],
    ["write_file", { path: given, content: "pwned\n" }],
    ["edit_file", { path: given, oldString: "TOP", newString: "pwned" }],
    ["mkdir", { path: given }],
    ["execute_command", { program: "true", cwd: given }],
  ];
  for (const [tool, args] of calls) {
    const error = expectFailure(await callTool(runtime, tool, args), code);
    expect(error, `${tool} should name the path`).toContain(JSON.stringify(given));
    expect(error, tool).not.toContain(secret);
  }
}

describe("traversal", () => {
  beforeEach(() => setUp());

  it.each([
    "../outside/secret.txt",
    "../../outside/secret.txt",
    "dir/../../outside/secret.txt",
    "./../outside",
    "..",
    "/etc/passwd",
    "/etc",
  ])("refuses %s in every tool", async (given) => {
    await expectAllRefuse(given);
  });

  it("refuses an absolute path outside the workspace and accepts one inside", async () => {
    await expectAllRefuse(path.join(sandbox.outside, "secret.txt"));
    const inside = expectSuccess(
      await callTool(runtime, "read_file", { path: path.join(sandbox.workspace, "a.txt") }),
    );
    expect(inside.text).toBe("inside");
  });

  it("keeps URL-encoded dots literal: they name files inside, never the parent", async () => {
    for (const given of [
      "%2e%2e/outside/secret.txt",
      "..%2foutside%2fsecret.txt",
      "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    ]) {
      expectFailure(await callTool(runtime, "read_file", { path: given }), "not-found");
    }
    await mkdir(path.join(sandbox.workspace, "%2e%2e"));
    await writeFile(path.join(sandbox.workspace, "%2e%2e/x.txt"), "literal\n");
    expect(expectSuccess(await callTool(runtime, "read_file", { path: "%2e%2e/x.txt" })).text).toBe(
      "literal",
    );
  });

  it("refuses NUL bytes", async () => {
    expectFailure(
      await callTool(runtime, "read_file", { path: "a.txt\0../../etc/passwd" }),
      "refused",
    );
  });

  it("writes nothing outside when a write or mkdir is refused", async () => {
    await expectAllRefuse("../outside/new-dir");
    expect(await readdir(sandbox.outside)).toEqual(["secret.txt"]);
  });

  it("refuses a call whose context names another workspace", async () => {
    const tool = runtime.tools.get("read_file");
    const result = await tool?.execute(
      { path: "a.txt" },
      {
        signal: new AbortController().signal,
        workspace: sandbox.outside,
        callId: "c",
        now: () => new Date(),
      },
    );
    expect(result).toMatchObject({ ok: false, code: "refused" });
  });
});

describe("symlinks pointing out", () => {
  beforeEach(() => setUp());

  it("refuses a file symlink to outside in every tool", async () => {
    await symlink(
      path.join(sandbox.outside, "secret.txt"),
      path.join(sandbox.workspace, "leak.txt"),
    );
    await expectAllRefuse("leak.txt");
    expect(await readFile(path.join(sandbox.outside, "secret.txt"), "utf8")).toBe(`${secret}\n`);
  });

  it("refuses a relative symlink that climbs out", async () => {
    await symlink("../outside/secret.txt", path.join(sandbox.workspace, "rel-leak.txt"));
    await expectAllRefuse("rel-leak.txt");
  });

  it("refuses a directory symlink to outside, and paths through it", async () => {
    await symlink(sandbox.outside, path.join(sandbox.workspace, "out"));
    await expectAllRefuse("out");
    await expectAllRefuse("out/secret.txt");
    await expectAllRefuse("out/new/deeper");
    expect(await readdir(sandbox.outside)).toEqual(["secret.txt"]);
  });

  it("refuses writing through a dangling symlink (it would create the file where it points)", async () => {
    await symlink(
      path.join(sandbox.outside, "created.txt"),
      path.join(sandbox.workspace, "dangling"),
    );
    expectFailure(
      await callTool(runtime, "write_file", { path: "dangling", content: "x" }),
      "refused",
    );
    await expect(stat(path.join(sandbox.outside, "created.txt"))).rejects.toThrow();
  });

  it("walkers list a symlink but never follow it", async () => {
    await symlink(sandbox.outside, path.join(sandbox.workspace, "out"));
    const found = expectSuccess(await callTool(runtime, "find", { pattern: "*" }));
    expect(found.matches).toContain("out");
    expect(found.matches).not.toContain("out/secret.txt");
    const grep = expectSuccess(await callTool(runtime, "grep", { pattern: "SECRET" }));
    expect(grep.matches).toEqual([]);
  });
});

describe("a path swapped between the check and the open", () => {
  let workspace: Workspace;
  beforeEach(async () => {
    await setUp();
    workspace = await createWorkspace({ root: sandbox.workspace, dataDir: sandbox.dataDir });
  });

  it("a file replaced by a symlink to outside after the check is not read", async () => {
    const checked = await workspace.resolveExisting("a.txt");
    await rm(path.join(sandbox.workspace, "a.txt"));
    await symlink(path.join(sandbox.outside, "secret.txt"), path.join(sandbox.workspace, "a.txt"));
    await expect(workspace.openFile(checked)).rejects.toMatchObject({ code: "refused" });
  });

  it("a directory replaced by a symlink to outside after the check is not entered", async () => {
    await writeFile(path.join(sandbox.outside, "a.txt"), `${secret}\n`);
    const file = await workspace.resolveExisting("dir/a.txt");
    const dir = await workspace.resolveExisting("dir");
    await rename(path.join(sandbox.workspace, "dir"), path.join(sandbox.workspace, "dir.moved"));
    await symlink(sandbox.outside, path.join(sandbox.workspace, "dir"));
    await expect(workspace.openFile(file)).rejects.toMatchObject({ code: "refused" });
    await expect(workspace.openDirectory(dir)).rejects.toMatchObject({ code: "refused" });
  });

  it("an atomic write whose directory was swapped out after the check writes nothing outside", async () => {
    const target = await workspace.resolveTarget("dir/new.txt");
    await rename(path.join(sandbox.workspace, "dir"), path.join(sandbox.workspace, "dir.moved"));
    await symlink(sandbox.outside, path.join(sandbox.workspace, "dir"));
    await expect(
      writeFileAtomically(workspace, target, Buffer.from("pwned"), {
        mode: 0o644,
        signal: new AbortController().signal,
      }),
    ).rejects.toMatchObject({ code: "refused" });
    expect(await readdir(sandbox.outside)).toEqual(["secret.txt"]);
  });

  it("an approved write whose directory became a symlink out is refused by the half", async () => {
    const request = expectApproval(
      await callTool(runtime, "write_file", { path: "dir/new.txt", content: "x" }),
    );
    await rename(path.join(sandbox.workspace, "dir"), path.join(sandbox.workspace, "dir.moved"));
    await symlink(sandbox.outside, path.join(sandbox.workspace, "dir"));
    expectFailure(await runHalf(runtime, "write_file", request), "refused");
    expect(await readdir(sandbox.outside)).toEqual(["secret.txt"]);
  });

  it("an approved edit whose file became a symlink out is refused by the half", async () => {
    const request = expectApproval(
      await callTool(runtime, "edit_file", {
        path: "a.txt",
        oldString: "inside",
        newString: "changed",
      }),
    );
    await rm(path.join(sandbox.workspace, "a.txt"));
    await writeFile(path.join(sandbox.outside, "target.txt"), "inside\n");
    await symlink(path.join(sandbox.outside, "target.txt"), path.join(sandbox.workspace, "a.txt"));
    expectFailure(await runHalf(runtime, "edit_file", request), "refused");
    expect(await readFile(path.join(sandbox.outside, "target.txt"), "utf8")).toBe("inside\n");
  });

  it("a file swapped for a FIFO after the check is refused without hanging", async () => {
    const checked = await workspace.resolveExisting("a.txt");
    await rm(path.join(sandbox.workspace, "a.txt"));
    expect(spawnSync("mkfifo", [path.join(sandbox.workspace, "a.txt")]).status).toBe(0);
    await expect(workspace.openFile(checked)).rejects.toMatchObject({ code: "refused" });
  });
});

describe("devices, FIFOs and sockets", () => {
  beforeEach(() => setUp());

  it("refuses a FIFO in the workspace (and does not block on it)", async () => {
    expect(spawnSync("mkfifo", [path.join(sandbox.workspace, "pipe")]).status).toBe(0);
    for (const tool of ["read_file", "stat"]) {
      expectFailure(await callTool(runtime, tool, { path: "pipe" }), "refused");
    }
    expectFailure(await callTool(runtime, "write_file", { path: "pipe", content: "x" }), "refused");
    const listing = expectSuccess(await callTool(runtime, "ls", {}));
    expect(listing.entries).toContainEqual({ name: "pipe", type: "other" });
  });

  it("refuses device files reached through a symlink", async () => {
    await symlink("/dev/zero", path.join(sandbox.workspace, "zero"));
    await symlink("/dev/null", path.join(sandbox.workspace, "null"));
    expectFailure(await callTool(runtime, "read_file", { path: "zero" }), "refused");
    expectFailure(await callTool(runtime, "write_file", { path: "null", content: "x" }), "refused");
  });
});

describe("the data directory inside the workspace", () => {
  beforeEach(async () => {
    await setUp({ dataInside: true });
    await writeFile(path.join(sandbox.dataDir, "secret.key"), `${secret}\n`);
  });

  it("is refused by every tool, by name and through a symlink", async () => {
    await expectAllRefuse(".peergate");
    await expectAllRefuse(".peergate/secret.key");
    await expectAllRefuse("dir/../.peergate/secret.key");
    await symlink(".peergate", path.join(sandbox.workspace, "alias"));
    await expectAllRefuse("alias/secret.key");
  });

  it("is invisible to ls, find and grep", async () => {
    const listing = expectSuccess(await callTool(runtime, "ls", {}));
    expect(JSON.stringify(listing)).not.toContain(".peergate");
    const found = expectSuccess(await callTool(runtime, "find", { pattern: "*" }));
    expect(JSON.stringify(found)).not.toContain(".peergate");
    const grep = expectSuccess(await callTool(runtime, "grep", { pattern: "SECRET" }));
    expect(grep.matches).toEqual([]);
  });

  it("cannot be the workspace itself", async () => {
    await expect(startRuntime({ ...sandbox, dataDir: sandbox.workspace })).rejects.toMatchObject({
      code: "config-invalid",
    });
  });
});

describe("huge and binary files", () => {
  beforeEach(() => setUp());

  it("bounds a huge text file to a window and flags what is left", async () => {
    const line = `${"x".repeat(199)}\n`;
    await writeFile(path.join(sandbox.workspace, "huge.txt"), line.repeat(50_000)); // 10 MB
    const window = expectSuccess(
      await callTool(runtime, "read_file", { path: "huge.txt", limit: 1000 }),
    );
    expect(window).toMatchObject({ fromLine: 1, toLine: 1000, more: true, bytes: 10_000_000 });
    // The default 2000 lines of 200 bytes are more than the 256 KiB a call returns.
    const first = await callTool(runtime, "read_file", { path: "huge.txt" });
    expect(first).toMatchObject({ ok: true, truncated: true });
    expect(Buffer.byteLength(expectSuccess(first).text as string)).toBeLessThanOrEqual(256 * 1024);
    const wide = await callTool(runtime, "read_file", {
      path: "huge.txt",
      offset: 40_000,
      limit: 10_000,
    });
    expect(wide).toMatchObject({ ok: true, truncated: true });
    const text = expectSuccess(wide).text as string;
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(256 * 1024);
    expect(expectSuccess(wide).fromLine).toBe(40_000);
  });

  it("cuts a single enormous line and says so", async () => {
    await writeFile(path.join(sandbox.workspace, "one-line.json"), "y".repeat(3_000_000));
    const result = await callTool(runtime, "read_file", { path: "one-line.json" });
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect((expectSuccess(result).text as string).length).toBe(8192);
  });

  it("refuses binary files with a description, not their bytes", async () => {
    const png = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      Buffer.alloc(100),
    ]);
    await writeFile(path.join(sandbox.workspace, "image.png"), png);
    const error = expectFailure(
      await callTool(runtime, "read_file", { path: "image.png" }),
      "refused",
    );
    expect(error).toContain("PNG image");
    await writeFile(
      path.join(sandbox.workspace, "latin1.txt"),
      Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
    );
    expectFailure(await callTool(runtime, "read_file", { path: "latin1.txt" }), "refused");
    // NUL bytes past the first 64 KiB chunk, inside the window asked for.
    const late = Buffer.concat([Buffer.from("text-text\n".repeat(7000)), Buffer.from([0, 1, 2])]);
    await writeFile(path.join(sandbox.workspace, "late.bin"), late);
    expectFailure(
      await callTool(runtime, "read_file", { path: "late.bin", limit: 10_000 }),
      "refused",
    );
    expectFailure(
      await callTool(runtime, "edit_file", { path: "image.png", oldString: "PNG", newString: "x" }),
      "refused",
    );
  });
});

describe("hard links: reads follow the file, not the path", () => {
  beforeEach(async () => {
    await setUp();
    // A second name, inside the workspace, for a file outside it.
    await link(
      path.join(sandbox.outside, "secret.txt"),
      path.join(sandbox.workspace, "planted.txt"),
    );
  });

  it("refuses to read or edit a file with more than one hard link", async () => {
    for (const [tool, args] of [
      ["read_file", { path: "planted.txt" }],
      ["grep", { pattern: "SECRET", path: "planted.txt" }],
      ["edit_file", { path: "planted.txt", oldString: "TOP", newString: "pwned" }],
    ] as const) {
      const error = expectFailure(await callTool(runtime, tool, args), "refused");
      expect(error, tool).toContain("hard links");
      expect(error, tool).not.toContain(secret);
    }
    expect(await readFile(path.join(sandbox.outside, "secret.txt"), "utf8")).toBe(`${secret}\n`);
  });

  it("skips it when grep walks the workspace, and says so", async () => {
    const result = expectSuccess(await callTool(runtime, "grep", { pattern: "SECRET" }));
    expect(result.matches).toEqual([]);
    expect(result.skipped).toEqual({ large: 0, binary: 0, linked: 1 });
    expect(JSON.stringify(result)).not.toContain(secret);
  });

  it("reads it when the operator allows hard links", async () => {
    const allowing = await startRuntime(sandbox, { allowHardLinks: true });
    try {
      const read = expectSuccess(await callTool(allowing, "read_file", { path: "planted.txt" }));
      expect(JSON.stringify(read)).toContain(secret);
    } finally {
      await allowing.close();
    }
  });
});

/** Whether this machine lets an unprivileged user namespace bind-mount (unshare -rm). */
const canBindMount =
  spawnSync("unshare", ["-rm", "sh", "-c", 'mount --bind "$1" "$1"', "sh", os.tmpdir()], {
    stdio: "ignore",
  }).status === 0;

describe.skipIf(!canBindMount)("the data directory under a second name (a bind mount)", () => {
  beforeEach(async () => {
    await setUp();
    await writeFile(path.join(sandbox.dataDir, "secret.key"), `${secret}\n`);
    await mkdir(path.join(sandbox.workspace, "mnt"));
  });

  it("is refused by identity (device and inode), not only by path", () => {
    const fixture = fileURLToPath(new URL("./fixtures/data-dir-by-identity.ts", import.meta.url));
    const child = spawnSync(
      "unshare",
      [
        "-rm",
        "sh",
        "-c",
        'mount --bind "$1" "$2" && exec "$3" "$4" "$5" "$6"',
        "sh",
        sandbox.dataDir,
        path.join(sandbox.workspace, "mnt"),
        process.execPath,
        fixture,
        sandbox.workspace,
        sandbox.dataDir,
      ],
      { encoding: "utf8" },
    );
    expect(child.status, child.stderr).toBe(0);
    const result = JSON.parse(child.stdout) as Record<string, string>;
    for (const [attempt, outcome] of Object.entries(result)) {
      expect(outcome, attempt).toMatch(/^refused: .*data directory/);
    }
  });
});
