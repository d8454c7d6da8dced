// No tool process is ever uid 0 on the host, attacked from inside the real sandbox: as the tests
// run here (root), through the tool runtime, and as an unprivileged server (the backend in a child
// process running as nobody). Each attack is one a sandboxed command could make on a root server
// before: read its own host uid from outside, write a kernel setting under /proc/sys, make a user
// namespace (every capability again), mount, ptrace, keyctl, bpf, io_uring, x32 calls, and fill
// an uncapped /tmp or /dev/shm with memory no limit counts.
import { spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { createBwrapBackend } from "../../src/sandbox/bwrap.ts";
import { probeSandbox } from "../../src/sandbox/probe.ts";
import { buildSeccompFilter, refusedSyscalls } from "../../src/sandbox/seccomp.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { eventually } from "../support/eventually.ts";
import {
  approveAndRun,
  buildPolicies,
  callTool,
  expectSuccess,
  silentLogger,
} from "../tools/support.ts";
import {
  bwrapBackend,
  describeWithBwrap,
  hostProcessesWith,
  makeSandboxWorkspace,
  runsAsRoot,
  sandboxTestUser,
} from "./support.ts";

const limits = "{processes: 64, cpuSeconds: 20, memoryBytes: 268435456}";

type Output = { exitCode: number | null; signal: string | null; stdout: string; stderr: string };

/** What a process inside reports of itself, and the refused calls, as `name=errno` lines. */
const selfReport = `grep -E '^(Uid|Gid|NoNewPrivs|Seccomp|CapEff):' /proc/self/status
perl -MConfig -e '
  my $arm = $Config{archname} =~ /aarch64/;
  my %nr = $arm
    ? (mount => 40, ptrace => 117, keyctl => 219, bpf => 280, unshare => 97, clone => 220, io_uring_setup => 425, setns => 268, open_by_handle_at => 265, perf_event_open => 241, userfaultfd => 282)
    : (mount => 165, ptrace => 101, keyctl => 250, bpf => 321, unshare => 272, clone => 56, io_uring_setup => 425, setns => 308, open_by_handle_at => 304, perf_event_open => 298, userfaultfd => 323, x32_getpid => 39 | 0x40000000);
  my %args = (mount => ["none", "/tmp", "tmpfs", 0, 0], ptrace => [16, 1, 0, 0], keyctl => [0, -3, 0], bpf => [0, 0, 0], unshare => [0x10000000], clone => [0x10000000 | 17, 0, 0, 0, 0], io_uring_setup => [1, 0], setns => [0, 0], open_by_handle_at => [0, 0, 0], perf_event_open => [0, 0, -1, -1, 0], userfaultfd => [0], x32_getpid => []);
  for my $name (sort keys %nr) { $! = 0; my $r = syscall($nr{$name}, @{$args{$name}}); print "$name=", ($r == -1 ? $! + 0 : "ok"), "\\n" }'
python3 -c '
try:
    open("/proc/sys/kernel/core_pattern", "w").write(open("/proc/sys/kernel/core_pattern").read())
    print("core_pattern=written")
except OSError as e:
    print("core_pattern=" + e.strerror)'
unshare -U true 2>/dev/null && echo userns=made || echo userns=refused
`;

/** The `name=value` lines of a report. */
function fields(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split("\n")
      .map((line) => /^([\w]+)[=:]\s*(.*)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1] as string, (m[2] as string).trim()]),
  );
}

/** Checks that hold whoever the server runs as. */
function expectConfined(report: Record<string, string>): void {
  expect(report.NoNewPrivs).toBe("1");
  expect(report.Seccomp).toBe("2");
  expect(report.CapEff).toBe("0000000000000000");
  for (const name of [
    "mount",
    "ptrace",
    "keyctl",
    "bpf",
    "unshare",
    "clone",
    "io_uring_setup",
    "setns",
    "open_by_handle_at",
    "perf_event_open",
    "userfaultfd",
  ]) {
    expect(report[name], name).toBe("1"); // EPERM
  }
  if (os.arch() === "x64") expect(report.x32_getpid).toBe("1");
  expect(report.core_pattern).toBe("Read-only file system");
  expect(report.userns).toBe("refused");
}

describe("the seccomp filter as built", () => {
  it("is whole sock_filter entries and names every call docs/sandbox.md lists", async () => {
    const filter = buildSeccompFilter();
    expect(filter.length % 8).toBe(0);
    const doc = await readFile(path.resolve(import.meta.dirname, "../../docs/sandbox.md"), "utf8");
    for (const name of refusedSyscalls) expect(doc, name).toContain(`\`${name}\``);
  });
});

