// A first start on a new embedded database says what it is doing as it does it: one
// "starting: …" line as each slow step begins, in the order the steps run, before "listening";
// a restart opens the database it made and applies nothing. Order only, never how long.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoPoliciesDir } from "../support/app.ts";
import { type ServeChild, spawnServeChild } from "../support/serve-process.ts";

/** The `msg` of every JSON log line, in order. */
function messages(started: ServeChild): string[] {
  return started.logs.flatMap((line) => {
    try {
      return [String((JSON.parse(line) as { msg?: unknown }).msg)];
    } catch {
      return [];
    }
  });
}

async function stop(started: ServeChild): Promise<void> {
  started.child.kill("SIGTERM");
  await started.exited;
}

describe("an embedded first start", () => {
  let dir: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-first-start-"));
    env = {
      PATH: process.env.PATH ?? "",
      TMPDIR: dir,
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_WORKSPACE: path.join(dir, "workspace"),
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_PORT: "0",
      PEERGATE_SANDBOX: "none",
    };
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("logs each step as it begins, then opens what it made on a restart", async () => {
    // Creating the embedded database is minutes of CPU on a loaded machine: wait for the line.
    const first = await spawnServeChild(env, { readyMs: 600_000 });
    await stop(first);
    const steps = messages(first).filter((m) => m.startsWith("starting: ") || m === "listening");
    expect(steps).toEqual([
      "starting: loading the server",
      "starting: loading policies",
      "starting: opening the data directory",
      "starting: creating the embedded database (first start only; it takes a while)",
      expect.stringMatching(/^starting: applying (\d+) of \1 migrations$/),
      "starting: probing the sandbox",
      "starting: loading tools",
      "listening",
    ]);

    const again = await spawnServeChild(env, { readyMs: 600_000 });
    await stop(again);
    const restart = messages(again).filter((m) => m.startsWith("starting: "));
    expect(restart).toContain("starting: opening the embedded database");
    expect(restart.filter((m) => /creating|applying/.test(m))).toEqual([]);
  }, 1_500_000);
});
