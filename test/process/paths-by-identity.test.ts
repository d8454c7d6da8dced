// Paths compared by what they are, attacked through `peergate serve` as an operator starts it: a
// data directory reached through a symlinked parent that points into the workspace (which used to
// pass, and let a command read the admin token), a workspace reached through a symlink into the
// data directory, the policy directory in the workspace, and each of them through a bind mount
// (in a mount namespace of the test's own). Each stops start-up naming the fix. On SIGHUP the
// places are checked again, and a reloaded tools.yaml whose program is in the workspace by another
// name (unpinned), or whose script is in the data directory by another name, is refused.
import { spawnSync } from "node:child_process";
import { chmod, cp, mkdir, mkdtemp, rm, symlink, unlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setAgentTools } from "../e2e/support.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { eventually } from "../support/eventually.ts";
import { giveToSandboxUser } from "../support/sandbox-workspace.ts";
import { spawnServeChild } from "../support/serve-process.ts";

let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "peergate-identity-"));
});
afterAll(() => rm(base, { recursive: true, force: true }));

/** `peergate serve` with `env`: the reason it stopped, or a failure if it started. */
async function refusal(
  env: Record<string, string>,
  wrap?: (argv: string[]) => string[],
): Promise<string> {
  const started = await spawnServeChild(
    { PATH: process.env.PATH ?? "", PEERGATE_PORT: "0", ...env },
    wrap ? { wrap } : {},
  ).then(
    async (child) => {
      child.signalGroup("SIGKILL");
      await child.exited;
      return undefined;
    },
    (error: Error) => error.message,
  );
  if (started === undefined) throw new Error("peergate started; it should have refused");
  return started;
}

async function dirs(name: string) {
  const root = path.join(base, name);
  const workspace = path.join(root, "workspace");
  const data = path.join(root, "data");
  await mkdir(workspace, { recursive: true });
  await mkdir(data, { recursive: true });
  return { root, workspace, data };
}

describe("peergate serve refuses paths that hold each other under another name", () => {
  it("a data directory whose parent is a symlink into the workspace", async () => {
    const { root, workspace } = await dirs("data-via-symlink");
    await mkdir(path.join(workspace, "state"));
    await symlink(path.join(workspace, "state"), path.join(root, "state"));
    const message = await refusal({
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_DATA_DIR: path.join(root, "state", ".peergate"),
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
    });
    expect(message).toMatch(
      /PEERGATE_DATA_DIR=.* \(really .*workspace\/state\/\.peergate.*\) is inside the workspace/,
    );
    expect(message).toMatch(/set PEERGATE_DATA_DIR or PEERGATE_WORKSPACE/);
  }, 120_000);

  it("a workspace reached through a symlink into the data directory", async () => {
    const { root, data } = await dirs("workspace-via-symlink");
    await symlink(data, path.join(root, "work-link"));
    const message = await refusal({
      PEERGATE_WORKSPACE: path.join(root, "work-link", "ws"),
      PEERGATE_DATA_DIR: data,
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
    });
    expect(message).toMatch(/PEERGATE_WORKSPACE=.* is inside the data directory/);
  }, 120_000);

  it("a policy directory in the workspace, where a command could rewrite it", async () => {
    const { root, workspace, data } = await dirs("policies-inside");
    await cp(repoPoliciesDir, path.join(workspace, "policies"), { recursive: true });
    await symlink(path.join(workspace, "policies"), path.join(root, "policies"));
    const message = await refusal({
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_DATA_DIR: data,
      PEERGATE_POLICIES_DIR: path.join(root, "policies"),
    });
    expect(message).toMatch(/PEERGATE_POLICIES_DIR=.* is inside the workspace.*outside it/);
  }, 120_000);

  const unshare = spawnSync("unshare", ["-m", "true"]).status === 0;
  describe.skipIf(!unshare)("through bind mounts (a mount namespace of the test's own)", () => {
    const mounted = (mounts: string) => (argv: string[]) => [
      "unshare",
      "-m",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      `${mounts} && exec "$@"`,
      "sh",
      ...argv,
    ];

    it("a data directory under a second mount of the workspace", async () => {
      const { root, workspace } = await dirs("data-in-bind");
      const second = path.join(root, "second");
      await mkdir(second);
      const message = await refusal(
        {
          PEERGATE_WORKSPACE: workspace,
          PEERGATE_DATA_DIR: path.join(second, ".peergate"),
          PEERGATE_POLICIES_DIR: repoPoliciesDir,
        },
        mounted(`mount --bind ${workspace} ${second}`),
      );
      expect(message).toMatch(/PEERGATE_DATA_DIR=.* is inside the workspace/);
    }, 120_000);

    it("the data directory bind-mounted inside the workspace", async () => {
      const { workspace, data } = await dirs("bind-in-workspace");
      await mkdir(path.join(workspace, "inner"));
      const message = await refusal(
        {
          PEERGATE_WORKSPACE: workspace,
          PEERGATE_DATA_DIR: data,
          PEERGATE_POLICIES_DIR: repoPoliciesDir,
        },
        mounted(`mount --bind ${data} ${workspace}/inner`),
      );
      expect(message).toMatch(/PEERGATE_DATA_DIR=.* is inside the workspace/);
    }, 120_000);
  });

  it("a secret file with a second name (a hard link)", async () => {
    const { workspace, data } = await dirs("hard-link");
    await writeFile(path.join(data, "admin-token"), `${"t".repeat(40)}\n`, { mode: 0o600 });
    const { link } = await import("node:fs/promises");
    await link(path.join(data, "admin-token"), path.join(workspace, "token"));
    const message = await refusal({
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_DATA_DIR: data,
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
    });
    expect(message).toMatch(/admin-token has 2 hard links.*remove the other links/);
  }, 120_000);
});

