// docs/operating.md runs: every ```sh block is executed, in order, with bash against a server this
// test starts, and must exit 0. Blocks that need PostgreSQL, root or the network are ```text.

import { execFileSync, spawn } from "node:child_process";
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

const hasSystemdAnalyze = (() => {
  try {
    execFileSync("systemd-analyze", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    console.warn("[operating-doc] skipped the unit's rating: systemd-analyze is not installed");
    return false;
  }
})();

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
    // `curl … | grep -q` fails now and then under pipefail: grep stops reading at the first match
    // and curl's next write hits a closed pipe (exit 23). The blocks read the whole answer.
    for (const block of blocks) expect(block).not.toMatch(/\|\s*grep\s+-\w*q/);
    for (const block of blocks) {
      const r = await runBash(block, env, dir);
      expect({ block, code: r.code, out: r.out }).toMatchObject({ code: 0 });
    }
    // Each block starts the CLI anew (a Node start each): slow on a loaded machine, not stuck.
  }, 300_000);
});

describe("docs/peergate.service", () => {
  it("starts this repository's server on its pinned Node, and reloads with SIGHUP", async () => {
    const unit = await readFile(
      path.resolve(import.meta.dirname, "../../docs/peergate.service"),
      "utf8",
    );
    const keys = new Map<string, string>();
    let section = "";
    for (const line of unit.split("\n")) {
      const header = /^\[(\w+)\]$/.exec(line);
      if (header) section = header[1] as string;
      const entry = /^(\w+)=(.*)$/.exec(line);
      if (entry) keys.set(`${section}.${entry[1]}`, entry[2] as string);
    }
    const workdir = keys.get("Service.WorkingDirectory") as string;
    const [node, script, verb] = (keys.get("Service.ExecStart") ?? "").split(" ");
    // The checkout in WorkingDirectory: its pinned Node, its entry point, the serve command.
    expect(node).toBe(`${workdir}/node_modules/.bin/node`);
    const repo = path.resolve(import.meta.dirname, "../..");
    await expect(
      readFile(path.join(repo, path.relative(workdir, node as string))),
    ).resolves.toBeDefined();
    expect(script).toBe(mainScript.slice(repo.length + 1));
    expect(verb).toBe("serve");
    expect(keys.get("Service.ExecReload")).toBe("/bin/kill -HUP $MAINPID");
    // Writable: the data directory the doc puts in the env file, and the default workspace.
    expect(keys.get("Service.ReadWritePaths")?.split(" ")).toEqual([
      "/var/lib/peergate",
      `${workdir}/workspace`,
    ]);
    const doc = await readFile(docFile, "utf8");
    expect(doc).toContain("`PEERGATE_DATA_DIR=/var/lib/peergate`");
    expect(keys.get("Service.UMask")).toBe("0077");
    expect(keys.get("Install.WantedBy")).toBe("multi-user.target");
    // Ready when it serves (src/cli/service-manager.ts sends READY=1 through systemd-notify).
    expect(keys.get("Service.Type")).toBe("notify");
    expect(keys.get("Service.NotifyAccess")).toBe("all");
  });

  it.skipIf(!hasSystemdAnalyze)(
    "is rated below 3.0 by `systemd-analyze security`, and the sandbox drop-in keeps it low",
    async () => {
      const unitDir = await mkdtemp(path.join(tmpdir(), "peergate-unit-"));
      try {
        const docs = path.resolve(import.meta.dirname, "../../docs");
        await writeFile(
          path.join(unitDir, "peergate.service"),
          await readFile(path.join(docs, "peergate.service")),
        );
        const rate = async () => {
          const out = await new Promise<string>((resolve) => {
            const child = spawn(
              "systemd-analyze",
              ["security", "--offline=true", "--no-pager", "peergate.service"],
              { cwd: unitDir },
            );
            let text = "";
            child.stdout.on("data", (c: Buffer) => {
              text += c.toString();
            });
            child.on("close", () => resolve(text));
          });
          const score = /Overall exposure level for peergate\.service: ([\d.]+)/.exec(out)?.[1];
          if (score === undefined) throw new Error(`no rating in:\n${out}`);
          return Number(score);
        };
        expect(await rate()).toBeLessThan(3.0);
        await mkdir(path.join(unitDir, "peergate.service.d"));
        await writeFile(
          path.join(unitDir, "peergate.service.d", "sandbox.conf"),
          await readFile(path.join(docs, "peergate.service.d", "sandbox.conf")),
        );
        const withSandbox = await rate();
        // The namespaces bubblewrap makes and the whole /proc it needs cost what they cost
        // (docs/operating.md gives the figure); nothing else is relaxed.
        expect(withSandbox).toBeGreaterThan(1.4);
        expect(withSandbox).toBeLessThan(3.5);
      } finally {
        await rm(unitDir, { recursive: true, force: true });
      }
    },
  );
});
