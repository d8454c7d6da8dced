// `peergate serve` as a real child process, in a process group of its own: resolves once its
// `listening` log line names the URL. Shared by the process tests (test/process) and the fault
// suites (test/faults), which add their admin helpers on top.
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";

export const mainScript = path.resolve(import.meta.dirname, "../../src/main.ts");

export type ServeChild = {
  url: string;
  child: ChildProcess;
  /** Every stdout line (JSON logs) and stderr chunk, for assertions and failure messages. */
  logs: string[];
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  exited: Promise<number | string>;
  /** Sends `signal` to the whole process group. */
  signalGroup(signal: NodeJS.Signals): void;
};

/**
 * Starts `peergate serve` with exactly `env`. `wrap` runs it under another command (e.g. a shell
 * that sets a limit first): `wrap(["node", main, "serve"])` returns the argv to spawn.
 */
export async function spawnServeChild(
  env: Record<string, string>,
  options: { wrap?: (argv: string[]) => string[]; readyMs?: number } = {},
): Promise<ServeChild> {
  const base = [process.execPath, mainScript, "serve"];
  const argv = options.wrap ? options.wrap(base) : base;
  const child = spawn(argv[0] as string, argv.slice(1), {
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const logs: string[] = [];
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no "listening" line:\n${logs.join("\n")}`)),
      options.readyMs ?? 60_000,
    );
    let buffer = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        logs.push(line);
        try {
          const record = JSON.parse(line) as { msg?: string; url?: string };
          if (record.msg === "listening" && record.url) {
            clearTimeout(timer);
            resolve(record.url);
          }
        } catch {
          // not a log line
        }
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => logs.push(chunk.toString()));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}:\n${logs.join("\n")}`));
    });
  });
  return {
    url,
    child,
    logs,
    exited,
    signalGroup(signal) {
      try {
        if (child.pid) process.kill(-child.pid, signal);
      } catch {
        // Already gone.
      }
    },
  };
}
