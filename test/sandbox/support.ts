// Shared by the sandbox suites: whether bubblewrap works on this machine (probed once, the way
// the server probes it at start), and a describe that runs only where it does. Without bwrap the
// suites are skipped with the reason in their title; with PEERGATE_TEST_SANDBOX=required (CI, where
// bubblewrap is installed) a missing or broken bwrap is a failure instead.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, it } from "vitest";
import { requestControl } from "../../src/control/request-control.ts";
import { createBwrapBackend } from "../../src/sandbox/bwrap.ts";
import { probeSandbox } from "../../src/sandbox/probe.ts";
import type { SandboxBackend } from "../../src/sandbox/types.ts";
import { makeSandboxWorkspace } from "../support/sandbox-workspace.ts";

export {
  giveToSandboxUser,
  makeSandboxWorkspace,
  runsAsRoot,
  sandboxTestUser,
} from "../support/sandbox-workspace.ts";

export const bwrapBackend = createBwrapBackend();
const probeWorkspace = await makeSandboxWorkspace("peergate-probe-");
const probe = await probeSandbox(bwrapBackend, { workspace: probeWorkspace });
await rm(probeWorkspace, { recursive: true, force: true });
const required = process.env.PEERGATE_TEST_SANDBOX === "required";

/** Why bwrap cannot be used here, or undefined when it works. */
export const bwrapSkipReason = probe.ok ? undefined : probe.problem;

/** `describe` for suites that need the real backend. */
export function describeWithBwrap(name: string, body: () => void): void {
  if (bwrapSkipReason === undefined) {
    describe(name, body);
    return;
  }
  if (required) {
    describe(name, () => {
      it("needs a working bubblewrap (PEERGATE_TEST_SANDBOX=required)", () => {
        throw new Error(`bubblewrap does not work here: ${bwrapSkipReason}`);
      });
    });
    return;
  }
  console.warn(
    `[sandbox tests] skipped "${name}": bubblewrap does not work here (${bwrapSkipReason})`,
  );
  describe.skip(`${name} — skipped: bubblewrap does not work here (${bwrapSkipReason})`, body);
}

/** Every file under `dir` with the SHA-256 of its bytes, and every directory. */
export async function snapshotTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const rel = path.relative(dir, full);
    out[rel] = entry.isFile()
      ? createHash("sha256")
          .update(await readFile(full))
          .digest("hex")
      : entry.isDirectory()
        ? "dir"
        : entry.isSymbolicLink()
          ? "link"
          : "other";
  }
  return out;
}

/** Host processes (outside any sandbox) whose command line contains `marker`. */
export async function hostProcessesWith(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = await readFile(`/proc/${name}/cmdline`, "utf8");
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      // A zombie waiting to be reaped is gone for our purposes.
      if (cmdline.includes(marker) && !/\) Z /.test(stat)) found.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** The real bwrap, minus --die-with-parent: the PID 1 of the window before it is armed. */
const wrapperScript = `#!/bin/sh
for a in "$@"; do
  shift
  [ "$a" = --die-with-parent ] || set -- "$@" "$a"
done
exec /usr/bin/bwrap "$@"
`;

/**
 * A bwrap backend whose sandboxes' PID 1 never arms --die-with-parent (the state of the window
 * at the start of every sandbox, made to last), and its directory, to remove after the suite.
 */
export async function backendWithoutDieWithParent(): Promise<{
  backend: SandboxBackend;
  dir: string;
}> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-orphan-bwrap-"));
  await chmod(dir, 0o755);
  const wrapper = path.join(dir, "bwrap");
  await writeFile(wrapper, wrapperScript, { mode: 0o755 });
  return { backend: createBwrapBackend({ bwrapPath: wrapper }), dir };
}

/** The parent pid of `pid`, or undefined when it is gone. */
export function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/** The base name of the program `pid` runs. */
export async function commandName(pid: number): Promise<string> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
  return path.basename(cmdline.split("\0")[0] ?? "");
}

/** Whether `pid` runs in a PID namespace below the host's (its NSpid names more than one pid). */
export function inSandbox(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return (/^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).length ?? 0) > 1;
  } catch {
    return false;
  }
}

/** Alive and not a zombie waiting to be reaped. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Every host process below `pid`. */
export function descendantsOf(pid: number): number[] {
  const found: number[] = [];
  let generation = [pid];
  while (generation.length > 0) {
    const next: number[] = [];
    for (const name of readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue;
      const parent = parentOf(Number(name));
      if (parent !== undefined && generation.includes(parent)) next.push(Number(name));
    }
    found.push(...next);
    generation = next;
  }
  return found;
}

/**
 * A new operator token from a running server's control socket (as `peergate operator-token create
 * --force` asks it): what a test needs to widen a caller, as the operator would.
 */
export async function createOperatorTokenOf(dataDir: string): Promise<string> {
  const operator = await requestControl(dataDir, {
    verb: "operator-token.create",
    force: true,
    user: "test",
  });
  if (operator?.ok !== true || operator.verb !== "operator-token.create") {
    throw new Error(`no operator token: ${JSON.stringify(operator)}`);
  }
  return operator.operatorToken;
}
