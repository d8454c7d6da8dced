// A sandbox whose outer bwrap is gone still ends with its call. The sandbox's PID 1 (the inner
// bwrap) arms --die-with-parent only at the end of its setup, after its setsid: an outer bwrap
// killed in between (a stop landing while the sandbox starts) leaves a PID 1 outside the call's
// process group that no parent death kills, and the command it starts ran on for good.
//
// That state is made here at will: the sandbox's bwrap is started through a wrapper that drops
// --die-with-parent (so the PID 1 never arms it, as in the window), and the outer bwrap is
// SIGKILLed out from under the running command. Then the call ends (it returns, it is stopped,
// or the server exits) and no process of the sandbox may be left: the command, the PID 1, the
// launcher, found by a marker in their command lines.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { defaultSandboxLimits, type SandboxBackend } from "../../src/sandbox/types.ts";
import { type PipelineRequest, runPipeline } from "../../src/tools/declared/pipeline.ts";
import { killCommandGroups, runProcess } from "../../src/tools/run-process.ts";
import { eventually } from "../support/eventually.ts";
import {
  alive,
  backendWithoutDieWithParent,
  bwrapBackend,
  commandName,
  descendantsOf,
  describeWithBwrap,
  hostProcessesWith,
  inSandbox,
  makeSandboxWorkspace,
  parentOf,
} from "./support.ts";

/**
 * Waits for the sandbox's command (`name`, with `marker` in its command line) and kills the outer
 * bwrap under it; returns the sandbox's processes (its PID 1 first), checked to be alive and
 * orphaned.
 */
async function orphanSandbox(marker: string, name: string): Promise<number[]> {
  const command = await eventually(`the sandboxed ${name} to run`, async () => {
    for (const pid of await hostProcessesWith(marker)) {
      // Inside the sandbox only: the bwrap wrapper is an `sh` with the marker too, until it execs.
      if (inSandbox(pid) && (await commandName(pid)) === name) return pid;
    }
    return undefined;
  });
  const init = parentOf(command);
  const outer = init === undefined ? undefined : parentOf(init);
  expect(init).toBeDefined();
  expect(outer).toBeDefined();
  expect(await commandName(outer as number)).toBe("bwrap");
  process.kill(outer as number, "SIGKILL");
  await eventually("the outer bwrap to be gone", () => parentOf(init as number) !== outer);
  // The orphaned state: the sandbox's PID 1 and its command run on without the outer bwrap.
  expect(alive(init as number)).toBe(true);
  expect(alive(command)).toBe(true);
  const sandbox = [init as number, ...descendantsOf(init as number)];
  survivors.push(...sandbox);
  return sandbox;
}

/** Processes of a failing test's sandbox, killed after the suite whatever happened. */
const survivors: number[] = [];

async function expectNothingLeft(marker: string, sandbox: readonly number[]): Promise<void> {
  await eventually(
    "every process of the sandbox to be gone",
    async () => (await hostProcessesWith(marker)).length === 0 && !sandbox.some(alive),
    { withinMs: 10_000 },
  );
}

function uniqueMarker(): string {
  return `peergate-orphan-${randomBytes(6).toString("hex")}`;
}

