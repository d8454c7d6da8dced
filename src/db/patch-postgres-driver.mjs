// Run by `npm install` / `npm ci` (the `postinstall` script): mends a crash in postgres.js 3.4.9,
// the PostgreSQL driver, until upstream releases the fix (porsager/postgres#1154, #1208).
//
// The driver batches small writes behind a setImmediate. When the connection closes before that
// immediate runs, `closed()` has set the socket to null and the immediate calls `socket.write` on
// it: a TypeError thrown from a timer, which no caller can catch, so a database that goes away at
// the wrong moment takes the whole server down. Seen here in the database-outage fault test.
//
// The guard: with no socket, drop the buffered bytes and fail what was waiting on the connection
// with the driver's own CONNECTION_CLOSED error (so no query hangs), instead of throwing.
// Plain JavaScript on purpose: npm may run this on an older system Node before the pinned one.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const driver = path.join(root, "node_modules", "postgres");
const unguarded = "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n";
const guarded =
  "  function nextWrite(fn) {\n" +
  "    if (socket === null) { // patched by peergate (src/db/patch-postgres-driver.mjs)\n" +
  "      chunk = nextWriteTimer = null\n" +
  "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
  "      return false\n" +
  "    }\n" +
  "    const x = socket.write(chunk, fn)\n";

export function patchDriver(dir = driver) {
  const results = [];
  for (const flavour of ["src", "cjs/src", "cf/src"]) {
    const file = path.join(dir, flavour, "connection.js");
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    if (text.includes(guarded)) results.push({ file, state: "already patched" });
    else if (text.includes(unguarded)) {
      writeFileSync(file, text.replace(unguarded, guarded));
      results.push({ file, state: "patched" });
    } else results.push({ file, state: "not recognised (a newer driver? check the fix is in it)" });
  }
  return results;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!existsSync(driver)) process.exit(0);
  for (const { file, state } of patchDriver()) {
    console.log(`postgres driver: ${path.relative(root, file)}: ${state}`);
  }
}
