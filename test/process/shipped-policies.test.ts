// The tests never read the operator's files in the checkout (issue 27): an operator following the
// README edits `policies/` (a price line, a model) and creates `first-peer.json`, `workspace/` and
// `.peergate/` beside the code. Here a throwaway clone of this commit has every policy file replaced
// by text no parser accepts, and a test file that reads the policy files still passes in it,
// because the tests take `policies/` from git (test/support/shipped-policies.ts). The files the
// quick start writes are ignored by git, so `git status` stays clean and none is committed.
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractShippedPolicies, repoRoot } from "../support/shipped-policies.ts";

const run = promisify(execFile);
const sentinel = "sentinel: [ this is the operator's edit, and no test may read it\n";

describe("the checkout's operator files", () => {
  let dir: string;
  let clone: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-shipped-"));
    clone = path.join(dir, "peergate");
    const { stdout: head } = await run("git", ["-C", repoRoot, "rev-parse", "HEAD"]);
    await run("git", ["clone", "--quiet", "--shared", "--no-checkout", repoRoot, clone]);
    await run("git", ["-C", clone, "checkout", "--quiet", "--detach", head.trim()]);
    await symlink(path.join(repoRoot, "node_modules"), path.join(clone, "node_modules"));
    for (const name of await readdir(path.join(clone, "policies"))) {
      if (name.endsWith(".yaml")) await writeFile(path.join(clone, "policies", name), sentinel);
    }
  }, 120_000);
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  });

  it("are not what the tests read: a policy test passes with every policy file edited", async () => {
    // The shipped copy of the edited clone is HEAD's, not the sentinel.
    const shipped = extractShippedPolicies(clone);
    const { stdout: agent } = await run("git", ["-C", clone, "show", "HEAD:policies/agent.yaml"]);
    expect(await readFile(path.join(shipped, "agent.yaml"), "utf8")).toBe(agent);
    // And a test file that loads the policy files passes in the edited clone.
    const vitest = path.join(clone, "node_modules", "vitest", "vitest.mjs");
    const result = await run(
      process.execPath,
      [vitest, "run", "--project", "unit", "test/policy/policy-files.happy.test.ts"],
      {
        cwd: clone,
        env: { ...process.env, PEERGATE_TEST_POSTGRES: "skip", CI: "1" },
        maxBuffer: 16 * 1024 * 1024,
      },
    ).catch((error: { code?: number; stdout?: string; stderr?: string }) => error);
    expect(
      { code: "code" in result ? result.code : 0, out: result.stdout?.slice(-3000) },
      result.stderr?.slice(-3000),
    ).toMatchObject({ code: 0 });
  }, 240_000);

  it("that the quick start writes are ignored by git", async () => {
    const files = [
      "first-peer.json",
      "workspace/notes.txt",
      ".peergate/admin-token",
      ".peergate/pg/PG_VERSION",
      "client.mjs",
    ];
    const { stdout } = await run("git", ["-C", repoRoot, "check-ignore", "--no-index", ...files]);
    expect(stdout.trim().split("\n").sort()).toEqual([...files].sort());
  });
});
