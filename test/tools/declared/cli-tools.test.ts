// `peergate tools` through the real dispatcher: each declared command tool's mode, contracts and
// declaration digest, in the table and in --json; a bad declaration names file, tool, field, value.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../../src/cli/run-cli.ts";
import { toolsCommand } from "../../../src/cli/tools.ts";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "peergate-cli-declared-"));
  await mkdir(dir, { recursive: true });
  await writeFile(
    path.join(dir, "agent.yaml"),
    `name: p\ndescription: d\nversion: "0.1.0"\ntools: [custom]\ndeniedTools: []\n`,
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(argv: string[], toolsYaml: string) {
  await writeFile(path.join(dir, "tools.yaml"), toolsYaml);
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli([toolsCommand], argv, {
    env: { PEERGATE_POLICIES_DIR: dir },
    cwd: "/",
    io: { out: (t) => out.push(t), err: (t) => err.push(t) },
    signal: new AbortController().signal,
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

const yaml = `commands:
  - {name: chained, description: d, mode: chain, programs: [git], stdin: optional, result: structured, risk: high-risk}
  - {name: checks, description: d, mode: script, script: s.sh, interpreter: /bin/sh, arguments: {mode: none}, nonzero: error, risk: low-risk}
`;

describe("peergate tools and declared tools", () => {
  it("shows each declared tool's mode, contract and digest", async () => {
    const { code, out } = await run(["tools"], yaml);
    expect(code).toBe(0);
    const row = (name: string) => out.split("\n").findLast((l) => l.startsWith(`${name} `)) ?? "";
    expect(out).toMatch(/^DECLARED TOOL\s+MODE\s+CONTRACT\s+DECLARATION SHA-256$/m);
    expect(row("chained")).toMatch(
      /chain\s+arguments optional, stdin optional, rationale optional, result structured, nonzero result, stream finalized\s+[0-9a-f]{16}$/,
    );
    expect(row("checks")).toMatch(/script\s+arguments none, .*nonzero error/);
    const json = JSON.parse((await run(["tools", "--json"], yaml)).out);
    expect(json.declared.map((d: { name: string; mode: string }) => [d.name, d.mode])).toEqual([
      ["chained", "chain"],
      ["checks", "script"],
    ]);
    expect(json.declared[0].declarationSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("stops on a declaration error naming the file, the tool's place, the field, the value and the fix", async () => {
    const { code, err } = await run(
      ["tools"],
      "commands:\n  - {name: r, description: d, mode: raw, program: sh}\n  - {name: c, description: d, mode: chain, stdin: sometimes}\n",
    );
    expect(code).not.toBe(0);
    expect(err).toContain(
      `${path.join(dir, "tools.yaml")}: commands[0].mode = "raw": expected mode: fixed or structured, or chain or script (there is no raw mode)`,
    );
    expect(err).toContain(
      `${path.join(dir, "tools.yaml")}: commands[1].stdin = "sometimes": expected none, optional or required`,
    );
  });
});
