// The postgres.js mends (src/db/patch-postgres-driver.mjs, run by `npm install`) are in the
// installed driver, and the patcher applies them once to a driver that lacks them and reports a
// driver it does not recognise. What each mend changes in behaviour is tested against a real
// PostgreSQL: a write on a closed connection in test/faults/database-outage.test.ts, the ones about
// cancelled queries and the one about a terminated session in test/db/postgres-driver-mends.test.ts.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain JavaScript module (npm may run it on an older Node), without types
import { mends, patchDriver } from "../../src/db/patch-postgres-driver.mjs";

type Mend = { name: string; file: string; unpatched: string; patched: string };
type Result = { file: string; mend: string; state: string };

const installed = path.join(import.meta.dirname, "../../node_modules/postgres");
const all = mends as Mend[];

describe("the postgres driver's mends", () => {
  it("are each in every flavour of the installed driver, in place of the driver's own text", async () => {
    expect(all.map((m) => m.name)).toEqual([
      "write on a closed connection",
      "cancelled pipelined query skipped",
      "cancelled query stalls a reserved connection",
      "server error outlives its session",
    ]);
    for (const flavour of ["src", "cjs/src", "cf/src"]) {
      for (const mend of all) {
        const text = await readFile(path.join(installed, flavour, mend.file), "utf8");
        expect(text.includes(mend.patched), `${flavour} ${mend.name}`).toBe(true);
        expect(text.includes(mend.unpatched), `${flavour} ${mend.name}`).toBe(false);
      }
    }
  });

  it("patch a driver without them once, and say when they do not recognise one", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "peergate-pgdriver-"));
    try {
      // The installed driver with every mend undone stands for the released one.
      for (const file of ["connection.js", "index.js"]) {
        let text = await readFile(path.join(installed, "src", file), "utf8");
        for (const mend of all.filter((m) => m.file === file)) {
          text = text.replace(mend.patched, mend.unpatched);
        }
        await mkdir(path.join(dir, "src"), { recursive: true });
        await writeFile(path.join(dir, "src", file), text);
      }
      await mkdir(path.join(dir, "cjs/src"), { recursive: true });
      await writeFile(path.join(dir, "cjs/src/connection.js"), "something else entirely\n");
      const original = await readFile(path.join(dir, "src/connection.js"), "utf8");
      expect(original).not.toContain("patched by peergate");

      const first = (patchDriver(dir) as Result[]).map((r) => [
        path.relative(dir, r.file),
        r.mend,
        r.state,
      ]);
      const unknown = "not recognised (a newer driver? check the fix is in it)";
      expect(first).toEqual([
        ["src/connection.js", "write on a closed connection", "patched"],
        ["src/connection.js", "cancelled pipelined query skipped", "patched"],
        ["src/index.js", "cancelled query stalls a reserved connection", "patched"],
        ["src/connection.js", "server error outlives its session", "patched"],
        ["cjs/src/connection.js", "write on a closed connection", unknown],
        ["cjs/src/connection.js", "cancelled pipelined query skipped", unknown],
        ["cjs/src/connection.js", "server error outlives its session", unknown],
      ]);
      const patched = await readFile(path.join(dir, "src/connection.js"), "utf8");
      expect(patched).toContain("if (socket === null)");
      expect(patched).not.toContain("while (sent.length && (query = sent.shift())");

      const second = patchDriver(dir) as Result[];
      expect(second.slice(0, 4).map((r) => r.state)).toEqual([
        "already patched",
        "already patched",
        "already patched",
        "already patched",
      ]);
      expect(await readFile(path.join(dir, "src/connection.js"), "utf8")).toBe(patched);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
