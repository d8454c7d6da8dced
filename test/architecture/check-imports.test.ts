// The import rules of docs/architecture.md are kept by test/architecture/check-imports.ts (run by
// `npm run check`): the tree keeps them, one import against them fails the check, a fixed
// exception must leave the list, and the page's rules and folder table say what the checker and
// the tree hold.
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkImports, orderRooms, readImports, rules } from "./check-imports.ts";

const repo = path.resolve(import.meta.dirname, "../..");
const src = path.join(repo, "src");
const checker = path.join(import.meta.dirname, "check-imports.ts");

const temps: string[] = [];
afterEach(async () => {
  for (const dir of temps.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A small src/ tree: `files` maps a path under src/ to its text. */
async function fixture(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "peergate-imports-"));
  temps.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, "src", name)), { recursive: true });
    await writeFile(path.join(dir, "src", name), text);
  }
  return path.join(dir, "src");
}

describe("the import rules", () => {
  it("hold in src/, with no listed exception left over", () => {
    expect(checkImports(src)).toEqual({ violations: [], stale: [] });
  });

  it("fail `npm run check`'s checker on one import against them", async () => {
    const dir = await fixture({
      "db/client.ts": 'import { createApp } from "../http/app.ts";\nexport const x = createApp;\n',
      "http/app.ts": "export const createApp = 1;\n",
      "domain/caller.ts": "export type Caller = string;\n",
    });
    const run = spawnSync(process.execPath, [checker, dir], { encoding: "utf8" });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("src/db/client.ts: an import of ../http/app.ts (db → http)");
    // Down the list is allowed: http builds on services, which build on db.
    const fine = await fixture({
      "http/app.ts": 'import { x } from "../services/add.ts";\nexport const y = x;\n',
      "services/add.ts": 'import { c } from "../db/client.ts";\nexport const x = c;\n',
      "db/client.ts": 'import type { Caller } from "../domain/caller.ts";\nexport const c = 1;\n',
      "domain/caller.ts": "export type Caller = string;\n",
    });
    expect(checkImports(fine, {}).violations).toEqual([]);
  });

  it("tell a type import from a value import where a rule allows types only", async () => {
    const dir = await fixture({
      "a2a/run-executor.ts":
        'import type { RunEngine } from "../runs/engine.ts";\nimport { start } from "../runs/engine.ts";\n',
      "runs/engine.ts": "export type RunEngine = 1;\nexport const start = 1;\n",
    });
    expect(checkImports(dir, {}).violations).toEqual([
      "src/a2a/run-executor.ts: an import of ../runs/engine.ts (a2a → runs) breaks docs/architecture.md's rules",
    ]);
  });

  it("fail on an exception that no longer occurs, and on a room with no rule", async () => {
    const dir = await fixture({ "gadgets/thing.ts": "export const thing = 1;\n" });
    const report = checkImports(dir, { "src/cli/tools.ts → tools": "fixed since" });
    expect(report.stale).toEqual([
      "src/cli/tools.ts → tools: listed as an exception but no longer imported: delete its line",
    ]);
    expect(report.violations).toEqual([
      'src/gadgets/thing.ts: its room "gadgets" has no rule in docs/architecture.md',
    ]);
  });

  it("read static, multi-line, re-exported and dynamic imports", () => {
    const text = [
      'import {\n  type A,\n  type B,\n} from "./a.ts";',
      'import { type C, d } from "./c.ts";',
      'export { e } from "./e.ts";',
      'import "./side.ts";',
      'const f = await import("./f.ts");',
      'import { z } from "zod";',
    ].join("\n");
    expect(readImports("x.ts", text).map((i) => [i.specifier, i.typeOnly])).toEqual([
      ["./a.ts", true],
      ["./c.ts", false],
      ["./e.ts", false],
      ["./side.ts", false],
      ["./f.ts", false],
    ]);
  });

  it("form no circle", () => {
    expect(orderRooms()).toHaveLength(Object.keys(rules).length);
    expect(() => orderRooms({ a: ["b"], b: ["type:a"] })).toThrow("a → b → a");
  });
});

describe("docs/architecture.md", () => {
  const page = readFile(path.join(repo, "docs/architecture.md"), "utf8");
  const section = async (heading: string) => {
    const text = await page;
    const start = text.indexOf(`## ${heading}\n`);
    const end = text.indexOf("\n## ", start + 1);
    return text.slice(start, end === -1 ? undefined : end);
  };

  it("has a row in its folder table for every room of src/, and no row for one that is gone", async () => {
    const table = await section("Folders");
    const rows = [...table.matchAll(/^\| `src\/([^`]+?)\/?` \|/gm)].map((m) => m[1]);
    const tree = (await readdir(src, { withFileTypes: true }))
      .filter((e) => e.isDirectory() || /\.(ts|mjs)$/.test(e.name))
      .map((e) => e.name);
    expect([...rows].sort()).toEqual([...tree].sort());
    expect(Object.keys(rules).sort()).toEqual([...tree].sort());
  });

  it("writes the same arrows the checker enforces", async () => {
    const list = await section("Dependency direction");
    const written: Record<string, string[]> = {};
    for (const m of list.matchAll(/^\d+\. (.+?) → (.+?)\.$/gm)) {
      const targets = [...(m[2] as string).matchAll(/`([^`]+)`( \(types\))?/g)].map((t) =>
        t[2] ? `type:${t[1]}` : (t[1] as string),
      );
      for (const from of (m[1] as string).matchAll(/`([^`]+)`/g)) {
        written[from[1] as string] = targets.filter((t) => t !== "nothing");
      }
    }
    // Rooms that take the shared plumbing have it written once, above the list.
    const plumbing = [
      "domain",
      "errors.ts",
      "json-text.ts",
      "plain-issue.ts",
      "shell",
      "log.ts",
      "trace.ts",
      "type:config.ts",
    ];
    const enforced = Object.fromEntries(
      Object.entries(rules).map(([room, targets]) => [
        room,
        plumbing.every((p) => targets.includes(p))
          ? targets.filter((t) => !plumbing.includes(t))
          : [...targets],
      ]),
    );
    const normalise = (r: Record<string, string[]>) =>
      Object.fromEntries(Object.entries(r).map(([k, v]) => [k, [...v].sort()]));
    expect(normalise(written)).toEqual(normalise(enforced));
  });
});