describeWithBwrap("a sandbox whose outer bwrap is gone", () => {
  let workspace: string;
  let wrapperDir: string;
  let backend: SandboxBackend;

  beforeAll(async () => {
    workspace = await makeSandboxWorkspace("peergate-orphan-");
    ({ backend, dir: wrapperDir } = await backendWithoutDieWithParent());
  });

  afterAll(async () => {
    // Never leave what a failing test proved left behind.
    for (const pid of survivors) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    if (workspace) await rm(workspace, { recursive: true, force: true });
    if (wrapperDir) await rm(wrapperDir, { recursive: true, force: true });
  });

  /** One `sh -c script` stage in the wrapped sandbox (a call the test stops or abandons). */
  const onePipeline = (
    script: string,
    signal: AbortSignal = new AbortController().signal,
  ): PipelineRequest => ({
    stages: [["sh", "-c", script]],
    stdin: undefined,
    cwd: workspace,
    workspace,
    env: { PATH: "/usr/bin:/bin" },
    egress: false,
    limits: defaultSandboxLimits,
    readOnlyPaths: [],
    backend,
    timeoutMs: 120_000,
    signal,
    maxOutputBytes: 1024,
  });

  const confinement = () => ({
    backend,
    workspace,
    egress: false,
    limits: defaultSandboxLimits,
  });

  it("ends with the call that started it (runProcess)", async () => {
    const marker = uniqueMarker();
    const call = runProcess({
      program: "sh",
      args: ["-c", `sleep 3600 & wait # ${marker}`],
      cwd: workspace,
      env: { PATH: "/usr/bin:/bin" },
      timeoutMs: 120_000,
      signal: new AbortController().signal,
      maxOutputBytes: 1024,
      killGraceMs: 200,
      sandbox: confinement(),
    });
    const sandbox = await orphanSandbox(marker, "sh");
    await call;
    await expectNothingLeft(marker, sandbox);
  });

  it("is stopped by an abort, SIGKILL after the grace for a command that ignores SIGTERM (runPipeline)", async () => {
    const marker = uniqueMarker();
    const controller = new AbortController();
    const call = runPipeline({
      ...onePipeline(`trap '' TERM; while :; do sleep 1; done # ${marker}`, controller.signal),
      killGraceMs: 200,
    });
    const sandbox = await orphanSandbox(marker, "sh");
    controller.abort();
    const result = await call;
    expect(result.stoppedBy).toBe("abort");
    await expectNothingLeft(marker, sandbox);
  });

  // The window itself, with the real backend: stops landing at every moment of a sandbox's start
  // (bwrap alone, killed so, leaves an orphaned PID 1 several times in a hundred here). Whatever
  // the moment, nothing of any sandbox is left.
  it("leaves nothing when stops land while sandboxes start (the real --die-with-parent)", async () => {
    const marker = uniqueMarker();
    for (let i = 0; i < 40; i++) {
      const controller = new AbortController();
      const call = runProcess({
        program: "sleep",
        args: ["3600"],
        cwd: workspace,
        // In bwrap's command line (--setenv), so the sandbox's PID 1 carries the marker.
        env: { PATH: "/usr/bin:/bin", PEERGATE_MARKER: marker },
        timeoutMs: 120_000,
        signal: controller.signal,
        maxOutputBytes: 1024,
        killGraceMs: 200,
        sandbox: { ...confinement(), backend: bwrapBackend },
      });
      await pause(i % 20);
      controller.abort();
      await call;
    }
    await eventually(
      "every sandbox to be gone",
      async () => {
        const left = await hostProcessesWith(marker);
        survivors.push(...left);
        return left.length === 0;
      },
      { withinMs: 10_000 },
    );
  });

  // The forced exit itself, in a process of its own: it lands while bwrap's report of the PID 1
  // is still in its pipe (the fixture keeps its event loop from reading it until then).
  it("is killed by a forced exit that lands before its PID 1's report is read (exitKillingCommands)", {
    timeout: 180_000,
  }, async () => {
    const marker = uniqueMarker();
    const fixture = fileURLToPath(
      new URL("./fixtures/forced-exit-unread-report.ts", import.meta.url),
    );
    const child = spawn(
      process.execPath,
      [fixture, path.join(wrapperDir, "bwrap"), workspace, marker],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    survivors.push(...(await hostProcessesWith(marker)));
    expect(code, stderr).toBe(130);
    await expectNothingLeft(marker, []);
  });

  it("is killed by a forced exit of the server (killCommandGroups)", async () => {
    const marker = uniqueMarker();
    const call = runPipeline(onePipeline(`sleep 3600 & wait # ${marker}`));
    const sandbox = await orphanSandbox(marker, "sh");
    expect(killCommandGroups()).toBeGreaterThanOrEqual(1);
    await expectNothingLeft(marker, sandbox);
    await call;
  });
});