describe("on SIGHUP", () => {
  it("checks the places again and refuses a tools.yaml reaching the workspace or data directory by another name", async () => {
    const { root, workspace } = await dirs("reload");
    // The reload offers a command tool, so the sandbox must work: a root server runs it as the
    // workspace's owner, who must reach the workspace (src/sandbox/host-user.ts).
    await chmod(base, 0o755);
    await chmod(root, 0o755);
    await giveToSandboxUser(workspace);
    const policies = path.join(root, "policies");
    await cp(repoPoliciesDir, policies, { recursive: true });
    const elsewhere = path.join(root, "elsewhere");
    await mkdir(elsewhere);
    const place = path.join(root, "place");
    await symlink(elsewhere, place);
    const child = await spawnServeChild({
      PATH: process.env.PATH ?? "",
      PEERGATE_PORT: "0",
      PEERGATE_WORKSPACE: workspace,
      PEERGATE_DATA_DIR: path.join(place, "data"),
      PEERGATE_POLICIES_DIR: policies,
    });
    try {
      const refusedWith = async (pattern: RegExp) =>
        eventually(
          `the reload to be refused with ${pattern}`,
          async () =>
            child.logs.some((l) => l.includes("policies not reloaded") && pattern.test(l)),
          { withinMs: 30_000 },
        );

      // A program in the workspace through a symlinked directory, without a pin.
      await mkdir(path.join(workspace, "bin"));
      await writeFile(path.join(workspace, "bin", "lint"), "#!/bin/sh\necho lint\n", {
        mode: 0o755,
      });
      await symlink(path.join(workspace, "bin"), path.join(root, "tools"));
      await setAgentTools(policies, ["files", "context", "custom"]);
      await writeFile(
        path.join(policies, "tools.yaml"),
        `commands:\n  - {name: lint, description: d, mode: fixed, program: ${path.join(root, "tools", "lint")}, risk: read-only, disclosure: public, egress: false}\n`,
      );
      child.signalGroup("SIGHUP");
      expect(await refusedWith(/is in the workspace, where commands can change it; pin it/)).toBe(
        true,
      );

      // A script that is a file of the data directory under another name.
      await symlink(path.join(elsewhere, "data"), path.join(root, "data-link"));
      await writeFile(
        path.join(policies, "tools.yaml"),
        `commands:\n  - {name: show, description: d, mode: script, script: ${path.join(root, "data-link", "admin-token")}, interpreter: /bin/cat, risk: read-only, disclosure: public, egress: false}\n`,
      );
      child.signalGroup("SIGHUP");
      expect(await refusedWith(/admin-token is in peergate's data directory/)).toBe(true);

      // The places themselves: the data directory's parent is re-pointed into the workspace.
      await writeFile(path.join(policies, "tools.yaml"), "commands: []\n");
      await unlink(place);
      await symlink(workspace, place);
      child.signalGroup("SIGHUP");
      expect(await refusedWith(/PEERGATE_DATA_DIR=.* is inside the workspace/)).toBe(true);
      expect(child.child.exitCode).toBe(null);
    } finally {
      child.signalGroup("SIGKILL");
      await child.exited;
    }
  }, 180_000);
});
