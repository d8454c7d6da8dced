// A copy of the installed postgres.js with every mend of src/db/postgres-driver.patch undone: the
// driver as npm unpacks it, before the `postinstall` script. Tests patch or run against the copy;
// the installed driver is shared and never changed by a test.
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { flavours, readPatch } from "../../src/db/patch-postgres-driver.mjs";

export const installedDriver = path.join(import.meta.dirname, "../../node_modules/postgres");

/** Copies the installed driver to `dir` (a new temp dir if omitted) and undoes the mends there. */
export async function copyUnmendedDriver(dir?: string): Promise<string> {
  const target = dir ?? (await mkdtemp(path.join(tmpdir(), "peergate-pgdriver-")));
  await cp(installedDriver, target, { recursive: true });
  const hunks = readPatch();
  for (const flavour of flavours) {
    for (const file of new Set(hunks.map((h) => h.file))) {
      const at = path.join(target, flavour, file);
      let text = await readFile(at, "utf8");
      for (const hunk of hunks.filter((h) => h.file === file)) {
        text = text.replace(hunk.after, () => hunk.before);
      }
      await writeFile(at, text);
    }
  }
  return target;
}
