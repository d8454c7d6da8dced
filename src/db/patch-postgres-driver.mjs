// Run by `npm install` / `npm ci` (the `postinstall` script): applies src/db/postgres-driver.patch,
// the project's mends to postgres.js (what each mends and why: that file and
// docs/dependencies.md), to every flavour of the installed driver.
//
// It fails closed. The installed driver must be the exact version package.json pins, and every
// hunk of the patch must match the driver's text exactly, context included, exactly once (or be
// there already, applied): otherwise nothing is written and the install fails, naming what to
// re-check. Hunks are placed by their text, not by their line numbers, so the three flavours
// (ESM, CommonJS, Cloudflare), whose line numbers differ, share one patch.
//
// The server checks the same hunks at start-up (src/db/open-configured.ts) and refuses to open
// PostgreSQL through a driver without them, since `npm ci --ignore-scripts` skips this script.
//
// Plain JavaScript on purpose: npm may run this on an older system Node before the pinned one.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

/** The driver version the patch was written against; package.json must pin exactly this. */
export const pinnedVersion = "3.4.9";
export const patchFile = path.join(here, "postgres-driver.patch");
export const flavours = ["src", "cjs/src", "cf/src"];

/**
 * The patch's hunks, read from the unified diff: for each, the file (relative to a flavour's
 * directory), its label (the text after the second `@@`), and the text before and after.
 */
export function readPatch(text = readFileSync(patchFile, "utf8")) {
  const hunks = [];
  let file;
  let hunk;
  for (const line of text.split("\n")) {
    if (line.startsWith("--- ")) {
      file = undefined;
      hunk = undefined;
      continue;
    }
    if (line.startsWith("+++ ")) {
      file = line.slice(4).replace(/^b\/src\//, "");
      continue;
    }
    if (!file) continue; // the explanation before the first file
    if (line.startsWith("@@")) {
      const label = line.replace(/^@@ [^@]* @@ ?/, "").trim();
      hunk = { file, label, before: "", after: "" };
      hunks.push(hunk);
      continue;
    }
    if (!hunk) continue;
    const body = `${line.slice(1)}\n`;
    if (line.startsWith(" ")) {
      hunk.before += body;
      hunk.after += body;
    } else if (line.startsWith("-")) hunk.before += body;
    else if (line.startsWith("+")) hunk.after += body;
    else if (line === "" || line.startsWith("\\")) continue;
    else throw new Error(`${patchFile}: not a unified diff line: ${JSON.stringify(line)}`);
  }
  return hunks;
}

const count = (text, part) => text.split(part).length - 1;

/**
 * What state the driver in `dir` is in, without changing it: its version, and for each flavour
 * and hunk "mended" (the patched text is there once, the driver's is not), "unmended" (the
 * driver's text is there once) or "not recognised" (anything else).
 */
export function inspectDriver(dir, hunks = readPatch()) {
  const manifest = path.join(dir, "package.json");
  const version = existsSync(manifest) ? JSON.parse(readFileSync(manifest, "utf8")).version : null;
  const results = [];
  for (const flavour of flavours) {
    for (const [index, hunk] of hunks.entries()) {
      const file = path.join(dir, flavour, hunk.file);
      const text = existsSync(file) ? readFileSync(file, "utf8") : "";
      const patched = count(text, hunk.after);
      const unpatched = count(text, hunk.before);
      const state =
        patched === 1 && unpatched === 0
          ? "mended"
          : unpatched === 1 && patched === 0
            ? "unmended"
            : "not recognised";
      results.push({ file, flavour, hunk: hunk.label, index, state });
    }
  }
  return { version, results };
}

/** Why the driver in `dir` is not mended, one line each; empty when every hunk is in place. */
export function describeUnmended(dir, hunks = readPatch()) {
  const { version, results } = inspectDriver(dir, hunks);
  const problems = [];
  if (version !== pinnedVersion) {
    problems.push(
      `postgres ${version ?? "(no package.json)"} is installed, the mends are for ${pinnedVersion}`,
    );
  }
  for (const r of results) {
    if (r.state !== "mended") problems.push(`${path.relative(dir, r.file)}: ${r.hunk}: ${r.state}`);
  }
  return problems;
}

/** Raised when the driver is not the one the patch was written for; nothing has been written. */
export class DriverNotRecognisedError extends Error {
  constructor(problems) {
    super(
      [
        "postgres driver not recognised, so its mends cannot be applied:",
        ...problems.map((p) => `  - ${p}`),
        `Re-check each mend in ${path.relative(root, patchFile)} against the new driver's source`,
        "(is the defect fixed upstream? does the same shape appear elsewhere?), then update the",
        "patch, pinnedVersion in src/db/patch-postgres-driver.mjs and docs/dependencies.md.",
      ].join("\n"),
    );
    this.name = "DriverNotRecognisedError";
    this.problems = problems;
  }
}

/**
 * Applies every hunk the driver in `dir` lacks, all or nothing. `expectedVersion` is the version
 * the project pins (package.json); it must be pinnedVersion. Returns what it found per hunk.
 */
export function patchDriver(dir, expectedVersion = readPinnedVersion()) {
  const hunks = readPatch();
  const { version, results } = inspectDriver(dir, hunks);
  const problems = [];
  if (expectedVersion !== pinnedVersion) {
    problems.push(
      `package.json pins postgres ${expectedVersion}, the mends are for ${pinnedVersion}`,
    );
  }
  if (version !== pinnedVersion) {
    problems.push(
      `the installed driver is ${version ?? "missing"}, the mends are for ${pinnedVersion}`,
    );
  }
  for (const r of results) {
    if (r.state === "not recognised") {
      problems.push(
        `${path.relative(dir, r.file)}: ${r.hunk}: the expected text is not there once`,
      );
    }
  }
  if (problems.length > 0) throw new DriverNotRecognisedError(problems);

  const files = new Map();
  for (const r of results) {
    if (r.state !== "unmended") continue;
    const hunk = hunks[r.index];
    const text = files.get(r.file) ?? readFileSync(r.file, "utf8");
    files.set(
      r.file,
      text.replace(hunk.before, () => hunk.after),
    );
  }
  // Each file is replaced whole (write aside, then rename): a process loading the driver
  // meanwhile sees the old file or the new one, never half of one.
  for (const [file, text] of files) {
    writeFileSync(`${file}.peergate-tmp`, text);
    renameSync(`${file}.peergate-tmp`, file);
  }
  return results;
}

/** The postgres version package.json pins. */
export function readPinnedVersion(manifest = path.join(root, "package.json")) {
  return JSON.parse(readFileSync(manifest, "utf8")).dependencies?.postgres;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // A directory argument patches that copy instead (the tests do, on a copy of the driver).
  const driver = process.argv[2] ?? path.join(root, "node_modules", "postgres");
  try {
    const results = patchDriver(driver);
    const applied = results.filter((r) => r.state === "unmended").length;
    console.log(
      `postgres driver ${pinnedVersion}: ${applied} hunk(s) applied, ${results.length - applied} already in place`,
    );
  } catch (error) {
    console.error(error instanceof DriverNotRecognisedError ? error.message : error);
    process.exit(1);
  }
}
