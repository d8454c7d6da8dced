// The commands that talk to a running server start in a fraction of a second only if they load
// none of the server: each is run as a real process with a hook recording every module it loads,
// against a stand-in admin API, and none of the server-only libraries or rooms may appear.
// (What loading the whole server costs is the bench's to say: bench/cli.ts.)
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mainScript } from "../support/serve-process.ts";

const hook = path.resolve(import.meta.dirname, "record-modules.mjs");
const srcDir = path.resolve(import.meta.dirname, "../../src");

/** Libraries only the server needs. */
const serverLibraries = [
  "hono",
  "@hono",
  "@asteasolutions",
  "drizzle-orm",
  "@electric-sql",
  "postgres",
  "ai",
  "@ai-sdk",
  "@a2a-js",
  "@modelcontextprotocol",
  "@grpc",
  "web-tree-sitter",
  "tree-sitter-bash",
  "prom-client",
  "jose",
];

/** Rooms of src/ only the server (or a command that opens the database) needs. */
const serverRooms = [
  "db/",
  "services/",
  "runs/",
  "gate/",
  "a2a/",
  "tools/",
  "sandbox/",
  "shell/",
  "notify/",
  "server.ts",
  "core.ts",
  "metrics.ts",
  "load-policies.ts",
  "policy-reload.ts",
  "reactions.ts",
];

/** What of `urls` belongs to the server. */
function serverOnly(urls: readonly string[]): string[] {
  return urls.filter((url) => {
    const library = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
    if (library) return serverLibraries.some((l) => library === l || library.startsWith(`${l}/`));
    if (!url.startsWith(`file://${srcDir}/`)) return false;
    const rel = url.slice(`file://${srcDir}/`.length);
    // Plain data: the admin API's methods and paths, and the sandbox kinds config.ts names.
    if (rel === "http/routes/admin-api-paths.ts" || rel === "sandbox/types.ts") return false;
    return rel.startsWith("http/") || serverRooms.some((room) => rel.startsWith(room));
  });
}

let dir: string;
let api: Server;
let apiUrl: string;
const requests: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "peergate-client-imports-"));
  // A stand-in admin API: every listing empty.
  api = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ callers: [], runs: [], events: [], next: null }));
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => api.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

async function loadedBy(
  name: string,
  argv: string[],
): Promise<{ code: number | null; out: string; urls: string[] }> {
  const record = path.join(dir, `${name}.txt`);
  const child = spawn(process.execPath, ["--import", hook, mainScript, ...argv], {
    env: {
      PATH: process.env.PATH ?? "",
      // Its compile cache, if any, stays in the test's directory.
      TMPDIR: dir,
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_URL: apiUrl,
      PEERGATE_ADMIN_TOKEN: "stand-in-admin-token-of-32-characters-or-more",
      PEERGATE_TEST_RECORD_MODULES: record,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  const urls = (await readFile(record, "utf8")).split("\n").filter((l) => l !== "");
  return { code, out, urls };
}

describe("commands that talk to a running server load none of the server", () => {
  const cases: [string, string[]][] = [
    ["version", ["--version"]],
    ["help", ["--help"]],
    ["callers-help", ["callers", "--help"]],
    ["callers-list", ["callers", "list"]],
    ["callers-show", ["callers", "show", "someone", "--json"]],
    ["runs-list", ["runs", "list"]],
    ["audit", ["audit"]],
  ];
  for (const [name, argv] of cases) {
    it(`peergate ${argv.join(" ")}`, async () => {
      const { code, out, urls } = await loadedBy(name, argv);
      // It ran (the hook saw main.ts), and it did its work.
      expect(urls).toContain(`file://${mainScript}`);
      expect({ code, out }).toMatchObject({ code: 0 });
      expect(serverOnly(urls)).toEqual([]);
    });
  }

  it("the check would catch the server (serve --help loads no server, serve would)", () => {
    expect(
      serverOnly([
        `file://${srcDir}/server.ts`,
        `file://${srcDir}/http/routes/admin-api.ts`,
        "file:///x/node_modules/drizzle-orm/index.js",
        "file:///x/node_modules/@hono/zod-openapi/dist/index.js",
      ]),
    ).toHaveLength(4);
    expect(
      serverOnly([
        `file://${srcDir}/cli/callers-list.ts`,
        `file://${srcDir}/http/routes/admin-api-paths.ts`,
        "file:///x/node_modules/zod/index.js",
      ]),
    ).toEqual([]);
  });
});
