// Who owns what the file tools create. A server running as root runs sandboxed commands as the
// workspace's owner (src/sandbox/host-user.ts); a file or directory it created as root would be
// root's, and a later command could not change it (and umask 077 would not let it read it). So
// everything the tools create in the workspace is given to the workspace's owner, through the
// descriptor it was created with (never a path, which a command could have swapped meanwhile).
import type { FileHandle } from "node:fs/promises";
import { stat } from "node:fs/promises";
import type { Workspace } from "../workspace.ts";

const owners = new WeakMap<Workspace, Promise<{ uid: number; gid: number } | undefined>>();

function ownerOf(workspace: Workspace): Promise<{ uid: number; gid: number } | undefined> {
  let owner = owners.get(workspace);
  if (owner === undefined) {
    owner =
      process.geteuid?.() === 0
        ? stat(workspace.root).then(
            // A root-owned workspace runs no command: nothing to give.
            (s) => (s.uid === 0 ? undefined : { uid: s.uid, gid: s.gid }),
            () => undefined,
          )
        : Promise.resolve(undefined);
    owners.set(workspace, owner);
  }
  return owner;
}

/** Gives a file or directory the tools just created to the workspace's owner (root server). */
export async function giveToWorkspaceOwner(
  workspace: Workspace,
  handle: FileHandle,
): Promise<void> {
  const owner = await ownerOf(workspace);
  if (owner !== undefined) await handle.chown(owner.uid, owner.gid);
}
