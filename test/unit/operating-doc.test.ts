// docs/operating.md runs: every ```sh block is executed, in order, with bash against a server this
// test starts, and must exit 0. Blocks that need PostgreSQL, root or the network are ```text.

import { spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";
import { mainScript } from "../support/serve-process.ts";

const docFile = path.resolve(import.meta.dirname, "../../docs/operating.md");

/** The ```sh blocks of a markdown text, in order. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
}

function runBash(script: string, env: Record<string, string>, cwd: string) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], { env, cwd });
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("docs/operating.md", () => {
  let dir: string;
  let server: RunningServer;
  let stub: OpenAiStub;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-doc-"));
    stub = createOpenAiStub();
    const baseUrl = await stub.listen();
    stub.respondWith(() => ({ text: "ok" }));
    const bin = path.join(dir, "bin");
    await mkdir(bin);
    await mkdir(path.join(dir, "home"));
    // `peergate` as the docs call it: the repository's CLI on the pinned Node.
    await writeFile(
      path.join(bin, "peergate"),
      `#!/bin/sh\nexec "${process.execPath}" "${mainScript}" "$@"\n`,
    );
    await chmod(path.join(bin, "peergate"), 0o755);
    const serverEnv = {
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_WORKSPACE: path.join(dir, "workspace"),
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_PORT: "0",
      PEERGATE_LOG_LEVEL: "silent",
      PEERGATE_MODEL: "openai-compatible:local-qwen",
      PEERGATE_MODEL_BASE_URL: baseUrl,
      PEERGATE_SANDBOX: "none",
    };
    server = await startServer(loadConfig(serverEnv, dir), silentLogger);
    env = {
      ...serverEnv,
      PATH: `${bin}:${process.env.PATH ?? ""}`,
      HOME: path.join(dir, "home"),
      PEERGATE_URL: server.url,
    };
  });
  afterAll(async () => {
    await server?.stop();
    await stub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("has shell blocks, and each one runs", async () => {
    const blocks = shellBlocks(await readFile(docFile, "utf8"));
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    for (const block of blocks) {
      const r = await runBash(block, env, dir);
      expect({ block, code: r.code, out: r.out }).toMatchObject({ code: 0 });
    }
    // Each block starts the CLI anew (a Node start each): slow on a loaded machine, not stuck.
  }, 300_000);
});
