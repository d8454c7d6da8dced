// Attacking the bubblewrap sandbox from inside, through the real tool runtime: a declared `sh`
// tool (and execute_command) runs what an attacker would run, and every attempt to read the data
// directory, the home directories or the server's /proc, to write outside the workspace, to reach
// a loopback listener without egress, to leave a process behind, or to exhaust the machine must
// fail, with the workspace, the data directory and this process untouched.
import {
  chmod,
  mkdir,
  mkdtemp,
  readFile,
  realpath,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { createServer, type Server } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlSocketPath } from "../../src/control/protocol.ts";
import { parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { createRedactor } from "../../src/sandbox/redact.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { createToolRuntime } from "../../src/tools/runtime.ts";
import type { ToolRuntime } from "../../src/tools/types.ts";
import { eventually } from "../support/eventually.ts";
import {
  buildPolicies,
  callTool,
  expectApproval,
  expectFailure,
  expectSuccess,
  runHalf,
  silentLogger,
} from "../tools/support.ts";
import {
  bwrapBackend,
  describeWithBwrap,
  giveToSandboxUser,
  hostProcessesWith,
  snapshotTree,
} from "./support.ts";

const adminToken = `admin-${"a".repeat(40)}`;
const secretKey = "b".repeat(64);
const envSecret = "env-secret-value-0123456789";
const limits = "{processes: 64, cpuSeconds: 2, fileSizeBytes: 1048576, memoryBytes: 268435456}";

let base: string;
let workspace: string;
let dataDir: string;
let outside: string;
let runtime: ToolRuntime;

type Output = { exitCode: number | null; signal: string | null; stdout: string; stderr: string };

async function sh(script: string, options: { online?: boolean; signal?: AbortSignal } = {}) {
  const result = await callTool(
    runtime,
    options.online ? "sh_online" : "sh_offline",
    { program: "bash", arguments: ["-c", script] },
    options.signal,
  );
  return expectSuccess(result) as unknown as Output;
}

/** The host's view of everything an attack could change. */
async function snapshotAll() {
  return {
    workspace: await snapshotTree(workspace),
    data: await snapshotTree(dataDir),
    outside: await snapshotTree(outside),
  };
}

describeWithBwrap("the bwrap sandbox, attacked from inside", () => {
  beforeAll(async () => {
    base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-sandbox-")));
    workspace = path.join(base, "workspace");
    dataDir = path.join(base, "data");
    outside = path.join(base, "outside");
    for (const dir of [workspace, dataDir, outside]) await mkdir(dir, { recursive: true });
    await writeFile(path.join(dataDir, "admin-token"), adminToken);
    await writeFile(path.join(dataDir, "secret-key"), secretKey);
    await writeFile(path.join(outside, "victim.txt"), "original\n");
    await writeFile(path.join(workspace, "README.md"), "# inside\n");
    // Placed by someone earlier: links out of the workspace, to the data dir and to outside.
    await symlink(dataDir, path.join(workspace, "data-link"));
    await symlink(outside, path.join(workspace, "outside-link"));
    // The data directory and `outside` are readable to anyone by their modes: what keeps them
    // out of reach is the sandbox, not the permissions (a root server's would be 0700).
    await chmod(base, 0o755);
    await giveToSandboxUser(workspace);
    const toolsPolicy = parseToolsPolicy(
      `commands:
  - {name: sh_offline, description: Run a shell., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: false, limits: ${limits}}
  - {name: sh_online, description: Run a shell with a network., mode: structured, programs: [bash], risk: high-risk, allowOptions: true, disclosure: public, egress: true, limits: ${limits}}
`,
      "tools.yaml",
      builtinDescriptors,
    );
    runtime = await createToolRuntime({
      policies: buildPolicies(toolsPolicy),
      workspace,
      dataDir,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: os.homedir(),
        LANG: "C.UTF-8",
        SERVICE_TOKEN: envSecret,
        PEERGATE_ADMIN_TOKEN: adminToken,
      },
      sandbox: bwrapBackend,
      redactor: createRedactor([adminToken, secretKey, envSecret]),
      logger: silentLogger,
      killGraceMs: 500,
    });
  });

  afterAll(async () => {
    await runtime?.close();
    if (base) await rm(base, { recursive: true, force: true });
  });

  describe("reads", () => {
    it.each([
      ["the data dir by absolute path", () => `cat ${dataDir}/admin-token ${dataDir}/secret-key`],
      ["the data dir through ..", () => "cat ../data/admin-token ./../data/secret-key"],
      ["the data dir through a symlink in the workspace", () => "cat data-link/admin-token"],
      ["the data dir through /proc/self/cwd", () => "cat /proc/self/cwd/../data/admin-token"],
      ["/root", () => "ls -a /root && cat /root/.bash_history"],
      ["/home", () => "ls -a /home"],
      ["/etc/shadow or TLS private keys", () => "cat /etc/shadow || ls -a /etc/ssl/private"],
      ["the server's environment", () => `cat /proc/${process.pid}/environ`],
      ["the server's files through /proc", () => `ls /proc/${process.pid}/root/`],
    ])("cannot read %s", async (_what, script) => {
      const out = await sh(script());
      expect(out.exitCode).not.toBe(0);
      for (const secret of [adminToken, secretKey, "original"]) {
        expect(out.stdout).not.toContain(secret);
        expect(out.stderr).not.toContain(secret);
      }
    });

    it("sees no process of the host, and PID 1's environment is PATH only", async () => {
      const out = await sh(
        "ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; tr '\\0' '\\n' < /proc/1/environ",
      );
      expect(out.exitCode).toBe(0);
      const [pids = "", ...environ] = out.stdout.split("\n");
      // Only the sandbox's own few processes, numbered from 1.
      const seen = pids.trim().split(" ").map(Number);
      expect(Math.max(...seen)).toBeLessThan(100);
      expect(seen).not.toContain(process.pid);
      expect(environ.filter((l) => l !== "")).toEqual(["PATH=/usr/bin:/bin"]);
    });

    it("gets an allowlisted environment with its own HOME, and secrets are redacted by value", async () => {
      const out = await sh(`env; id -u; printf '%s\\n' ${adminToken} ${envSecret}`);
      expect(out.stdout).not.toContain("SERVICE_TOKEN");
      expect(out.stdout).not.toContain("PEERGATE_");
      expect(out.stdout).toContain("HOME=/tmp\n");
      expect(out.stdout).toContain("65534\n");
      expect(out.stdout).not.toContain(adminToken);
      expect(out.stdout).not.toContain(envSecret);
      expect(out.stdout).toContain("[redacted]\n[redacted]\n");
    });
  });

  describe("writes", () => {
    it.each([
      ["by absolute path", () => `echo pwned > ${outside}/victim.txt`],
      ["through ..", () => "echo pwned > ../outside/victim.txt"],
      ["through ./../", () => "echo pwned > ./../outside/new.txt"],
      ["through doubled slashes and /./", () => `echo pwned > ${base}//./outside/new.txt`],
      ["through a symlink in the workspace", () => "echo pwned > outside-link/victim.txt"],
      // Spelled through variables where the denylist would see the literal text: here the sandbox
      // alone must stop it (test/shell/ pins what the denylist refuses).
      ["through /proc/self/cwd", () => "c=/proc/self/cwd; echo pwned > $c/../outside/victim.txt"],
      ["into the data dir", () => `echo pwned > ${dataDir}/admin-token`],
      ["into the data dir through a symlink", () => "echo pwned > data-link/admin-token"],
      ["by deleting outside", () => `r=rm; $r -r ${outside} ../data ${dataDir}`],
      ["by moving a file in", () => "mv ../outside/victim.txt ./stolen.txt"],
      ["by hard-linking a file in", () => `ln ${dataDir}/admin-token ./token-link`],
      [
        "into system files",
        () => "u=/usr; e=/etc; echo pwned > $u/bin/pwned || echo pwned >> $e/passwd",
      ],
    ])("cannot write outside the workspace %s", async (_how, script) => {
      const before = await snapshotAll();
      const out = await sh(script());
      expect(out.exitCode).not.toBe(0);
      expect(await snapshotAll()).toEqual(before);
      expect(await readFile(path.join(outside, "victim.txt"), "utf8")).toBe("original\n");
    });

    it("writes that succeed outside the workspace land in the sandbox's own /tmp, and vanish", async () => {
      const before = await snapshotAll();
      const out = await sh(
        `mkdir -p ${outside} && echo pwned > ${outside}/victim.txt && cat ${outside}/victim.txt`,
      );
      expect(out.stdout).toBe("pwned\n");
      expect(await snapshotAll()).toEqual(before);
      const again = await sh(`cat ${outside}/victim.txt`);
      expect(again.exitCode).not.toBe(0);
    });

    it("can write inside the workspace (the boundary is not a wall around everything)", async () => {
      const out = await sh("echo made > made.txt && cat made.txt");
      expect(out.stdout).toBe("made\n");
      expect(await readFile(path.join(workspace, "made.txt"), "utf8")).toBe("made\n");
      await rm(path.join(workspace, "made.txt"));
    });
  });

  describe("network", () => {
    let listener: Server;
    let port: number;
    let connections = 0;
    beforeAll(async () => {
      listener = createServer((socket) => {
        connections++;
        socket.end("hello from the host\n");
      });
      await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
      port = (listener.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((resolve) => listener.close(() => resolve())));

    // Spelled so the denylist's /dev/tcp rule does not see it (the known bypass): the sandbox is
    // what has to stop it.
    const connect = () => `d=/dev; exec 3<>$d/tcp/127.0.0.1/${port} && echo connected && cat <&3`;

    it("a tool without egress cannot reach a host listener on 127.0.0.1", async () => {
      const before = connections;
      const out = await sh(connect());
      expect(out.exitCode).not.toBe(0);
      expect(out.stdout).not.toContain("connected");
      expect(connections).toBe(before);
    });

    it("a tool that declares egress can", async () => {
      const before = connections;
      const out = await sh(connect(), { online: true });
      expect(out.stdout).toContain("connected\nhello from the host");
      expect(connections).toBe(before + 1);
    });
  });

  describe("the server's sockets, processes and terminal", () => {
    const servers: Server[] = [];
    let accepted = 0;
    const listenUnix = async (file: string) => {
      const server = createServer((socket) => {
        accepted++;
        socket.end("secret-bearing answer\n");
      });
      await new Promise<void>((resolve) => server.listen(file, resolve));
      servers.push(server);
    };
    let controlSocket: string;
    let postgresSocket: string;
    let hostTmpSocket: string;
    beforeAll(async () => {
      // Where the server's control socket lives (in the data dir), where PostgreSQL puts its
      // socket (a host directory, here a stand-in for /var/run/postgresql), and a socket in the
      // host's /tmp (PostgreSQL's other default).
      controlSocket = controlSocketPath(dataDir);
      postgresSocket = path.join(outside, ".s.PGSQL.5432");
      hostTmpSocket = path.join(os.tmpdir(), `.s.PGSQL.${process.pid}`);
      for (const file of [controlSocket, postgresSocket, hostTmpSocket]) await listenUnix(file);
    });
    afterAll(async () => {
      for (const server of servers.splice(0)) {
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    });

    it.each([
      ["the control socket", () => controlSocket],
      ["PostgreSQL's socket in a host directory", () => postgresSocket],
      ["a socket in the host's /tmp", () => hostTmpSocket],
    ])("cannot connect to %s, even with egress", async (_what, file) => {
      const before = accepted;
      for (const online of [false, true]) {
        const out = await sh(
          `perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "no: $!\\n"; print "connected: ", <$s>' '${file()}'`,
          { online },
        );
        expect(out.stdout).not.toContain("connected");
        expect(out.stderr).toContain("no: No such file or directory");
      }
      expect(accepted).toBe(before);
    });

    it("cannot reach a PostgreSQL-like port on 127.0.0.1 without egress", async () => {
      const listener = createServer((socket) => {
        accepted++;
        socket.end();
      });
      await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
      const port = (listener.address() as { port: number }).port;
      const before = accepted;
      const out = await sh(
        `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1:${port}") or die "no: $!\\n"; print "connected\\n"'`,
      );
      await new Promise<void>((resolve) => listener.close(() => resolve()));
      expect(out.stdout).not.toContain("connected");
      expect(out.stderr).toMatch(/no: (Connection refused|Network is unreachable)/);
      expect(accepted).toBe(before);
    });

    it("cannot ptrace the server: its PID does not exist inside, and ptrace is refused", async () => {
      // ptrace(PTRACE_ATTACH, pid): the syscall number is the architecture's.
      const out = await sh(
        `perl -MConfig -e 'my $nr = $Config{archname} =~ /aarch64/ ? 117 : 101; my $r = syscall($nr, 16, ${process.pid}, 0, 0); print "ptrace=$r err=", ($!+0), "\\n"; print kill(0, ${process.pid}) ? "visible\\n" : "invisible\\n"'`,
      );
      // EPERM: the seccomp filter refuses ptrace before the PID is even looked up (ESRCH).
      expect(out.stdout).toContain("ptrace=-1 err=1\n");
      expect(out.stdout).toContain("invisible\n");
    });

    it("has no terminal to push input into (TIOCSTI)", async () => {
      // A new session has no controlling terminal; its standard streams are pipes.
      const out = await sh(
        `perl -e 'print open(my $t, "<", "/dev/tty") ? "tty opened\\n" : "tty: $!\\n"; my %h = (0 => *STDIN, 1 => *STDOUT, 2 => *STDERR); for my $fd (0, 1, 2) { my $c = "x"; print ioctl($h{$fd}, 0x5412, $c) ? "fd $fd: injected\\n" : "fd $fd: $!\\n" }'`,
      );
      expect(out.stdout).not.toContain("tty opened");
      expect(out.stdout).not.toContain("injected");
      expect(out.stdout).toMatch(/tty: No such device or address/);
      // The seccomp filter refuses TIOCSTI on any descriptor, terminal or not.
      expect(out.stdout).toMatch(/fd 1: Operation not permitted/);
    });
  });

  describe("processes", () => {
    it("a setsid, double-forked or nohup child is dead when the call returns", async () => {
      const marker = String(7_700_000 + Math.floor(Math.random() * 99_999));
      const out = await sh(
        `setsid sleep ${marker}1 & (sleep ${marker}2 &) & nohup sleep ${marker}3 >/dev/null 2>&1 & ` +
          `disown -a; echo started`,
      );
      expect(out.stdout).toBe("started\n");
      await eventually(
        "no process of the command to be left",
        async () => (await hostProcessesWith(marker)).length === 0,
      );
    });

    it("a cancel kills every process of the call, setsid ones included", async () => {
      const marker = String(7_800_000 + Math.floor(Math.random() * 99_999));
      const controller = new AbortController();
      const running = callTool(
        runtime,
        "sh_offline",
        {
          program: "bash",
          arguments: ["-c", `setsid sleep ${marker}1 & (sleep ${marker}2 &) & sleep ${marker}3`],
        },
        controller.signal,
      );
      await eventually(
        "the three sleeps to be running",
        async () => (await hostProcessesWith(`sleep ${marker}`)).length === 3,
      );
      controller.abort();
      expectFailure(await running, "interrupted");
      await eventually(
        "no process of the command to be left",
        async () => (await hostProcessesWith(marker)).length === 0,
      );
    });

    it("execute_command runs in the same sandbox", async () => {
      const proposal = expectApproval(
        await callTool(runtime, "execute_command", {
          program: "cat",
          args: ["../data/admin-token", "/proc/1/environ"],
        }),
      );
      const out = expectSuccess(await runHalf(runtime, "execute_command", proposal)) as Output;
      expect(out.exitCode).not.toBe(0);
      expect(out.stdout).not.toContain(adminToken);
      expect(out.stdout).toBe("PATH=/usr/bin:/bin\0");
    });
  });

  describe("resources", () => {
    // As root the kernel ignores RLIMIT_NPROC; the sandbox's own pids cgroup holds instead
    // (src/sandbox/pids-cgroup.ts), so this runs whatever user the tests run as. perl forks
    // rather than bash, which sleeps 15 s and then exits when a fork keeps failing.
    it("cannot fork past the process limit", async () => {
      const out = await sh(
        `perl -e 'my $n = 0; for (1 .. 200) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 30; exit 0 } $n++ } print "forked $n\\n"'`,
      );
      const forked = Number(/forked (\d+)/.exec(out.stdout)?.[1] ?? "200");
      expect(forked).toBeLessThan(64);
      // It did run, and forked up to the limit: the limit, not a broken sandbox, stopped it.
      expect(forked).toBeGreaterThan(32);
    });

    it("cannot exhaust memory: an allocation past the address-space limit fails", async () => {
      const before = process.memoryUsage().rss;
      // One allocation past the limit (tail /dev/zero gets there too, but spends most of the 2
      // CPU seconds on the way on a loaded machine).
      const out = await sh("python3 -c 'bytearray(300 * 1024 * 1024)'; echo exit=$?");
      expect(out.stdout).toMatch(/exit=[1-9]/);
      expect(out.stderr).toMatch(/MemoryError/);
      // This process did not pay for it.
      expect(process.memoryUsage().rss - before).toBeLessThan(256 * 1024 * 1024);
    });

    it("cannot spin past its CPU seconds", async () => {
      const out = await sh("while :; do :; done");
      // SIGXCPU kills the loop (bash reports 128 + 24); the call's own timeout was not needed.
      expect(out.exitCode).not.toBe(0);
      expect(out.exitCode).not.toBeNull();
    });

    it("cannot write a file past the size limit", async () => {
      const out = await sh("head -c 3000000 /dev/zero > big.bin; echo exit=$?");
      expect(out.stdout).toMatch(/exit=[1-9]/);
      const size = (await stat(path.join(workspace, "big.bin"))).size;
      expect(size).toBeLessThanOrEqual(1024 * 1024);
      await rm(path.join(workspace, "big.bin"));
    });

    it("leaves this process working after every attack", async () => {
      const out = await sh("echo still fine");
      expect(out.stdout).toBe("still fine\n");
    });
  });
});
