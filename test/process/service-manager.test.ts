// `Type=notify` readiness, as systemd would see it: a real `peergate serve` started with
// NOTIFY_SOCKET pointing at a Unix datagram socket of the test's sends READY=1 only after it
// listens (the URL it logs answers /healthz by then) and STOPPING=1 when SIGTERM starts its stop.
// The receiver is a few lines of Python (Node has no Unix datagram sockets); it closes the file
// descriptor systemd-notify's barrier passes, as the manager does, so the barrier completes.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoPoliciesDir } from "../support/app.ts";
import { spawnServeChild } from "../support/serve-process.ts";

function has(command: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
const missing = ["systemd-notify", "python3"].filter((c) => !has(c));
if (missing.length) {
  console.warn(`[service-manager] skipped: ${missing.join(" and ")} not installed`);
}

const receiverScript = `
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("bound", flush=True)
while True:
    data, ancdata, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
            for fd in fds:
                os.close(fd)
    print(data.decode().replace("\\n", " "), flush=True)
`;

describe.skipIf(missing.length > 0)("readiness for systemd (Type=notify)", () => {
  let dir: string;
  let receiver: ChildProcess;
  const messages: string[] = [];
  const waiters: (() => void)[] = [];
  const nextMessage = (match: RegExp) =>
    new Promise<string>((resolve) => {
      const look = () => {
        const found = messages.find((m) => match.test(m));
        if (found) resolve(found);
        else waiters.push(look);
      };
      look();
    });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-notify-"));
    await writeFile(path.join(dir, "receiver.py"), receiverScript);
    receiver = spawn("python3", [path.join(dir, "receiver.py"), path.join(dir, "notify.sock")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let buffer = "";
    receiver.stdout?.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        messages.push(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
        for (const waiter of waiters.splice(0)) waiter();
      }
    });
    await nextMessage(/^bound$/);
  }, 60_000);
  afterAll(async () => {
    receiver?.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  it("says READY=1 once it listens and STOPPING=1 when it begins to stop", async () => {
    const server = await spawnServeChild(
      {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        PEERGATE_DATA_DIR: path.join(dir, "data"),
        PEERGATE_WORKSPACE: path.join(dir, "workspace"),
        PEERGATE_POLICIES_DIR: repoPoliciesDir,
        PEERGATE_PORT: "0",
        PEERGATE_LOG_LEVEL: "info",
        NOTIFY_SOCKET: path.join(dir, "notify.sock"),
      },
      { readyMs: 240_000 },
    );
    try {
      const ready = await nextMessage(/READY=1/);
      expect(ready).toContain(`STATUS=listening on ${server.url}`);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect(messages.some((m) => m.includes("STOPPING=1"))).toBe(false);
      server.signalGroup("SIGTERM");
      expect(await nextMessage(/STOPPING=1/)).toContain("STOPPING=1");
      expect(await server.exited).toBe(0);
      // The barrier completed: systemd-notify reported no failure to the server.
      expect(server.logs.join("\n")).not.toContain("could not tell the service manager");
    } finally {
      server.signalGroup("SIGKILL");
    }
  }, 300_000);
});
