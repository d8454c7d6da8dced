// Containment by identity (src/path-identity.ts) and the place checks loadConfig makes with it:
// symlinked parents, paths that do not exist yet, a second name above a path, and TMPDIR.
import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { canonicalPath, liesWithin, overlaps } from "../../src/path-identity.ts";

let base: string;
beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(os.tmpdir(), "peergate-identity-unit-")));
  await mkdir(path.join(base, "ws", "inner"), { recursive: true });
  await mkdir(path.join(base, "data"));
  await symlink(path.join(base, "ws", "inner"), path.join(base, "into-ws"));
});
afterAll(() => rm(base, { recursive: true, force: true }));

describe("liesWithin", () => {
  it("resolves a symlinked parent, even of a path that does not exist yet", () => {
    const data = path.join(base, "into-ws", "not-yet", ".peergate");
    expect(canonicalPath(data)).toBe(path.join(base, "ws", "inner", "not-yet", ".peergate"));
    expect(liesWithin(data, path.join(base, "ws"))).toBe(true);
    expect(overlaps(path.join(base, "ws"), data)).toBe(true);
  });

  it("keeps siblings apart, names sharing a prefix included", () => {
    expect(liesWithin(path.join(base, "data"), path.join(base, "ws"))).toBe(false);
    expect(liesWithin(path.join(base, "ws-2"), path.join(base, "ws"))).toBe(false);
  });
});

describe("loadConfig's places", () => {
  it("refuses a data directory behind a symlinked parent into the workspace", () => {
    expect(() =>
      loadConfig(
        {
          PEERGATE_WORKSPACE: path.join(base, "ws"),
          PEERGATE_DATA_DIR: path.join(base, "into-ws", ".peergate"),
          PEERGATE_POLICIES_DIR: path.join(base, "policies"),
        },
        base,
      ),
    ).toThrow(/PEERGATE_DATA_DIR=.*really.* is inside the workspace/);
  });

  it("refuses a TMPDIR inside the workspace, where the sandbox's /etc and verified copies are staged", () => {
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = path.join(base, "ws", "tmp");
    try {
      expect(() =>
        loadConfig(
          {
            PEERGATE_WORKSPACE: path.join(base, "ws"),
            PEERGATE_DATA_DIR: path.join(base, "data"),
            PEERGATE_POLICIES_DIR: path.join(base, "policies"),
          },
          base,
        ),
      ).toThrow(/TMPDIR=.* is inside the workspace/);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
});
