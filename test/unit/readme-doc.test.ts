// README.md runs. In a scratch copy of this checkout (package.json, bin, src, drizzle and node_modules
// linked, policies copied) the test does what the quick start says: adds the ```yaml price line
// under `models:` in policies/models.yaml, runs the first ```sh block (its `export` lines as they
// are but for the model's URL, which points at an OpenAI-compatible stub playing the local model,
// and port 0; then a real `npm start`), then every other ```sh block in order with bash in that
// directory (each must exit 0), and the ```js snippet with the pinned Node against the same
// server. It also holds the README to the code: every PEERGATE_* variable src/ reads is in a
// table with its real default, every command in the CLI table exists, and every relative link in
// README.md and docs/ resolves to a file in the repository.
//
// The ```python snippet (the a2a-sdk client) cannot run here: there is no PyPI access on this
// machine, so a2a-sdk is not installed. It is only parsed by python3 (when present), and the
// request it makes is the ```sh A2A 1.0 call above, which does run.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import {
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePriceTable } from "../../src/runs/prices.ts";
import { defaultBudgets } from "../../src/services/caller-input.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";
import { type ServeChild, spawnServeChild } from "../support/serve-process.ts";
import { shippedPoliciesDir } from "../support/shipped-policies.ts";

const repo = path.resolve(import.meta.dirname, "../..");
const readmeFile = path.join(repo, "README.md");

/** The blocks of one fence language, in order. */
function blocks(markdown: string, language: string): string[] {
  const fence = new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, "gm");
  return [...markdown.matchAll(fence)].map((m) => m[1] ?? "");
}

function run(
  argv: string[],
  env: Record<string, string>,
  cwd: string,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1), { env, cwd });
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

const answer = "Hello from the local model.";

