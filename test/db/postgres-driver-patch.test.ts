// The postgres.js mends (src/db/postgres-driver.patch, applied by src/db/patch-postgres-driver.mjs,
// which `npm install` / `npm ci` run as the `postinstall` script) are in the installed driver; the
// patcher applies them once to a driver that lacks them and fails, writing nothing, on a driver
// it does not recognise. Always on a copy of the driver: the installed one is shared.
// What each mend changes in behaviour is tested against a real PostgreSQL: a write on a closed
// connection in test/faults/database-outage.test.ts, the others in
// test/db/postgres-driver-mends.test.ts.
import { spawnSync } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkDriverMended, resolveDriverDir } from "../../src/db/open-configured.ts";
import {
  describeUnmended,
  flavours,
  inspectDriver,
  pinnedVersion,
  readPatch,
} from "../../src/db/patch-postgres-driver.mjs";
import { copyUnmendedDriver, installedDriver as installed } from "../support/unmended-driver.ts";

const repo = path.join(import.meta.dirname, "../..");
const script = path.join(repo, "src/db/patch-postgres-driver.mjs");
const hunks = readPatch();

const temps: string[] = [];
afterEach(async () => {
  for (const dir of temps.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function copyUnmended(): Promise<string> {
  const dir = await copyUnmendedDriver();
  temps.push(dir);
  return dir;
}

const runPatcher = (dir: string) => {
  const run = spawnSync(process.execPath, [script, dir], { encoding: "utf8" });
  return { code: run.status, out: run.stdout, err: run.stderr };
};

const states = (dir: string) => inspectDriver(dir).results.map((r) => r.state);

describe("the postgres driver's mends", () => {
  it("are a unified diff for the pinned driver, with every hunk in every flavour of the installed one", async () => {
    const manifest = JSON.parse(await readFile(path.join(repo, "package.json"), "utf8"));
    expect(manifest.dependencies.postgres).toBe(pinnedVersion);
    expect(manifest.scripts.postinstall).toBe("node src/db/patch-postgres-driver.mjs");
    expect(hunks.map((h) => `${h.file} ${h.label.split(":")[0]}`)).toEqual([
      "connection.js mend 1",
      "connection.js mend 4",
      "connection.js mend 2",
      "index.js mend 3a",
      "index.js mend 3b",
      "query.js mend 3c",
    ]);
    for (const hunk of hunks) expect(hunk.after).toContain("patched by peergate");
    expect(describeUnmended(installed)).toEqual([]);
  });

  it("are what the server's start-up check finds in the driver it loads", async () => {
    const loaded = resolveDriverDir();
    expect(await realpath(loaded)).toBe(await realpath(installed));
    expect(() => checkDriverMended(loaded, false, () => {})).not.toThrow();
    const unmended = await copyUnmended();
    const warnings: unknown[] = [];
    expect(() => checkDriverMended(unmended, false, () => {})).toThrow(
      "the postgres driver is not mended",
    );
    checkDriverMended(unmended, true, (message, fields) => warnings.push({ message, fields }));
    expect(warnings).toHaveLength(1);
  });

  it("are applied to an unmended driver once, and a second run changes nothing", async () => {
    const dir = await copyUnmended();
    expect(new Set(states(dir))).toEqual(new Set(["unmended"]));
    expect(describeUnmended(dir)).toHaveLength(flavours.length * hunks.length);

    const first = runPatcher(dir);
    expect(first.code, first.err).toBe(0);
    expect(first.out).toContain(`${flavours.length * hunks.length} hunk(s) applied`);
    expect(new Set(states(dir))).toEqual(new Set(["mended"]));
    for (const flavour of flavours) {
      for (const file of ["connection.js", "index.js", "query.js"]) {
        expect(await readFile(path.join(dir, flavour, file), "utf8")).toBe(
          await readFile(path.join(installed, flavour, file), "utf8"),
        );
      }
    }
    const second = runPatcher(dir);
    expect(second.code).toBe(0);
    expect(second.out).toContain("0 hunk(s) applied");
  });

  it("fail the install, writing nothing, when one hunk's text differs in the driver", async () => {
    const dir = await copyUnmended();
    const changed = path.join(dir, "cjs/src/index.js");
    const text = await readFile(changed, "utf8");
    // One context line of mend 3b reads differently: a driver nobody re-checked the mends against.
    const edited = text.replace(
      "    function onexecute(c) {\n",
      "    function onexecute(c, x) {\n",
    );
    expect(edited).not.toBe(text);
    await writeFile(changed, edited);
    const before = await readFile(path.join(dir, "src/connection.js"), "utf8");

    const run = runPatcher(dir);
    expect(run.code).not.toBe(0);
    expect(run.err).toContain("postgres driver not recognised");
    expect(run.err).toContain("cjs/src/index.js: mend 3b");
    expect(run.err).toContain("src/db/postgres-driver.patch");
    // All or nothing: the flavours that did match were not patched either.
    expect(await readFile(path.join(dir, "src/connection.js"), "utf8")).toBe(before);
    expect(new Set(states(dir))).not.toContain("mended");
  });

  it("fail npm's install step: `npm run postinstall` (what npm ci runs) exits non-zero on a driver it does not recognise", async () => {
    // A throwaway project: package.json, the patch and its script, and a changed driver copy.
    const project = await mkdtemp(path.join(tmpdir(), "peergate-install-"));
    temps.push(project);
    const driver = path.join(project, "node_modules/postgres");
    await mkdir(path.join(project, "src/db"), { recursive: true });
    await cp(path.join(repo, "package.json"), path.join(project, "package.json"));
    for (const file of ["patch-postgres-driver.mjs", "postgres-driver.patch"]) {
      await cp(path.join(repo, "src/db", file), path.join(project, "src/db", file));
    }
    await cp(installed, driver, { recursive: true });
    const index = path.join(driver, "src/index.js");
    await writeFile(index, (await readFile(index, "utf8")).replace("let q\n", "let query\n"));
    const run = spawnSync("npm", ["run", "postinstall"], {
      cwd: project,
      encoding: "utf8",
      env: { ...process.env, npm_config_offline: "true" },
    });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("postgres driver not recognised");
    expect(run.stderr).toContain("src/index.js: mend 3a");
  });

  it("fail the install on a driver of another version, even if its text matches", async () => {
    const dir = await copyUnmended();
    const manifest = path.join(dir, "package.json");
    const pkg = JSON.parse(await readFile(manifest, "utf8"));
    await writeFile(manifest, JSON.stringify({ ...pkg, version: "3.4.10" }));
    const run = runPatcher(dir);
    expect(run.code).not.toBe(0);
    expect(run.err).toContain(`the installed driver is 3.4.10, the mends are for ${pinnedVersion}`);
    expect(new Set(states(dir))).toEqual(new Set(["unmended"]));
  });
});
