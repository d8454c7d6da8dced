// The bytes a script or pinned program was verified with are the bytes that run. Each such file is
// read once, through one descriptor, hashed while it is copied into a private staging directory
// (the server's own, 0755, under the system temp directory, removed at exit), and the copy is made
// read-only (0444, or 0555 for something executed) under a name given by its digest. What runs is
// that copy, named by its own path: under PEERGATE_SANDBOX=none the staged path itself; inside the
// sandbox a read-only bind of it under /run/peergate/verified/, in the sandbox's own root, which no
// process outside can reach (SandboxRequest.boundFiles). The operator's path is never opened again
// to run it, so a file swapped between the check and the start cannot be what starts.
//
// Not at the operator's path: a bind there has its mount point in the workspace, a directory of
// the host, and a rename over that path from outside the sandbox (another caller's command, any
// process of the workspace's owner) detaches the mount — Linux lazily unmounts a mount point
// renamed over or unlinked in another mount namespace — so the interpreter, opening the path after
// exec, read whatever had been put there. A script therefore sees the copy's path as `$0` (its
// file name kept, its directory not); it still runs in the workspace.
//
// Copies are kept by digest for the life of the process: a reload that finds the same bytes
// reuses the copy, and a copy a running call still uses is never removed under it.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, constants, mkdtempSync, rmSync } from "node:fs";
import { chmod, link, mkdir, open, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { SandboxBackend } from "../../sandbox/types.ts";

let stagingDir: string | undefined;

/** The process's staging directory, made at the first use and removed when the process exits. */
export function stagingDirectory(): string {
  if (stagingDir === undefined) {
    const dir = mkdtempSync(path.join(os.tmpdir(), "peergate-verified-"));
    chmodSync(dir, 0o755);
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    stagingDir = dir;
  }
  return stagingDir;
}

/** A file read once and copied: the operator's path, the digest of what was read, the copy. */
export type VerifiedFile = {
  readonly path: string;
  readonly sha256: string;
  /** The read-only copy holding exactly the bytes `sha256` names. */
  readonly staged: string;
};

export type StageOptions = {
  /** Refuse a symlink as the file itself (scripts: O_NOFOLLOW). */
  readonly noFollow?: boolean;
  /** Refuse more bytes than this. */
  readonly maxBytes?: number;
  /** The copy is run as a program (0555) rather than read by an interpreter (0444). */
  readonly executable: boolean;
};

/**
 * Reads `file` once and stages its bytes; a sentence saying why not when it cannot (not a regular
 * file, over the bound, unreadable).
 */
export async function stageVerifiedFile(
  file: string,
  options: StageOptions,
): Promise<VerifiedFile | string> {
  const flags = constants.O_RDONLY | (options.noFollow === true ? constants.O_NOFOLLOW : 0);
  let source: Awaited<ReturnType<typeof open>> | undefined;
  const root = stagingDirectory();
  const temp = path.join(root, `.incoming-${randomBytes(8).toString("hex")}`);
  try {
    source = await open(file, flags);
    const stats = await source.stat();
    if (!stats.isFile()) return `${file} is not a regular file`;
    const max = options.maxBytes;
    if (max !== undefined && stats.size > max) {
      return `${file} has ${stats.size} bytes, over maxSourceBytes ${max}`;
    }
    const hash = createHash("sha256");
    const copy = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    let total = 0;
    try {
      for await (const chunk of source.createReadStream({ autoClose: false })) {
        const bytes = chunk as Buffer;
        total += bytes.length;
        if (max !== undefined && total > max) return `${file} is over maxSourceBytes ${max}`;
        hash.update(bytes);
        await copy.write(bytes);
      }
    } finally {
      await copy.close();
    }
    const sha256 = hash.digest("hex");
    await chmod(temp, options.executable ? 0o555 : 0o444);
    // The file keeps its own name (a program may read its argv[0]); the directory says its digest.
    const dir = path.join(root, sha256, options.executable ? "x" : "r");
    await mkdir(dir, { recursive: true, mode: 0o755 });
    const staged = path.join(dir, path.basename(file));
    // link, not rename: an existing copy (the same bytes, by digest) is never replaced.
    await link(temp, staged).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
    return { path: file, sha256, staged };
  } catch (error) {
    return `${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`;
  } finally {
    await source?.close();
    await rm(temp, { force: true });
  }
}

/** The argv of one stage and which of its positions name a verified file (command-plan.ts). */
export type VerifiedStage = {
  readonly argv: readonly [string, ...string[]];
  readonly files: readonly {
    readonly index: number;
    readonly path: string;
    readonly staged: string;
  }[];
};

/** Where the sandbox sees the verified copies: in its own root, never a directory of the host. */
export const sandboxVerifiedRoot = "/run/peergate/verified";

/**
 * What one pipeline starts: each verified file from its copy, never the operator's path, named in
 * the argv where the operator's path was. Under `none` the copy's own path; under a confining
 * backend its path under `sandboxVerifiedRoot`, which every request the backend wraps binds
 * read-only from the copy (`boundFiles`). `verified` lists the operator's paths: none of them is
 * bound into the sandbox.
 */
export function launchVerified(
  stages: readonly VerifiedStage[],
  backend: SandboxBackend,
): {
  argvs: [string, ...string[]][];
  backend: SandboxBackend;
  verified: ReadonlySet<string>;
} {
  const confined = backend.kind !== "none";
  // The copy's place in the staging directory (<digest>/<x|r>/<name>), kept under the root.
  const named = (staged: string) =>
    confined
      ? path.posix.join(sandboxVerifiedRoot, path.relative(stagingDirectory(), staged))
      : staged;
  const argvs = stages.map(
    (s) =>
      s.argv.map((arg, i) => {
        const file = s.files.find((f) => f.index === i);
        return file === undefined ? arg : named(file.staged);
      }) as [string, ...string[]],
  );
  const verified = new Set(stages.flatMap((s) => s.files.map((f) => f.path)));
  if (!confined) return { argvs, backend, verified };
  const bound = new Map(
    stages.flatMap((s) => s.files.map((f) => [named(f.staged), f.staged] as const)),
  );
  const boundFiles = [...bound].map(([target, source]) => ({ source, target }));
  const binding: SandboxBackend =
    boundFiles.length === 0
      ? backend
      : { ...backend, wrap: (request) => backend.wrap({ ...request, boundFiles }) };
  return { argvs, backend: binding, verified };
}
