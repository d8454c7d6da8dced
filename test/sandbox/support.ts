// Shared by the sandbox suites: whether bubblewrap works on this machine (probed once, the way
// the server probes it at start), and a describe that runs only where it does. Without bwrap the
// suites are skipped with the reason in their title; with PEERGATE_TEST_SANDBOX=required (CI, where
// bubblewrap is installed) a missing or broken bwrap is a failure instead.
import { createHash } from "node:crypto";
import { readdir, readFile, rm } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "vitest";
import { createBwrapBackend } from "../../src/sandbox/bwrap.ts";
import { probeSandbox } from "../../src/sandbox/probe.ts";
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
