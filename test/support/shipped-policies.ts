// The policy files as shipped: `policies/` at the checkout's HEAD, read from git, never the files in
// the checkout. An operator following the README edits `policies/` (a price line, a model, a tool)
// in the same checkout the tests run from, and no test may see that: a test reads what the
// project ships, or it proves nothing about it (issue 27).
//
// The copy is extracted once per policies tree (keyed by its git tree id, so an edit committed on
// a branch is what that branch's tests read) into the system's temporary directory, and shared by
// every test process: extraction writes a private staging directory and renames it into place, so
// a reader never sees half a copy.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** The checkout this test code is in. */
export const repoRoot = path.resolve(import.meta.dirname, "../..");

/**
 * A directory holding `policies/` as committed at `repoRoot`'s HEAD (treat it as read-only: copy
 * it to change it). Throws, saying why, when `repoRoot` is not a git checkout.
 */
export function extractShippedPolicies(root: string = repoRoot): string {
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", root, ...args], { maxBuffer: 64 * 1024 * 1024 });
  let tree: string;
  try {
    tree = git("rev-parse", "HEAD:policies").toString().trim();
  } catch (error) {
    throw new Error(
      `the tests read the shipped policies from git (HEAD:policies in ${root}), and git could not: ${String(error)}`,
    );
  }
  const home = path.join(tmpdir(), `peergate-shipped-policies-${tree}`);
  const dir = path.join(home, "policies");
  if (existsSync(dir)) return dir;
  const staging = mkdtempSync(path.join(tmpdir(), "peergate-shipped-policies-staging-"));
  try {
    execFileSync("tar", ["-x", "-C", staging], { input: git("archive", "--format=tar", tree) });
    mkdirSync(home, { recursive: true });
    try {
      renameSync(staging, dir);
    } catch (error) {
      // Another test process put the same tree in place first: theirs is as good as ours.
      if (!existsSync(dir)) throw error;
    }
  } finally {
    if (existsSync(staging)) rmSync(staging, { recursive: true, force: true });
  }
  return dir;
}

/** `policies/` as shipped (HEAD), for every test that needs the project's own policy files. */
export const shippedPoliciesDir = extractShippedPolicies();
