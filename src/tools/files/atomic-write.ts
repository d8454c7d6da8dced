// Replacing a file so that a stop at any moment leaves the old file or the new one, never half
// of either: write a sibling temp file (same directory, random name, O_EXCL), fsync it, rename it
// over the target, fsync the directory. The rename is the only step that changes what the target
// name means, and it is atomic. All of it goes through the verified parent directory descriptor.
import { constants } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { quotePath, ToolCallError, throwIfAborted } from "../tool-call-error.ts";
import { type ConfinedTarget, nameTempFile, type Workspace } from "../workspace.ts";
import { giveToWorkspaceOwner } from "./file-owner.ts";

const chunkBytes = 256 * 1024;

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Writes `data` to `target` atomically. `signal` is checked between chunks and once more right
 * before the rename: a stop before that point leaves the target untouched and removes the temp
 * file; after it, the change is complete.
 */
export async function writeFileAtomically(
  workspace: Workspace,
  target: ConfinedTarget,
  data: Uint8Array,
  options: { readonly mode: number; readonly signal: AbortSignal },
): Promise<void> {
  const dir = await workspace.openDirectory({
    given: target.given,
    absolute: target.parent,
    relative: workspace.relativeOf(target.parent),
  });
  const tempName = nameTempFile(target.name);
  let tempExists = false;
  try {
    const file = await open(
      dir.at(tempName),
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    tempExists = true;
    try {
      // Before the rename: the new file is the workspace owner's from the moment it has a name.
      await giveToWorkspaceOwner(workspace, file);
      let offset = 0;
      while (offset < data.length) {
        throwIfAborted(options.signal);
        const { bytesWritten } = await file.write(
          data,
          offset,
          Math.min(chunkBytes, data.length - offset),
        );
        offset += bytesWritten;
      }
      // Set after writing, and explicitly: the open mode is filtered by the umask, and a replaced
      // file keeps its permissions (never set-id bits).
      await file.chmod(options.mode & 0o777);
      await file.sync();
    } finally {
      await file.close();
    }
    throwIfAborted(options.signal);
    await rename(dir.at(tempName), dir.at(target.name));
    tempExists = false;
    // Make the rename itself durable; some file systems refuse fsync on a directory.
    await dir.handle.sync().catch(() => undefined);
  } catch (error) {
    if (tempExists) await unlink(dir.at(tempName)).catch(() => undefined);
    if (error instanceof ToolCallError) throw error;
    const code = errnoOf(error);
    if (code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST") {
      throw new ToolCallError("refused", `The path ${quotePath(target.given)} is a directory.`);
    }
    if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
      throw new ToolCallError("refused", `Permission denied writing ${quotePath(target.given)}.`);
    }
    if (code === "ENOSPC" || code === "EDQUOT") {
      throw new ToolCallError("failed", `No space left to write ${quotePath(target.given)}.`);
    }
    throw error;
  } finally {
    await dir.close();
  }
}
