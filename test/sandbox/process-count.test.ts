// The process-count limit holds whoever the server runs as, or nothing runs. As root the kernel
// ignores RLIMIT_NPROC, so a root server puts every sandbox in a pids cgroup of its own; where no
// pids cgroup can be used, every command is refused with the fix (and the start-up probe fails),
// never run unlimited. The fork past the limit itself is attacked in attacks.security.test.ts.
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { createBwrapBackend } from "../../src/sandbox/bwrap.ts";
import {
  createPidsCgroups,
  detectProcessCountLimit,
  findPidsCgroup,
  serverCgroupName,
} from "../../src/sandbox/pids-cgroup.ts";
import { probeSandbox } from "../../src/sandbox/probe.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import { eventually } from "../support/eventually.ts";
import { buildPolicies, callTool, silentLogger } from "../tools/support.ts";
import { alive, describeWithBwrap, makeSandboxWorkspace } from "./support.ts";

const v1Mountinfo = [
  "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
  "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids",
  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
].join("\n");

describe("finding this process's pids cgroup", () => {
  it("reads the cgroup v1 pids hierarchy", () => {
    expect(
      findPidsCgroup({
        procSelfCgroup: "8:pids:/machine/app\n4:memory:/x\n0::/\n",
        mountinfo: v1Mountinfo,
      }),
    ).toEqual({ dir: "/sys/fs/cgroup/pids/machine/app", version: 1 });
  });

  it("follows a mount whose root is not the hierarchy's root", () => {
    expect(
      findPidsCgroup({
        procSelfCgroup: "8:pids:/docker/abc/inner\n",
        mountinfo: "39 31 0:36 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids",
      }),
    ).toEqual({ dir: "/sys/fs/cgroup/pids/inner", version: 1 });
  });

  it("finds none where pids is mounted for neither version", () => {
    const found = findPidsCgroup({
      procSelfCgroup: "4:memory:/x\n",
      mountinfo: "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
    });
    expect(found).toEqual({ problem: "no pids cgroup controller is mounted for this process" });
  });
});

describe("deciding how processes are counted", () => {
  it("uses RLIMIT_NPROC alone for a server that is not root", () => {
    expect(detectProcessCountLimit({ euid: 1000 })).toEqual({ kind: "rlimit" });
  });

  it("refuses, naming why, when root has no pids cgroup", () => {
    const limit = detectProcessCountLimit({
      euid: 0,
      source: { procSelfCgroup: "0::/\n", mountinfo: "" },
    });
    expect(limit.kind).toBe("unavailable");
    expect(limit.kind === "unavailable" && limit.problem).toContain("RLIMIT_NPROC");
  });
});

describe("a root server without a pids cgroup (fail closed)", () => {
  let base: string;
  let workspace: string;
  const backend = createBwrapBackend({
    processCountLimit: { kind: "unavailable", problem: "no pids cgroup here (test)" },
  });
  beforeAll(async () => {
    base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-nproc-")));
    workspace = path.join(base, "workspace");
    await mkdir(workspace);
  });
  afterAll(() => rm(base, { recursive: true, force: true }));

  it("fails the start-up probe with the fix", async () => {
    const probe = await probeSandbox(backend);
    expect(probe.ok).toBe(false);
    expect(probe.ok === false && probe.problem).toContain("process-count limit cannot be applied");
    expect(probe.ok === false && probe.problem).toContain("unprivileged user");
  });

  it("refuses a tool call, and nothing runs", async () => {
    const runtime = await createToolRuntime({
      policies: buildPolicies(
        parseToolsPolicy(
          "commands:\n  - {name: touch_it, description: Touch., mode: fixed, program: touch, args: [ran], risk: read-only, disclosure: public, egress: false}\n",
          "tools.yaml",
          builtinDescriptors,
        ),
      ),
      workspace,
      dataDir: path.join(base, "data"),
      env: { PATH: "/usr/bin:/bin" },
      sandbox: backend,
      logger: silentLogger,
    });
    try {
      const result = await callTool(runtime, "touch_it", {});
      expect(result).toMatchObject({ ok: false, code: "refused" });
      expect(JSON.stringify(result)).toContain("cannot limit this command's processes");
      expect(existsSync(path.join(workspace, "ran"))).toBe(false);
    } finally {
      await runtime.close();
    }
  });
});

