// Run by `npm install` / `npm ci` (the `postinstall` script): mends four defects of postgres.js
// 3.4.9, the PostgreSQL driver, until upstream releases fixes. Each is a text replacement in the
// driver's files, applied once; a driver whose text differs is reported, not touched.
//
// 1. A write on a closed connection (porsager/postgres#1154, #1208). The driver batches small
//    writes behind a setImmediate. When the connection closes before that immediate runs,
//    `closed()` has set the socket to null and the immediate calls `socket.write` on it: a
//    TypeError thrown from a timer, which no caller can catch, so a database that goes away at the
//    wrong moment takes the whole server down. Seen in the database-outage fault test. The guard:
//    with no socket, drop the buffered bytes and fail what was waiting on the connection with the
//    driver's own CONNECTION_CLOSED error, instead of throwing.
// 2. A cancelled query pipelined behind another is skipped when its turn comes. The driver sends
//    its CancelRequest then, but also makes the query behind it the current one, although the
//    server has the cancelled query and answers it: from then on every answer on that connection
//    goes to the query after the one it belongs to, for good (a frozen database whose statements
//    passed their deadline left a connection that failed every statement with a RangeError). The
//    mend: the cancelled query stays the current one and takes its own answers.
// 3. A cancelled query still queued on a reserved connection stalls it. A reserved connection
//    that is busy keeps later queries in a queue of its own and sends the next when the server is
//    ready; a query cancelled meanwhile is "sent" as nothing, so no answer ever comes to send the
//    one after it, and the transaction's ROLLBACK waits forever with its connection. The mend:
//    cancelled queries are skipped there.
// 4. A server error left over from a closed session fails the next session's first statement.
//    An error the server sends while a statement runs is held until the server says it is ready
//    again; a FATAL one (the backend was terminated: `pg_terminate_backend`, a fast shutdown) is
//    followed by the connection closing instead, and the held error outlives it: when the driver
//    reconnects, the new session's first statement fails with "terminating connection due to
//    administrator command". The mend: a closed connection forgets it.
// Plain JavaScript on purpose: npm may run this on an older system Node before the pinned one.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const driver = path.join(root, "node_modules", "postgres");
const mark = "// patched by peergate (src/db/patch-postgres-driver.mjs)";

/** Each mend: the file it is in (per flavour), the driver's text, and the text that replaces it. */
export const mends = [
  {
    name: "write on a closed connection",
    file: "connection.js",
    unpatched: "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n",
    patched:
      "  function nextWrite(fn) {\n" +
      `    if (socket === null) { ${mark}\n` +
      "      chunk = nextWriteTimer = null\n" +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      "      return false\n" +
      "    }\n" +
      "    const x = socket.write(chunk, fn)\n",
  },
  {
    name: "cancelled pipelined query skipped",
    file: "connection.js",
    unpatched:
      "    while (sent.length && (query = sent.shift()) && (query.active = true, query.cancelled))\n",
    patched:
      `    ${mark}: the cancelled query stays current; its answers are on their way\n` +
      "    if (sent.length && (query = sent.shift(), query.active = true, query.cancelled))\n",
  },
  {
    name: "cancelled query stalls a reserved connection",
    file: "index.js",
    unpatched:
      "    c.reserved = () => queue.length\n" +
      "      ? c.execute(queue.shift())\n" +
      "      : move(c, reserved)\n",
    patched:
      `    c.reserved = () => { ${mark}: skip cancelled queries\n` +
      "      let q\n" +
      "      while ((q = queue.shift()) && q.cancelled);\n" +
      "      return q ? c.execute(q) : move(c, reserved)\n" +
      "    }\n",
  },
  {
    name: "server error outlives its session",
    file: "connection.js",
    unpatched: "  async function closed(hadError) {\n    incoming = Buffer.alloc(0)\n",
    patched:
      "  async function closed(hadError) {\n" +
      `    errorResponse = null ${mark}: the error was this session's\n` +
      "    incoming = Buffer.alloc(0)\n",
  },
];

export function patchDriver(dir = driver) {
  const results = [];
  for (const flavour of ["src", "cjs/src", "cf/src"]) {
    for (const mend of mends) {
      const file = path.join(dir, flavour, mend.file);
      if (!existsSync(file)) continue;
      const text = readFileSync(file, "utf8");
      const result = { file, mend: mend.name };
      if (text.includes(mend.patched)) results.push({ ...result, state: "already patched" });
      else if (text.includes(mend.unpatched)) {
        writeFileSync(file, text.replace(mend.unpatched, mend.patched));
        results.push({ ...result, state: "patched" });
      } else {
        results.push({
          ...result,
          state: "not recognised (a newer driver? check the fix is in it)",
        });
      }
    }
  }
  return results;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!existsSync(driver)) process.exit(0);
  for (const { file, mend, state } of patchDriver()) {
    console.log(`postgres driver: ${path.relative(root, file)}: ${mend}: ${state}`);
  }
}
