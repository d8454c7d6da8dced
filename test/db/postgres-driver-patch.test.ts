// The postgres.js guard (src/db/patch-postgres-driver.mjs, run by `npm install`): a write batched
// behind a setImmediate must not throw on a connection that closed meanwhile (it crashed the
// server once in the database-outage fault test).
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain JavaScript module (npm may run it on an older Node), without types
import { patchDriver } from "../../src/db/patch-postgres-driver.mjs";

const installed = path.join(import.meta.dirname, "../../node_modules/postgres");

describe("the postgres driver's null-socket guard", () => {
  it("is in every flavour of the installed driver", async () => {
    for (const flavour of ["src", "cjs/src"]) {
      const text = await readFile(path.join(installed, flavour, "connection.js"), "utf8");
      const at = text.indexOf("function nextWrite(fn) {");
      expect(at, flavour).toBeGreaterThan(0);
      const body = text.slice(at, text.indexOf("socket.write(chunk, fn)", at));
      expect(body, flavour).toContain("if (socket === null)");
      expect(body, flavour).toContain("CONNECTION_CLOSED");
    }
  });

  it("patches an unguarded driver once, and says when it does not recognise one", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "peergate-pgdriver-"));
    try {
      const original = (await readFile(path.join(installed, "src/connection.js"), "utf8")).replace(
        / {2}function nextWrite\(fn\) \{\n {4}if \(socket === null\) \{[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n {4}\}\n/,
        "  function nextWrite(fn) {\n",
      );
      expect(original).not.toContain("if (socket === null)");
      await mkdir(path.join(dir, "src"), { recursive: true });
      await mkdir(path.join(dir, "cjs/src"), { recursive: true });
      await writeFile(path.join(dir, "src/connection.js"), original);
      await writeFile(path.join(dir, "cjs/src/connection.js"), "something else entirely\n");
      const first = patchDriver(dir) as { file: string; state: string }[];
      expect(first.map((r) => r.state)).toEqual([
        "patched",
        "not recognised (a newer driver? check the fix is in it)",
      ]);
      const patched = await readFile(path.join(dir, "src/connection.js"), "utf8");
      expect(patched).toContain("if (socket === null)");
      expect(patched.length).toBeGreaterThan(original.length);
      const second = patchDriver(dir) as { state: string }[];
      expect(second[0]?.state).toBe("already patched");
      expect(await readFile(path.join(dir, "src/connection.js"), "utf8")).toBe(patched);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
