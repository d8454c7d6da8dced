// A user started `npm start` with PEERGATE_PORT=8081 and the CLI in another terminal could not
// find it (it tried 8080). `peergate serve` now records where it listens in the data directory;
// the CLI on that machine finds it without PEERGATE_URL, and the record goes when the server stops.
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { serverUrlFile } from "../../src/cli/server-url.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { eventually, GiveUpError } from "../support/eventually.ts";

describe("the CLI finds a server on another port (pglite)", () => {
  let dir: string;
  let dataDir: string;
  let stopServe: AbortController;
  let served: Promise<number>;
  const serveOut: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-server-url-"));
    dataDir = path.join(dir, "data");
    stopServe = new AbortController();
    served = runCli(commands, ["serve"], {
      env: {
        PEERGATE_DATA_DIR: dataDir,
        PEERGATE_POLICIES_DIR: repoPoliciesDir,
        PEERGATE_PORT: "0",
        PEERGATE_LOG_LEVEL: "warn",
      },
      cwd: dir,
      io: { out: (t) => serveOut.push(t), err: (t) => serveOut.push(t) },
      signal: stopServe.signal,
    });
    // A fresh embedded database is created first: on a loaded machine that alone can take
    // longer than a test's own 30 s, so the wait for the server is here.
    let exited: number | undefined;
    void served.then((code) => {
      exited = code;
    });
    await eventually(
      "the server to record its URL",
      async () => {
        if (exited !== undefined) {
          throw new GiveUpError(`serve exited with ${exited}: ${serveOut.join("\n")}`);
        }
        return (await readFile(path.join(dataDir, serverUrlFile), "utf8")) || undefined;
      },
      { withinMs: 110_000 },
    );
  }, 120_000);

  afterAll(async () => {
    stopServe.abort();
    await served;
    await rm(dir, { recursive: true, force: true });
  });

  it("reaches the server with neither PEERGATE_URL nor PEERGATE_PORT, and forgets it at stop", async () => {
    const file = path.join(dataDir, serverUrlFile);
    const recorded = (
      await eventually(
        "the server URL file",
        async () => (await readFile(file, "utf8")) || undefined,
      )
    ).trim();
    expect(recorded).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(recorded).not.toBe("http://127.0.0.1:8080");
    expect((await stat(file)).mode & 0o077).toBe(0);

    // Another terminal: the data directory only (the admin token is read from it too).
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(commands, ["callers", "list", "--json"], {
      env: { PEERGATE_DATA_DIR: dataDir, PEERGATE_POLICIES_DIR: repoPoliciesDir },
      cwd: dir,
      io: { out: (t) => out.push(t), err: (t) => err.push(t) },
      signal: new AbortController().signal,
    });
    expect({ code, err: err.join("\n") }).toEqual({ code: 0, err: "" });
    expect(JSON.parse(out.join("\n"))).toHaveProperty("callers");

    stopServe.abort();
    expect(await served).toBe(0);
    await expect(stat(file)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
