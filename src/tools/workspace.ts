// Confinement: every path a tool touches is resolved against the workspace after following
// symlinks, and refused if it lands outside it, inside peergate's data directory, or on anything
// that is not a regular file or a directory (devices, FIFOs, sockets).
//
// A check on a path name is only as good as the moment it was made: a directory can be swapped
// for a symlink between the check and the open. So nothing is read or written through a checked
// name directly. Files are opened with O_NOFOLLOW and the opened descriptor's real location is
// read back (/proc/self/fd/N on Linux, device and inode elsewhere) and compared with what was
// checked; directories are opened the same way and everything below them is reached through the
// descriptor (`/proc/self/fd/N/name`, the path form of openat), never through a path name again.
//
// Reads follow the file, not the path: a regular file with more than one hard link may be a link
// planted in the workspace to a file outside it (a name check cannot tell), so it is refused
// unless the operator opts in (`allowHardLinks`). The data directory is refused by identity
// (device and inode) as well as by path, so a second name for it (a bind mount) is refused too.
//
// One file over 500 lines on purpose: createWorkspace is one closure over the root's descriptor,
// and every check and open it makes has to be read beside the others to see the confinement hold.
import { randomBytes } from "node:crypto";
import { constants, existsSync, type Stats } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readlink, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { quotePath, ToolCallError } from "./tool-call-error.ts";

export type EntryType = "file" | "directory" | "symlink" | "other";

/** A path the model gave, checked: `absolute` is its real location inside the workspace. */
export type ConfinedPath = {
  /** As the model wrote it, for messages. */
  readonly given: string;
  /** Real path (no symlinks), inside the workspace. */
  readonly absolute: string;
  /** Relative to the workspace root, POSIX separators; `.` for the root. */
  readonly relative: string;
};

/** A target that may not exist yet: its real parent directory and its own name. */
export type ConfinedTarget = ConfinedPath & {
  readonly parent: string;
  readonly name: string;
  /** Set when the target exists (after following a symlink inside the workspace). */
  readonly existing: Stats | undefined;
};

/** An opened, verified directory; entries are reached through `at(name)`. */
export type OpenDirectory = {
  readonly handle: FileHandle;
  /** The real path that was checked. */
  readonly absolute: string;
  /** A path that names the opened directory itself, whatever happens to its name later. */
  at(name: string): string;
  close(): Promise<void>;
};

export type Workspace = {
  readonly root: string;
  readonly dataDir: string;
  /**
   * The lexical checks alone (outside the workspace, the data directory, NUL): the path's
   * components below the root, before any symlink is followed. For mkdir, which walks them.
   */
  resolveComponents(given: string): readonly string[];
  /** The workspace root as a confined path, for opening it. */
  readonly rootPath: ConfinedPath;
  /** Resolves a path that must exist (file or directory). */
  resolveExisting(given: string): Promise<ConfinedPath & { readonly stats: Stats }>;
  /** Resolves a path to create or replace; its parent directory must exist. */
  resolveTarget(given: string): Promise<ConfinedTarget>;
  /** Opens a regular file for reading, verified to be the file that was checked. */
  openFile(confined: ConfinedPath): Promise<FileHandle>;
  /** Opens a directory, verified to be the directory that was checked. */
  openDirectory(confined: ConfinedPath): Promise<OpenDirectory>;
  /** Opens `name` inside an open directory (no symlinks followed); undefined if it is not a file. */
  openFileAt(dir: OpenDirectory, name: string): Promise<FileHandle | undefined>;
  /**
   * Opens `name` inside an open directory (no symlinks followed, never blocking on a FIFO)
   * without checking its type: the caller must fstat the handle and use only a regular file.
   * Lets a walker open in order and check and read concurrently.
   */
  openEntryAt(dir: OpenDirectory, name: string): Promise<FileHandle | undefined>;
  /** Opens the subdirectory `name` of an open directory (no symlinks followed). */
  openDirectoryAt(dir: OpenDirectory, name: string, relative: string): Promise<OpenDirectory>;
  /** True for a real path that is the data directory or inside it (walkers skip it). */
  isDataPath(absolute: string): boolean;
  /**
   * Why an opened entry may not be used (its fstat): a regular file with more than one hard link
   * (unless allowed), or the data directory reached under another name. Undefined when it may.
   */
  refusalOf(stats: Stats, given: string): ToolCallError | undefined;
  /** The workspace-relative form of a real path inside the workspace. */
  relativeOf(absolute: string): string;
};

const maxPathLength = 4096;

function isWithin(child: string, parent: string): boolean {
  if (child === parent) return true;
  const prefix = parent.endsWith(path.sep) ? parent : parent + path.sep;
  return child.startsWith(prefix);
}