describeWithBwrap("a root server's sandbox is not root on the host", () => {
  let workspace: string;
  let runtime: ToolRuntime;

  async function sh(script: string): Promise<Output> {
    const result = await callTool(runtime, "sh", { program: "bash", arguments: ["-c", script] });
    return expectSuccess(result) as unknown as Output;
  }

  beforeAll(async () => {
    workspace = await makeSandboxWorkspace("peergate-host-user-");
    runtime = await createToolRuntime({
      policies: buildPolicies(
        parseToolsPolicy(
          `commands:
  - {name: sh, description: Run a shell., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: false, limits: ${limits}}
`,
          "tools.yaml",
          builtinDescriptors,
        ),
      ),
      workspace,
      dataDir: path.join(os.tmpdir(), "peergate-host-user-no-data"),
      env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" },
      sandbox: bwrapBackend,
      logger: silentLogger,
      killGraceMs: 500,
    });
  });

  afterAll(async () => {
    await runtime?.close();
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  it("runs as the workspace's owner outside (never uid 0), read from the host's /proc", async () => {
    const marker = `host-uid-${process.pid}-${Date.now()}`;
    const running = sh(`exec -a ${marker} sleep 30`);
    // The command itself (argv[0] is the marker) and every bwrap of its sandbox: by the time the
    // command runs, the launcher has become bwrap, so every host process of the sandbox is here.
    const find = async () => (await hostProcessesWith(marker)).filter((pid) => pid !== process.pid);
    const isCommand = async (pid: number) =>
      (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).startsWith(`${marker}\0`);
    let command: number | undefined;
    await eventually("the command's process", async () => {
      for (const pid of await find()) if (await isCommand(pid)) command = pid;
      return command !== undefined;
    });
    const owner = await stat(workspace);
    expect(owner.uid).not.toBe(0);
    const pids = await find();
    expect(pids.length).toBeGreaterThanOrEqual(2); // the command and bwrap
    for (const pid of pids) {
      const status = await readFile(`/proc/${pid}/status`, "utf8");
      const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/).map(Number);
      const gids = /^Gid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/).map(Number);
      expect(uids, `pid ${pid}`).toEqual([owner.uid, owner.uid, owner.uid, owner.uid]);
      expect(gids, `pid ${pid}`).toEqual([owner.gid, owner.gid, owner.gid, owner.gid]);
    }
    process.kill(command as number, "SIGKILL");
    await running;
  });

  it("cannot write /proc/sys, make a namespace, mount, ptrace, keyctl, bpf or io_uring", async () => {
    const out = await sh(selfReport);
    const report = fields(out.stdout);
    expectConfined(report);
    // Inside it is nobody, as before.
    expect(report.Uid?.split(/\s+/)[0]).toBe("65534");
  });

  it("keeps /tmp within its cap: a tool limited to 256 MiB cannot hold more there", async () => {
    const out = await sh("head -c 600M /dev/zero > /tmp/fill; echo held=$(stat -c %s /tmp/fill)");
    expect(out.stderr).toMatch(/No space left on device/);
    const held = Number(/held=(\d+)/.exec(out.stdout)?.[1]);
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(256 * 1024 * 1024);
  });

  it("has no other uncapped tmpfs: /dev is read-only, /dev/shm capped at 64 MiB", async () => {
    const out = await sh(
      "touch /dev/planted 2>&1; head -c 200M /dev/zero > /dev/shm/fill; echo held=$(stat -c %s /dev/shm/fill)",
    );
    expect(out.stdout).toMatch(/Read-only file system/);
    expect(out.stderr).toMatch(/No space left on device/);
    expect(Number(/held=(\d+)/.exec(out.stdout)?.[1])).toBeLessThanOrEqual(64 * 1024 * 1024);
  });

  it.skipIf(!runsAsRoot)(
    "files the server's own tools create are the workspace owner's, so a command can change them",
    async () => {
      expectSuccess(await callTool(runtime, "mkdir", { path: "made/deeper" }));
      expectSuccess(
        await approveAndRun(runtime, "write_file", {
          path: "made/deeper/note.txt",
          content: "a\n",
        }),
      );
      for (const made of ["made", "made/deeper", "made/deeper/note.txt"]) {
        const s = await stat(path.join(workspace, made));
        expect([s.uid, s.gid], made).toEqual([sandboxTestUser.uid, sandboxTestUser.gid]);
      }
      const out = await sh("echo b >> made/deeper/note.txt && mkdir made/deeper/more && echo ok");
      expect(out.stdout).toBe("ok\n");
      expect(await readFile(path.join(workspace, "made/deeper/note.txt"), "utf8")).toBe("a\nb\n");
    },
  );
});