const counting = detectProcessCountLimit();
describeWithBwrap("the sandboxes' pids cgroups", () => {
  it.skipIf(counting.kind !== "cgroup")(
    `each sandbox gets one with its limit, removed once it ended${counting.kind === "cgroup" ? "" : " — skipped: the server here is not root, RLIMIT_NPROC binds"}`,
    async () => {
      if (counting.kind !== "cgroup") return;
      const cgroups = createPidsCgroups(counting.parent, counting.version);
      const procs = cgroups.create(17);
      const dir = path.dirname(procs);
      expect((await import("node:fs")).readFileSync(path.join(dir, "pids.max"), "utf8")).toBe(
        "17\n",
      );
      expect(cgroups.live).toBe(1);
      // Never joined and not yet abandoned: kept (its launcher may still be starting).
      cgroups.create(5);
      expect(cgroups.live).toBeGreaterThanOrEqual(1);
      const backend = createBwrapBackend({ processCountLimit: counting });
      const workspace = await makeSandboxWorkspace();
      const probe = await probeSandbox(backend, { workspace });
      await rm(workspace, { recursive: true, force: true });
      expect(probe.ok).toBe(true);
      await eventually("the counting command to start", async () => existsSync(counting.parent));
    },
  );

  it.skipIf(counting.kind !== "cgroup")(
    `a crashed server's sandboxes still running in its cgroup are killed at the next start${counting.kind === "cgroup" ? "" : " — skipped: not root, no cgroup"}`,
    async () => {
      if (counting.kind !== "cgroup") return;
      const { spawn, spawnSync } = await import("node:child_process");
      const { mkdirSync, readFileSync, writeFileSync } = await import("node:fs");
      // A server that is gone: a pid no process has now.
      const gone = spawnSync("true").pid ?? 0;
      expect(alive(gone)).toBe(false);
      const stale = path.join(path.dirname(counting.parent), serverCgroupName(gone));
      const sandbox = path.join(stale, "s0-0");
      mkdirSync(sandbox, { recursive: true });
      // What its sandbox left: a shell that, once inside the cgroup, starts two more processes.
      const shell = spawn("sh", ["-c", "read go; sleep 300 & sleep 300"], {
        stdio: ["pipe", "ignore", "ignore"],
        detached: true,
      });
      const exited = new Promise((resolve) => shell.once("exit", resolve));
      try {
        const join = counting.version === 1 ? "tasks" : "cgroup.procs";
        writeFileSync(path.join(sandbox, join), String(shell.pid));
        shell.stdin?.write("go\n");
        const inside = () =>
          readFileSync(path.join(sandbox, "cgroup.procs"), "utf8")
            .trim()
            .split(/\s+/)
            .filter(Boolean);
        await eventually("the shell and its two sleeps in the cgroup", async () =>
          inside().length === 3 ? true : undefined,
        );
        const left = inside().map(Number);

        // The next start (this is what a server does at start).
        expect(detectProcessCountLimit()).toMatchObject({ kind: "cgroup" });

        await exited;
        await eventually("every process of the crashed server's sandbox to be gone", async () =>
          left.every((pid) => !alive(pid)) ? true : undefined,
        );
        expect(existsSync(stale)).toBe(false);
      } finally {
        shell.kill("SIGKILL");
      }
    },
  );

  it.skipIf(counting.kind !== "cgroup")(
    `leaves the cgroup of a server in another PID namespace, whose pid says nothing here${counting.kind === "cgroup" ? "" : " — skipped: not root, no cgroup"}`,
    async () => {
      if (counting.kind !== "cgroup") return;
      const { spawn, spawnSync } = await import("node:child_process");
      const { mkdirSync, rmdirSync, writeFileSync } = await import("node:fs");
      const free = spawnSync("true").pid ?? 0;
      // Not this namespace's number (an inode is never 1): a container's server, sharing the cgroup.
      const foreign = path.join(path.dirname(counting.parent), `peergate-1-${free}`);
      const sandbox = path.join(foreign, "s0-0");
      mkdirSync(sandbox, { recursive: true });
      const sleeper = spawn("sleep", ["300"], { stdio: "ignore", detached: true });
      try {
        writeFileSync(
          path.join(sandbox, counting.version === 1 ? "tasks" : "cgroup.procs"),
          String(sleeper.pid),
        );
        expect(detectProcessCountLimit()).toMatchObject({ kind: "cgroup" });
        expect(alive(sleeper.pid ?? 0)).toBe(true);
        expect(existsSync(sandbox)).toBe(true);
      } finally {
        sleeper.kill("SIGKILL");
        await new Promise((resolve) => sleeper.once("exit", resolve));
        await eventually("the sleeper out of the cgroup", async () => {
          try {
            rmdirSync(sandbox);
            rmdirSync(foreign);
            return true;
          } catch {
            return undefined;
          }
        });
      }
    },
  );

  it.skipIf(counting.kind !== "cgroup")(
    `a launcher that cannot join its cgroup runs nothing${counting.kind === "cgroup" ? "" : " — skipped: not root, no cgroup"}`,
    async () => {
      const base = await makeSandboxWorkspace("peergate-nproc-join-");
      try {
        const backend = createBwrapBackend();
        const command = backend.wrap({
          argv: ["touch", "ran"],
          workspace: base,
          cwd: base,
          env: { PATH: "/usr/bin:/bin" },
          egress: false,
          limits: {
            processes: 8,
            cpuSeconds: 5,
            fileSizeBytes: 1024,
            memoryBytes: 1 << 30,
            tmpBytes: 1 << 20,
          },
        });
        // The cgroup is gone before the launcher starts (removed by hand, a cleaner elsewhere).
        const file = command.args[3] ?? "";
        const { rmdirSync } = await import("node:fs");
        rmdirSync(path.dirname(file));
        const { spawnSync } = await import("node:child_process");
        const run = spawnSync(command.command, [...command.args], { env: command.env });
        expect(run.status).toBe(125);
        expect(run.stderr.toString()).toContain("could not join its pids cgroup");
        expect(existsSync(path.join(base, "ran"))).toBe(false);
      } finally {
        await rm(base, { recursive: true, force: true });
      }
    },
  );
});
