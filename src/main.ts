#!/usr/bin/env node
// The `peergate` executable and the composition root's entry: the only module that reads
// process.env and process.argv (bin/peergate.mjs reads only the compile cache's own variables).
// Everything below it takes them as arguments.
//
// It loads nothing of its own before Node's compile cache is on (src/cli/compile-cache.mjs, plain
// JavaScript): every module loaded after it — the CLI, and for `serve` the whole server — is read
// from the cache instead of being type-stripped and compiled again on every command.
// bin/peergate.mjs, the executable, switches it on before this file is compiled.
import { useCompileCache } from "./cli/compile-cache.mjs";

// Everything peergate creates — secrets, the embedded database, the control socket, files tools
// write — is the operator's alone unless an operator widens it by hand.
process.umask(0o077);
useCompileCache(process.env);

const argv = process.argv.slice(2);
const serving = argv[0] === "serve";

// A server starts processes: a descriptor it inherited open across exec (a supervisor's pipe, a
// shell's redirection) would reach every one of them, inside the sandbox too. Closed before the
// server opens anything (src/tools/inherited-descriptors.ts).
if (serving) (await import("./tools/inherited-descriptors.ts")).closeInheritedDescriptors();

const controller = new AbortController();
let signals = 0;
// A second signal means the operator does not want to wait for a graceful stop: every command
// still running goes with the server, whatever the sandbox (under `none` nothing else would take
// them; under bwrap this is at once rather than when bwrap notices). Only a server runs commands;
// it exits once the sandboxes' reports still in their pipes are read (at most 2 s; later signals
// do not cut that short).
const forceExit = serving
  ? (await import("./tools/run-process.ts")).exitKillingCommands
  : (code: number) => process.exit(code);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    signals += 1;
    if (signals > 1) {
      if (signals === 2) forceExit(130);
      return;
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