describeWithBwrap("a root server with no unprivileged user to run commands as", () => {
  it.skipIf(!runsAsRoot)("refuses a root-owned workspace, with the fix", async () => {
    const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-root-ws-")));
    try {
      const probe = await probeSandbox(createBwrapBackend(), { workspace: base });
      expect(probe.ok).toBe(false);
      expect(probe.ok === false && probe.problem).toContain("is owned by root");
      expect(probe.ok === false && probe.problem).toContain(`chown -R`);
      // A workspace that does not exist yet would be made by root: refused the same way.
      const missing = await probeSandbox(createBwrapBackend(), {
        workspace: path.join(base, "missing"),
      });
      expect(missing.ok === false && missing.problem).toContain("ENOENT");
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it.skipIf(!runsAsRoot)("refuses a workspace its owner cannot reach", async () => {
    const base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-hidden-ws-")));
    try {
      const workspace = path.join(base, "workspace");
      await mkdir(workspace);
      await chmod(base, 0o700);
      const { chown } = await import("node:fs/promises");
      await chown(workspace, sandboxTestUser.uid, sandboxTestUser.gid);
      const probe = await probeSandbox(createBwrapBackend(), { workspace });
      expect(probe.ok === false && probe.problem).toContain(`${base} is not searchable`);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});

/** The backend in a child process running as nobody: a server that is not root. */
const unprivilegedScript = `
import { spawn } from "node:child_process";
import { createBwrapBackend } from ${JSON.stringify(path.resolve(import.meta.dirname, "../../src/sandbox/bwrap.ts"))};
import { resolveSandboxLimits } from ${JSON.stringify(path.resolve(import.meta.dirname, "../../src/sandbox/types.ts"))};
const [workspace, script] = process.argv.slice(2);
const command = createBwrapBackend().wrap({
  argv: ["bash", "-c", script], workspace, cwd: workspace, env: { PATH: "/usr/bin:/bin" },
  egress: false, limits: resolveSandboxLimits({ memoryBytes: 268435456 }),
});
const child = spawn(command.command, command.args, { cwd: command.cwd, env: command.env, stdio: "inherit" });
child.on("close", (code) => process.exit(code ?? 1));
`;

describeWithBwrap("an unprivileged server's sandbox", () => {
  let base: string;
  let workspace: string;
  beforeAll(async () => {
    base = await makeSandboxWorkspace("peergate-unprivileged-");
    workspace = path.join(base, "workspace");
    await mkdir(workspace);
    await writeFile(path.join(base, "run.ts"), unprivilegedScript);
    const { chown } = await import("node:fs/promises");
    await chown(workspace, sandboxTestUser.uid, sandboxTestUser.gid).catch(() => undefined);
  });
  afterAll(() => rm(base, { recursive: true, force: true }));

  /** Runs `script` sandboxed by a backend whose process is nobody (setpriv, when we are root). */
  function runUnprivileged(script: string): Promise<string> {
    const argv = [process.execPath, path.join(base, "run.ts"), workspace, script];
    const [command, ...args] = runsAsRoot
      ? [
          "/usr/bin/setpriv",
          `--reuid=${sandboxTestUser.uid}`,
          `--regid=${sandboxTestUser.gid}`,
          "--clear-groups",
          "--",
          ...argv,
        ]
      : argv;
    return new Promise((resolve, reject) => {
      const child = spawn(command as string, args, {
        env: { PATH: "/usr/bin:/bin", HOME: workspace },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        err += chunk.toString();
      });
      child.on("error", reject);
      child.on("close", (code) =>
        code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${err}\n${out}`)),
      );
    });
  }

  it("is as confined as a root server's: seccomp, no_new_privs, /proc/sys read-only", async () => {
    const report = fields(await runUnprivileged(selfReport));
    expectConfined(report);
  });

  it("keeps /tmp within its cap", async () => {
    const out = await runUnprivileged(
      "head -c 600M /dev/zero > /tmp/fill; echo held=$(stat -c %s /tmp/fill)",
    );
    expect(Number(/held=(\d+)/.exec(out)?.[1])).toBeLessThanOrEqual(256 * 1024 * 1024);
  });
});
