// Workspaces a sandboxed command can run in. A server running as root runs its commands as the
// workspace's owner and refuses a root-owned workspace (src/sandbox/host-user.ts), and the tests
// run as root here: so every workspace a sandboxed command runs in belongs to an unprivileged
// user, as a root deployment's would.
import { chown, lchown, mkdtemp, readdir, realpath } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** The unprivileged user that owns the tests' workspaces when they run as root (nobody). */
export const sandboxTestUser = { uid: 65534, gid: 65534 } as const;

export const runsAsRoot = process.geteuid?.() === 0;

/** Gives `dir` and everything under it to the test user (a no-op when not root). */
export async function giveToSandboxUser(dir: string): Promise<void> {
  if (!runsAsRoot) return;
  await chown(dir, sandboxTestUser.uid, sandboxTestUser.gid);
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    // lchown: a symlink is given itself, never what it points at.
    await lchown(full, sandboxTestUser.uid, sandboxTestUser.gid);
  }
}

/** A fresh empty workspace (realpath) under the system temp directory, the test user's. */
export async function makeSandboxWorkspace(prefix = "peergate-workspace-"): Promise<string> {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), prefix)));
  await giveToSandboxUser(dir);
  return dir;
}
