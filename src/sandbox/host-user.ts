// Which host user a sandbox runs as. bubblewrap's user namespace maps the sandbox's `nobody` to
// the user that started bwrap: a server running as root would give every command host uid 0
// (capabilities dropped, but root all the same, so every root-owned file the sandbox shows —
// /proc/sys included — is as writable as its mode lets root write it). So a root server never
// starts bwrap as root: its launcher drops to the workspace's owner (setpriv) first, and the
// command is that user outside, nobody inside. The workspace stays writable to it, and nothing
// else of the host is more reachable than that user's rights allow.
//
// A root server whose workspace is owned by root cannot give this: there is no unprivileged
// user to map, so it refuses every command (and, with process tools configured, refuses to
// start) with the fix. A server that is not root runs bwrap as itself, as it always did.
import { statSync } from "node:fs";
import path from "node:path";
import { SandboxUnavailableError } from "./pids-cgroup.ts";

/** The host user a sandbox is started as, when the server is root. */
export type HostUser = { readonly uid: number; readonly gid: number };

/** What the model is told when its command is refused for want of an unprivileged user. */
export const userRefusal =
  "The sandbox cannot run this command as an unprivileged user on this server, so nothing was run; the operator has to fix the server's set-up.";

export function workspaceOwnerFix(workspace: string): string {
  return `run peergate as an unprivileged user, or give the workspace to one (e.g. a dedicated user: \`useradd --system peergate-tools && chown -R peergate-tools: ${workspace}\`), with every directory above it searchable by that user`;
}

function refuse(workspace: string, why: string): never {
  throw new SandboxUnavailableError(
    userRefusal,
    `peergate runs as root, and ${why}; nothing was run. Fix: ${workspaceOwnerFix(workspace)}`,
  );
}

/** Whether `user` (with its own group only: setpriv clears the others) may search `stats`. */
function canSearch(stats: { uid: number; gid: number; mode: number }, user: HostUser): boolean {
  if (stats.uid === user.uid) return (stats.mode & 0o100) !== 0;
  if (stats.gid === user.gid) return (stats.mode & 0o010) !== 0;
  return (stats.mode & 0o001) !== 0;
}

/**
 * The user a root server runs sandboxes for `workspace` as (its owner), or undefined when the
 * server is not root. Throws SandboxUnavailableError when a root server cannot drop to anyone.
 */
export function sandboxHostUser(
  workspace: string,
  euid: number | undefined = process.geteuid?.(),
): HostUser | undefined {
  if (euid !== 0) return undefined;
  let stats: ReturnType<typeof statSync>;
  try {
    stats = statSync(workspace);
  } catch (error) {
    refuse(
      workspace,
      `the workspace ${workspace} cannot be read (${(error as NodeJS.ErrnoException).code}), so it has no owner to run commands as`,
    );
  }
  if (!stats.isDirectory()) refuse(workspace, `the workspace ${workspace} is not a directory`);
  if (stats.uid === 0) {
    refuse(
      workspace,
      `the workspace ${workspace} is owned by root: a command would be root on the host`,
    );
  }
  const user: HostUser = { uid: stats.uid, gid: stats.gid };
  for (let dir = workspace; ; dir = path.dirname(dir)) {
    const s = statSync(dir);
    if (!canSearch(s, user)) {
      refuse(
        workspace,
        `the workspace's owner (uid ${user.uid}) cannot reach it: ${dir} is not searchable by that user`,
      );
    }
    if (dir === path.dirname(dir)) break;
  }
  return user;
}
