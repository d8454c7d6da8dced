// Depth-first walk below a workspace directory for find and grep. Symbolic links are listed but
// never followed, the data directory is skipped, and each directory is opened through its
// parent's descriptor, so a directory swapped for a symlink mid-walk cannot lead outside.

import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { throwIfAborted } from "../tool-call-error.ts";
import type { ConfinedPath, EntryType, OpenDirectory, Workspace } from "../workspace.ts";

export type WalkEntry = {
  /** Relative to the workspace root, POSIX separators. */
  readonly relative: string;
  /** Relative to the directory the walk started in. */
  readonly fromStart: string;
  readonly name: string;
  readonly type: EntryType;
  /** The open directory holding the entry (valid only until the walk moves on). */
  readonly parent: OpenDirectory;
};

export type WalkBounds = {
  readonly maxDepth: number;
  readonly maxEntries: number;
  /** Epoch milliseconds after which the walk stops. */
  readonly deadline: number;
  readonly signal: AbortSignal;
};

/** Why a walk stopped before it had seen everything; undefined when it finished. */
export type WalkState = { stoppedBy: "entries" | "deadline" | undefined; visited: number };

function typeOf(dirent: Dirent): EntryType {
  if (dirent.isFile()) return "file";
  if (dirent.isDirectory()) return "directory";
  if (dirent.isSymbolicLink()) return "symlink";
  return "other";
}

function join(base: string, name: string): string {
  return base === "." || base === "" ? name : `${base}/${name}`;
}

export async function* walkTree(
  workspace: Workspace,
  start: ConfinedPath,
  bounds: WalkBounds,
  state: WalkState,
): AsyncGenerator<WalkEntry> {
  const root = await workspace.openDirectory(start);
  try {
    yield* walkDirectory(workspace, root, start.relative, "", 0, bounds, state);
  } finally {
    await root.close();
  }
}

async function* walkDirectory(
  workspace: Workspace,
  dir: OpenDirectory,
  relative: string,
  fromStart: string,
  depth: number,
  bounds: WalkBounds,
  state: WalkState,
): AsyncGenerator<WalkEntry> {
  throwIfAborted(bounds.signal);
  let entries: Dirent[];
  try {
    entries = await readdir(dir.at("."), { withFileTypes: true });
  } catch {
    return; // unreadable directory: skip it, as find does
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const dirent of entries) {
    if (state.stoppedBy !== undefined) return;
    if (Date.now() > bounds.deadline) {
      state.stoppedBy = "deadline";
      return;
    }
    if (state.visited >= bounds.maxEntries) {
      state.stoppedBy = "entries";
      return;
    }
    state.visited++;
    const childRelative = join(relative, dirent.name);
    const childAbsolute = `${dir.absolute}/${dirent.name}`;
    if (workspace.isDataPath(childAbsolute)) continue;
    const type = typeOf(dirent);
    const entry: WalkEntry = {
      relative: childRelative,
      fromStart: join(fromStart, dirent.name),
      name: dirent.name,
      type,
      parent: dir,
    };
    yield entry;
    if (type === "directory" && depth + 1 < bounds.maxDepth) {
      let child: OpenDirectory;
      try {
        child = await workspace.openDirectoryAt(dir, dirent.name, childRelative);
      } catch {
        continue; // replaced by a symlink or removed since the listing: not followed
      }
      try {
        yield* walkDirectory(
          workspace,
          child,
          childRelative,
          entry.fromStart,
          depth + 1,
          bounds,
          state,
        );
      } finally {
        await child.close();
      }
    }
  }
}