describe("README.md", () => {
  let readme: string;
  let dir: string;
  let clone: string;
  let stub: OpenAiStub;
  let server: ServeChild | undefined;
  let shellEnv: Record<string, string>;
  let model: string;
  beforeAll(async () => {
    readme = await readFile(readmeFile, "utf8");
    dir = await mkdtemp(path.join(tmpdir(), "peergate-readme-"));
    clone = path.join(dir, "peergate");
    await mkdir(clone);
    for (const name of ["package.json", "bin", "src", "drizzle", "node_modules"]) {
      await symlink(path.join(repo, name), path.join(clone, name));
    }
    await cp(shippedPoliciesDir, path.join(clone, "policies"), { recursive: true });
    await mkdir(path.join(dir, "home"));

    // The price line, added under `models:` as the quick start says.
    const [priceLine] = blocks(readme, "yaml");
    expect(priceLine).toBeDefined();
    const modelsFile = path.join(clone, "policies/models.yaml");
    const before = await readFile(modelsFile, "utf8");
    expect(before).toMatch(/^models:\n/m);
    await writeFile(modelsFile, before.replace(/^models:\n/m, `models:\n${priceLine}`));

    // The start block: `export NAME=value` lines, then `npm start`.
    const [startBlock] = blocks(readme, "sh");
    const lines = (startBlock ?? "")
      .split("\n")
      .map((l) => l.replace(/\s+#.*$/, "").trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    const exports = Object.fromEntries(
      lines
        .filter((l) => l.startsWith("export "))
        .map((l) => /^export ([A-Z_]+)=(\S+)$/.exec(l)?.slice(1) ?? ["?", l]),
    );
    expect(lines.filter((l) => !l.startsWith("export "))).toEqual(["npm start"]);
    expect(Object.keys(exports).sort()).toEqual(["PEERGATE_MODEL", "PEERGATE_MODEL_BASE_URL"]);
    model = exports.PEERGATE_MODEL as string;
    expect(exports.PEERGATE_MODEL_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);

    stub = createOpenAiStub();
    const stubUrl = await stub.listen();
    stub.respondWith(() => ({ text: answer }));
    const base = { PATH: process.env.PATH ?? "", HOME: path.join(dir, "home") };
    server = await spawnServeChild(
      {
        ...base,
        ...exports,
        // The stub plays the local server the README points at; port 0 instead of 8080.
        PEERGATE_MODEL_BASE_URL: stubUrl,
        PEERGATE_PORT: "0",
      },
      // A loaded machine starts npm, then Node, then migrates the embedded database: slow, not stuck.
      { wrap: () => ["sh", "-c", `cd "${clone}" && exec npm start`], readyMs: 240_000 },
    );
    shellEnv = base;
  }, 300_000);
  afterAll(async () => {
    if (server) {
      server.signalGroup("SIGTERM");
      await server.exited;
    }
    await stub?.close();
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  }, 120_000);

  it("prices the quick start's model at 0, which the shipped models.yaml does not", async () => {
    const priced = parsePriceTable(
      await readFile(path.join(clone, "policies/models.yaml"), "utf8"),
      "models.yaml",
    );
    expect(priced.models.get(model)).toEqual({
      inputUsdPerMillionTokens: 0,
      outputUsdPerMillionTokens: 0,
    });
    const shipped = parsePriceTable(
      await readFile(path.join(shippedPoliciesDir, "models.yaml"), "utf8"),
      "models.yaml",
    );
    expect(shipped.models.has(model)).toBe(false);
    expect(shipped.fallback).toBeUndefined();
    // What the README says an unpriced model means for the default budgets.
    expect(readme).toContain(
      `($${defaultBudgets.costUsd} a run, $${defaultBudgets.daily?.costUsd} a day)`,
    );
  });

  it("runs every other sh block in order, and the A2A 1.0 call gets the model's answer", async () => {
    const shell = blocks(readme, "sh").slice(1);
    expect(shell.length).toBeGreaterThanOrEqual(3);
    const outputs: string[] = [];
    for (const block of shell) {
      const r = await run(["bash", "-euo", "pipefail", "-c", block], shellEnv, clone);
      expect({ block, code: r.code, out: r.out }).toMatchObject({ code: 0 });
      outputs.push(r.out);
    }
    // The quick start's curl: the completed task with the stub's reply as the answer.
    const first = outputs[0] ?? "";
    expect(first).toContain('"TASK_STATE_COMPLETED"');
    expect(first).toContain(answer);
    // The files holding a token are owner-only, as the README says.
    for (const file of [
      path.join(clone, "first-peer.json"),
      path.join(dir, "home/.peergate-operator-token"),
    ]) {
      expect({ file, mode: (await stat(file)).mode & 0o777 }).toEqual({ file, mode: 0o600 });
    }
    // The model was asked, under the name the README configured.
    expect(stub.requests.some((r) => `openai-compatible:${r.body.model}` === model)).toBe(true);
  }, 300_000);

  it("runs the a2a-js snippet against the same server", async () => {
    const [snippet] = blocks(readme, "js");
    expect(snippet).toBeDefined();
    await writeFile(path.join(clone, "client.mjs"), snippet as string);
    // TOKEN and URL as the quick start reads them.
    const saved = await readFile(path.join(clone, "first-peer.json"), "utf8");
    const token = /"secret":"([^"]*)"/.exec(saved)?.[1];
    expect(token).toMatch(/^pg_/);
    const url = (await readFile(path.join(clone, ".peergate/server-url"), "utf8")).trim();
    const r = await run(
      [process.execPath, "client.mjs"],
      { ...shellEnv, PEERGATE_URL: url, PEERGATE_TOKEN: token as string },
      clone,
    );
    expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: `completed: ${answer}\n` });
  }, 120_000);

  it("has a Python a2a-sdk snippet that parses (a2a-sdk itself is not installable here)", async () => {
    const [snippet] = blocks(readme, "python");
    expect(snippet).toContain("from a2a.client import");
    const file = path.join(dir, "client.py");
    await writeFile(file, snippet as string);
    const found = await run(["sh", "-c", "command -v python3"], shellEnv, dir);
    if (found.code !== 0) return; // no Python on this machine: nothing more to check
    const r = await run(
      ["python3", "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", file],
      shellEnv,
      dir,
    );
    expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: "" });
  });

  it("lists in its tables every variable the code reads, each with its real default", async () => {
    const sources = await readSources(path.join(repo, "src"));
    const names = new Set<string>(["DATABASE_URL"]);
    for (const text of sources.values()) {
      for (const m of text.matchAll(/\bPEERGATE_[A-Z][A-Z_]*[A-Z]\b/g)) names.add(m[0]);
    }
    const rows = new Map<string, string>();
    for (const m of readme.matchAll(/^\| `([A-Z_]+)` \| ([^|]*) \|/gm)) {
      rows.set(m[1] as string, (m[2] as string).trim());
    }
    expect([...names].filter((n) => !rows.has(n)).sort()).toEqual([]);

    // Defaults: `.default(x)` in src/config.ts's schema, `env.NAME ?? x` anywhere else.
    const defaults = new Map<string, string>();
    const config = sources.get("config.ts") ?? "";
    const schema = config.slice(
      config.indexOf("const envSchema"),
      config.indexOf("export type Config"),
    );
    for (const chunk of schema.split(/^ {2}(?=[A-Z_]+:)/m).slice(1)) {
      const name = /^([A-Z_]+):/.exec(chunk)?.[1];
      const value = [...chunk.matchAll(/\.default\(("[^"]*"|[0-9_]+)\)/g)].at(-1)?.[1];
      if (name && value && value !== '""') defaults.set(name, value.replace(/^"|"$/g, ""));
    }
    for (const text of sources.values()) {
      for (const m of text.matchAll(/env\.(PEERGATE_[A-Z_]+) \?\? ([0-9_]+)/g)) {
        defaults.set(m[1] as string, m[2] as string);
      }
    }
    expect(defaults.size).toBeGreaterThanOrEqual(10);
    for (const [name, value] of defaults) {
      expect({ name, cell: rows.get(name) }).toEqual({
        name,
        cell: `\`${value.replaceAll("_", "")}\``,
      });
    }
  });

  it("names only commands the CLI has", async () => {
    const help = await run(
      [process.execPath, path.join(repo, "src/main.ts"), "--help"],
      shellEnv,
      dir,
    );
    expect(help.code).toBe(0);
    const table = readme.slice(readme.indexOf("| command | what it does |"));
    const commands = [...table.matchAll(/^\| `peergate ([a-z-]+)(?: ([a-z|\\-]+))?/gm)];
    expect(commands.length).toBeGreaterThanOrEqual(8);
    for (const [, verb, subs] of commands) {
      for (const sub of (subs ?? "").split("\\|").filter((s) => /^[a-z-]+$/.test(s))) {
        expect(help.out).toContain(`peergate ${verb} ${sub}`);
      }
      expect(help.out).toContain(`peergate ${verb}`);
    }
  });
});

describe("links in README.md and docs/", () => {
  it("resolve to files in the repository, and none leaves it", async () => {
    const files = [
      "README.md",
      ...(await readdir(path.join(repo, "docs")))
        .filter((f) => f.endsWith(".md"))
        .map((f) => `docs/${f}`),
    ];
    const broken: string[] = [];
    for (const file of files) {
      const text = await readFile(path.join(repo, file), "utf8");
      if (/\.\.\/shared|\/work\/shared/.test(text)) broken.push(`${file}: points to ../shared`);
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = (m[1] as string).replace(/#.*$/, "");
        if (target === "" || /^[a-z]+:/.test(target)) continue;
        const resolved = path.resolve(repo, path.dirname(file), target);
        if (!resolved.startsWith(`${repo}/`) || !existsSync(resolved)) {
          broken.push(`${file}: ${m[1]}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

/** Every .ts file under `root`, by path relative to it. */
async function readSources(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts")) continue;
    const full = path.join(entry.parentPath, entry.name);
    out.set(path.relative(root, full), await readFile(full, "utf8"));
  }
  return out;
}