export function readEntryType(stats: Stats): EntryType {
  if (stats.isFile()) return "file";
  if (stats.isDirectory()) return "directory";
  if (stats.isSymbolicLink()) return "symlink";
  return "other";
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/** A random name for a sibling temp file; starts with a dot so listings read it as scratch. */
export function nameTempFile(base: string): string {
  return `.${base.slice(0, 100)}.peergate-${randomBytes(8).toString("hex")}.tmp`;
}

/**
 * Creates the workspace directory if missing, resolves it with realpath once, and returns the
 * confinement functions every file tool uses. `dataDir` may lie inside or outside the workspace
 * (by default the workspace is `<dataDir>/workspace`); when it lies inside, it is refused.
 */
export async function createWorkspace(options: {
  root: string;
  dataDir: string;
  /** Read regular files that have more than one hard link (default false). */
  allowHardLinks?: boolean;
}): Promise<Workspace> {
  if (!path.isAbsolute(options.root)) {
    throw new Error(`the workspace must be an absolute path, got ${JSON.stringify(options.root)}`);
  }
  await mkdir(options.root, { recursive: true, mode: 0o755 });
  const root = await realpath(options.root);
  const lexicalDataDir = path.resolve(options.dataDir);
  const dataDir = await realpath(lexicalDataDir).catch(() => lexicalDataDir);
  if (root === path.parse(root).root) {
    throw new Error("the workspace cannot be the file system root");
  }
  if (root === dataDir) {
    throw new Error("the workspace cannot be the data directory itself");
  }
  // The data directory is only a hazard when it lies inside the workspace; a workspace inside
  // the data directory (the default) is confined to its own subtree anyway.
  const dataInside = dataDir !== root && isWithin(dataDir, root);
  const dataDirs = [...new Set([dataDir, lexicalDataDir])];
  const useProc = process.platform === "linux" && existsSync("/proc/self/fd");
  const allowHardLinks = options.allowHardLinks === true;
  // The data directory's identity, when it exists: the same directory under another name (a bind
  // mount into the workspace) has another path but the same device and inode.
  const dataIdentity = await stat(dataDir).then(
    (s) => ({ dev: s.dev, ino: s.ino }),
    () => undefined,
  );
  const isDataIdentity = (stats: Stats): boolean =>
    dataIdentity !== undefined &&
    stats.isDirectory() &&
    stats.dev === dataIdentity.dev &&
    stats.ino === dataIdentity.ino;

  const isDataPath = (absolute: string): boolean =>
    dataInside && dataDirs.some((d) => isWithin(absolute, d));

  const relativeOf = (absolute: string): string => {
    const rel = path.relative(root, absolute);
    return rel === "" ? "." : rel.split(path.sep).join("/");
  };

  /** Lexical checks on the string itself, then the absolute path it names (not yet resolved). */
  const checkGiven = (given: string): string => {
    if (typeof given !== "string" || given.length === 0) {
      throw new ToolCallError("invalid-input", "A path is required.");
    }
    if (given.length > maxPathLength) {
      throw new ToolCallError(
        "invalid-input",
        `The path is longer than ${maxPathLength} characters.`,
      );
    }
    if (given.includes("\0")) {
      throw new ToolCallError("refused", `The path ${quotePath(given)} contains a NUL character.`);
    }
    const absolute = path.resolve(root, given);
    if (!isWithin(absolute, root)) {
      throw new ToolCallError(
        "refused",
        `The path ${quotePath(given)} is outside the workspace; tools only reach files inside it.`,
      );
    }
    if (isDataPath(absolute)) throw dataError(given);
    return absolute;
  };

  const dataError = (given: string) =>
    new ToolCallError(
      "refused",
      `The path ${quotePath(given)} is inside peergate's data directory, which tools never touch.`,
    );

  const checkReal = (given: string, real: string): void => {
    if (!isWithin(real, root)) {
      throw new ToolCallError(
        "refused",
        `The path ${quotePath(given)} leads outside the workspace through a symbolic link.`,
      );
    }
    if (isDataPath(real)) throw dataError(given);
  };

  const refusalOf = (stats: Stats, given: string): ToolCallError | undefined => {
    if (isDataIdentity(stats)) return dataError(given);
    if (stats.isFile() && stats.nlink > 1 && !allowHardLinks) {
      return new ToolCallError(
        "refused",
        `The file ${quotePath(given)} has ${stats.nlink} hard links; tools do not read such files, since another of its names may lie outside the workspace (the operator can allow it).`,
      );
    }
    return undefined;
  };

  /** Every directory from `real` up to the root must not be the data directory by identity. */
  const checkAncestors = async (given: string, real: string): Promise<void> => {
    if (dataIdentity === undefined) return;
    for (let dir = real; isWithin(dir, root); dir = path.dirname(dir)) {
      const stats = await lstat(dir).catch(() => undefined);
      if (stats !== undefined && isDataIdentity(stats)) throw dataError(given);
      if (dir === root) return;
    }
  };

  const checkKind = (given: string, stats: Stats): void => {
    if (!stats.isFile() && !stats.isDirectory()) {
      throw new ToolCallError(
        "refused",
        `The path ${quotePath(given)} is a device, FIFO or socket; tools only use regular files and directories.`,
      );
    }
  };

  /**
   * For a path that does not exist: if its deepest existing ancestor lies outside (through a
   * symlink), refuse rather than say "not found", or a model could probe what exists outside.
   */
  const checkMissing = async (given: string, absolute: string): Promise<void> => {
    let probe = path.dirname(absolute);
    for (;;) {
      const real = await realpath(probe).catch(() => undefined);
      if (real !== undefined) {
        checkReal(given, real);
        return;
      }
      if (probe === root || probe === path.dirname(probe)) return;
      probe = path.dirname(probe);
    }
  };

  const resolveReal = async (given: string, absolute: string): Promise<string> => {
    try {
      return await realpath(absolute);
    } catch (error) {
      const code = errnoOf(error);
      if (code === "ENOENT" || code === "ENOTDIR") {
        await checkMissing(given, absolute);
        throw new ToolCallError("not-found", `Nothing exists at ${quotePath(given)}.`);
      }
      if (code === "ELOOP") {
        throw new ToolCallError("refused", `The path ${quotePath(given)} is a symbolic link loop.`);
      }
      if (code === "EACCES" || code === "EPERM") {
        throw new ToolCallError("refused", `Permission denied for ${quotePath(given)}.`);
      }
      throw error;
    }
  };

  const resolveExisting = async (given: string) => {
    const absolute = checkGiven(given);
    const real = await resolveReal(given, absolute);
    checkReal(given, real);
    const stats = await lstat(real);
    checkKind(given, stats);
    await checkAncestors(given, real);
    return { given, absolute: real, relative: relativeOf(real), stats };
  };

  const resolveTarget = async (given: string): Promise<ConfinedTarget> => {
    const absolute = checkGiven(given);
    if (absolute === root) {
      throw new ToolCallError("refused", `The path ${quotePath(given)} is the workspace itself.`);
    }
    try {
      const real = await realpath(absolute);
      checkReal(given, real);
      const stats = await lstat(real);
      checkKind(given, stats);
      await checkAncestors(given, real);
      return {
        given,
        absolute: real,
        relative: relativeOf(real),
        parent: path.dirname(real),
        name: path.basename(real),
        existing: stats,
      };
    } catch (error) {
      if (error instanceof ToolCallError) throw error;
      const code = errnoOf(error);
      if (code === "ELOOP") {
        throw new ToolCallError("refused", `The path ${quotePath(given)} is a symbolic link loop.`);
      }
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
    }
    // It does not exist. A dangling symlink would let the write land wherever it points.
    const own = await lstat(absolute).catch(() => undefined);
    if (own?.isSymbolicLink()) {
      throw new ToolCallError(
        "refused",
        `The path ${quotePath(given)} is a symbolic link to something that does not exist.`,
      );
    }
    let parentReal: string;
    try {
      parentReal = await realpath(path.dirname(absolute));
    } catch (error) {
      const code = errnoOf(error);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      await checkMissing(given, path.dirname(absolute));
      throw new ToolCallError(
        "not-found",
        `The directory for ${quotePath(given)} does not exist (create it with mkdir first).`,
      );
    }
    checkReal(given, parentReal);
    const parentStats = await stat(parentReal);
    if (!parentStats.isDirectory()) {
      throw new ToolCallError("not-found", `The parent of ${quotePath(given)} is not a directory.`);
    }
    const name = path.basename(absolute);
    const real = path.join(parentReal, name);
    checkReal(given, real);
    await checkAncestors(given, parentReal);
    return {
      given,
      absolute: real,
      relative: relativeOf(real),
      parent: parentReal,
      name,
      existing: undefined,
    };
  };

  const changedError = (given: string) =>
    new ToolCallError(
      "refused",
      `The path ${quotePath(given)} changed while it was being opened (a symbolic link appeared or a directory was replaced); nothing was read or written.`,
    );

  /** The opened descriptor must be the very thing that was checked. */
  const verifyOpened = async (handle: FileHandle, confined: ConfinedPath): Promise<Stats> => {
    const stats = await handle.stat();
    if (useProc) {
      const actual = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => "");
      if (actual !== confined.absolute) throw changedError(confined.given);
    } else {
      const now = await lstat(confined.absolute).catch(() => undefined);
      if (now === undefined || now.dev !== stats.dev || now.ino !== stats.ino) {
        throw changedError(confined.given);
      }
    }
    return stats;
  };

  const openWith = async (
    target: string,
    flags: number,
    given: string,
  ): Promise<FileHandle | undefined> => {
    try {
      return await open(target, flags);
    } catch (error) {
      const code = errnoOf(error);
      // O_NOFOLLOW on a symlink: ELOOP (Linux) or EMLINK (BSD); O_DIRECTORY on a file: ENOTDIR.
      if (code === "ELOOP" || code === "EMLINK") throw changedError(given);
      if (code === "ENOENT")
        throw new ToolCallError("not-found", `Nothing exists at ${quotePath(given)}.`);
      if (code === "ENOTDIR") return undefined;
      if (code === "EACCES" || code === "EPERM") {
        throw new ToolCallError("refused", `Permission denied for ${quotePath(given)}.`);
      }
      throw error;
    }
  };

  const fileFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const directoryFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_DIRECTORY;

  const openFile = async (confined: ConfinedPath): Promise<FileHandle> => {
    // O_NONBLOCK: opening a FIFO that replaced the file must not hang the call.
    const handle = await openWith(confined.absolute, fileFlags, confined.given);
    if (handle === undefined) throw changedError(confined.given);
    try {
      const stats = await verifyOpened(handle, confined);
      if (stats.isDirectory()) {
        throw new ToolCallError(
          "invalid-input",
          `The path ${quotePath(confined.given)} is a directory.`,
        );
      }
      checkKind(confined.given, stats);
      const refusal = refusalOf(stats, confined.given);
      if (refusal !== undefined) throw refusal;
      return handle;
    } catch (error) {
      await handle.close();
      throw error;
    }
  };

  const wrapDirectory = (handle: FileHandle, absolute: string): OpenDirectory => ({
    handle,
    absolute,
    at: (name: string) =>
      useProc ? `/proc/self/fd/${handle.fd}/${name}` : path.join(absolute, name),
    close: () => handle.close(),
  });

  /** O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR: tell a swap from a plain file. */
  const notDirectoryError = async (target: string, given: string) => {
    const own = await lstat(target).catch(() => undefined);
    return own === undefined || own.isSymbolicLink()
      ? changedError(given)
      : new ToolCallError("invalid-input", `The path ${quotePath(given)} is not a directory.`);
  };

  const openDirectory = async (confined: ConfinedPath): Promise<OpenDirectory> => {
    const handle = await openWith(confined.absolute, directoryFlags, confined.given);
    if (handle === undefined) throw await notDirectoryError(confined.absolute, confined.given);
    try {
      const stats = await verifyOpened(handle, confined);
      const refusal = refusalOf(stats, confined.given);
      if (refusal !== undefined) throw refusal;
      return wrapDirectory(handle, confined.absolute);
    } catch (error) {
      await handle.close();
      throw error;
    }
  };

  const openEntryAt = (dir: OpenDirectory, name: string): Promise<FileHandle | undefined> =>
    open(dir.at(name), fileFlags).catch(() => undefined);

  const openFileAt = async (dir: OpenDirectory, name: string): Promise<FileHandle | undefined> => {
    let handle: FileHandle;
    try {
      handle = await open(dir.at(name), fileFlags);
    } catch {
      return undefined;
    }
    const stats = await handle.stat();
    if (!stats.isFile() || refusalOf(stats, name) !== undefined) {
      await handle.close();
      return undefined;
    }
    return handle;
  };

  const openDirectoryAt = async (
    dir: OpenDirectory,
    name: string,
    relative: string,
  ): Promise<OpenDirectory> => {
    const absolute = path.join(dir.absolute, name);
    const handle = await openWith(dir.at(name), directoryFlags, relative);
    if (handle === undefined) throw await notDirectoryError(dir.at(name), relative);
    const refusal = refusalOf(await handle.stat(), relative);
    if (refusal !== undefined) {
      await handle.close();
      throw refusal;
    }
    return wrapDirectory(handle, absolute);
  };

  const resolveComponents = (given: string): readonly string[] => {
    const relative = path.relative(root, checkGiven(given));
    return relative === "" ? [] : relative.split(path.sep);
  };

  return {
    root,
    dataDir,
    rootPath: { given: ".", absolute: root, relative: "." },
    resolveComponents,
    resolveExisting,
    resolveTarget,
    openFile,
    openDirectory,
    openFileAt,
    openEntryAt,
    openDirectoryAt,
    isDataPath,
    refusalOf,
    relativeOf,
  };
}

/**
 * The run engine passes the workspace in every call; it must be this runtime's (a mismatch is a
 * wiring bug, and guessing which root is meant would be worse than refusing).
 */
export function checkCallWorkspace(callWorkspace: string, workspace: Workspace): void {
  if (callWorkspace !== workspace.root) {
    throw new ToolCallError(
      "refused",
      "This call names a different workspace from the tool runtime's; nothing was done.",
    );
  }
}
