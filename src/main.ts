#!/usr/bin/env node
// The `peergate` executable and the composition root's entry: the only module that reads
// process.env and process.argv. Everything below it takes them as arguments.
//
// It imports nothing of its own statically: Node's compile cache is switched on first, so that
// every module loaded after it (the CLI, and for `serve` the whole server) is read from the cache
// instead of being type-stripped and compiled again on every command.
import { lstatSync, mkdirSync } from "node:fs";
import { constants, enableCompileCache } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";

// Everything peergate creates — secrets, the embedded database, the control socket, files tools
// write — is the operator's alone unless an operator widens it by hand.
process.umask(0o077);

/**
 * Node's compile cache in `<temp dir>/peergate-compile-cache-<uid>`, used only while that
 * directory is this user's own, owner-only, and not a link, in a temp directory others cannot
 * swap it out of: what is cached there is code this process runs. Otherwise (or when
 * NODE_DISABLE_COMPILE_CACHE is set) the CLI runs uncached, only slower. NODE_COMPILE_CACHE, if
 * set, is Node's own and wins.
 */
function useCompileCache(): void {
  if (process.env.NODE_DISABLE_COMPILE_CACHE || process.env.NODE_COMPILE_CACHE) return;
  const uid = process.getuid?.();
  if (uid === undefined) return;
  try {
    const parent = tmpdir();
    const dir = path.join(parent, `peergate-compile-cache-${uid}`);
    mkdirSync(dir, { mode: 0o700, recursive: true });
    const above = lstatSync(parent);
    const own = lstatSync(dir);
    const othersMayWrite = (above.mode & 0o022) !== 0 && (above.mode & 0o1000) === 0;
    const ownedSafely =
      own.isDirectory() && own.uid === uid && (own.mode & 0o077) === 0 && !othersMayWrite;
    if (!ownedSafely) return;
    const result = enableCompileCache(dir);
    if (result.status === constants.compileCacheStatus.FAILED) return;
  } catch {
    // No cache: the same commands, uncached.
  }
}
useCompileCache();

const argv = process.argv.slice(2);
const serving = argv[0] === "serve";

const controller = new AbortController();
let signals = 0;
// A second signal means the operator does not want to wait for a graceful stop: every command
// still running goes with the server, whatever the sandbox (under `none` nothing else would take
// them; under bwrap this is at once rather than when bwrap notices). Only a server runs commands.
const killCommandGroups = serving
  ? (await import("./tools/run-process.ts")).killCommandGroups
  : () => {};
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    signals += 1;
    if (signals > 1) {
      killCommandGroups();
      process.exit(130);
    }
    controller.abort(signal);
  });
}

// A reader that stops reading (`peergate audit | head`) closes the pipe: that ends a command's
// output, not an error. A server keeps serving and drops what it can no longer print.
const closed = { stdout: false, stderr: false };
for (const name of ["stdout", "stderr"] as const) {
  process[name].on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    closed[name] = true;
    if (!serving) process.exit(process.exitCode ?? 0);
  });
}

const { commands } = await import("./cli/commands.ts");
const { runCli } = await import("./cli/run-cli.ts");
const code = await runCli(commands, argv, {
  env: process.env,
  cwd: process.cwd(),
  io: {
    out: (text) => void (closed.stdout || process.stdout.write(`${text}\n`)),
    err: (text) => void (closed.stderr || process.stderr.write(`${text}\n`)),
  },
  signal: controller.signal,
});
process.exitCode = code;
