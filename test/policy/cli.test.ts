// `peergate ceiling` and `peergate tools`, run through the real dispatcher against policy files
// in a temp directory. No server, no database.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ceilingCommand } from "../../src/cli/ceiling.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { toolsCommand } from "../../src/cli/tools.ts";

const commands = [ceilingCommand, toolsCommand];
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "peergate-cli-"));
  await writeFile(
    path.join(dir, "agent.yaml"),
    `name: peergate\ndescription: d\nversion: "0.1.0"\ntools: [files, context, web, custom]\ndeniedTools: [mkdir]\n`,
  );
  await writeFile(
    path.join(dir, "tools.yaml"),
    `commands:\n  - {name: git_log, description: Show commits., mode: fixed, program: git, risk: read-only, disclosure: internal, egress: false}\n`,
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(argv: string[], policiesDir = dir) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(commands, argv, {
    env: { PEERGATE_POLICIES_DIR: policiesDir },
    cwd: "/",
    io: { out: (t) => out.push(t), err: (t) => err.push(t) },
    signal: new AbortController().signal,
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

function findRow(output: string, tool: string): string[] {
  const line = output.split("\n").find((l) => l.startsWith(`${tool} `));
  if (line === undefined) throw new Error(`no row for ${tool}`);
  return line.split(/\s{2,}/);
}

describe("peergate ceiling", () => {
  it("prints every tool with admitted, reason and sentence", async () => {
    const { code, out } = await run(["ceiling", "--tier", "internal", "--allow", "write_file"]);
    expect(code).toBe(0);
    expect(out.split("\n")[3]).toMatch(/^TOOL\s+ADMITTED\s+REASON\s+WHY$/);
    expect(findRow(out, "ls").slice(0, 3)).toEqual(["ls", "yes", "tier-admits-read-only"]);
    expect(findRow(out, "read_file").slice(0, 3)).toEqual([
      "read_file",
      "no",
      "disclosure-above-tier",
    ]);
    expect(findRow(out, "write_file").slice(0, 3)).toEqual(["write_file", "yes", "named-in-allow"]);
    expect(findRow(out, "mkdir").slice(0, 3)).toEqual(["mkdir", "no", "denied-by-agent"]);
    expect(findRow(out, "git_log").slice(0, 3)).toEqual([
      "git_log",
      "yes",
      "tier-admits-read-only",
    ]);
    expect(findRow(out, "execute_command").slice(0, 3)).toEqual([
      "execute_command",
      "no",
      "not-offered-by-agent",
    ]);
    expect(findRow(out, "web_fetch")[3]).toMatch(/sends data off this machine/);
    expect(out).toContain("execute_write_file (hidden half of write_file, approval path only)");
  });

  it("reports allow entries that name no tool, escaped and explained", async () => {
    const { code, out } = await run([
      "ceiling",
      "--tier",
      "public",
      "--allow",
      "Write_File,glob,wr\u0456te_file",
      "--allow",
      "web_fetch\u200b,__proto__",
    ]);
    expect(code).toBe(0);
    expect(out).toContain("Allow entries that name no tool (5):");
    expect(out).toMatch(/"Write_File"\s+names no tool: looks like write_file/);
    expect(out).toMatch(/"glob"\s+an alias of find/);
    expect(out).toContain('"wr\\u{456}te_file"');
    expect(out).toMatch(/"web_fetch\\u\{200b\}"\s+names no tool: looks like web_fetch/);
    expect(out).toMatch(/"__proto__"\s+names no tool/);
    expect(out).not.toMatch(/[\u0456\u200b]/);
    expect(findRow(out, "write_file")[1]).toBe("no");
  });

  it("explains a revoked tier as refusing everything, and refuses a mistyped one", async () => {
    const revoked = await run(["ceiling", "--tier", "none", "--allow", "write_file"]);
    expect(revoked.code).toBe(0);
    expect(revoked.out).toContain("Admitted (0): nothing");
    expect(findRow(revoked.out, "get_time").slice(0, 3)).toEqual([
      "get_time",
      "no",
      "caller-revoked",
    ]);
    // A typo answered with an all-refused ceiling and exit 0 looked like a real answer.
    const mistyped = await run(["ceiling", "--tier", "Private", "--allow", "write_file"]);
    expect(mistyped.code).toBe(2);
    expect(mistyped.err).toContain("did you mean private?");
    expect(mistyped.out).toBe("");
  });

  it("prints stable JSON with --json", async () => {
    const { code, out } = await run([
      "ceiling",
      "--tier",
      "public",
      "--allow",
      "web_fetch,nope",
      "--json",
    ]);
    expect(code).toBe(0);
    const parsed = JSON.parse(out);
    expect(Object.keys(parsed)).toEqual([
      "caller",
      "inventoryVersion",
      "agentVersion",
      "admitted",
      "decisions",
      "unknownAllowEntries",
      "runNames",
    ]);
    expect(parsed.caller).toEqual({
      name: "(hypothetical)",
      tier: "public",
      allow: ["web_fetch", "nope"],
    });
    expect(parsed.admitted).toEqual(["get_time", "web_fetch"]);
    expect(parsed.decisions).toHaveLength(14);
    expect(parsed.decisions[0]).toEqual({
      tool: "read_file",
      admitted: false,
      reason: "disclosure-above-tier",
      sentence: expect.stringContaining("read_file"),
    });
    expect(parsed.unknownAllowEntries).toEqual([{ entry: "nope", note: "names no tool" }]);
    const again = await run(["ceiling", "--tier", "public", "--allow", "web_fetch,nope", "--json"]);
    expect(again.out).toBe(out);
  });

  it("requires --tier", async () => {
    const { code, err } = await run(["ceiling"]);
    expect(code).toBe(2);
    expect(err).toContain("give a caller name, or --tier");
  });

  it("fails with the file and field when a policy file is bad", async () => {
    const bad = await mkdtemp(path.join(os.tmpdir(), "peergate-cli-bad-"));
    try {
      await writeFile(
        path.join(bad, "agent.yaml"),
        "name: x\ndescription: d\nversion: '1'\ntools: [shel]\n",
      );
      const { code, err } = await run(["ceiling", "--tier", "public"], bad);
      expect(code).toBe(1);
      expect(err).toContain(`${path.join(bad, "agent.yaml")}: tools[0] = "shel"`);
      const missing = await run(["tools"], path.join(bad, "nowhere"));
      expect(missing.code).toBe(1);
      expect(missing.err).toContain(path.join(bad, "nowhere", "agent.yaml"));
    } finally {
      await rm(bad, { recursive: true, force: true });
    }
  });
});

describe("peergate tools", () => {
  it("prints the inventory as an aligned table", async () => {
    const { code, out } = await run(["tools"]);
    expect(code).toBe(0);
    const lines = out.split("\n");
    expect(lines[0]).toMatch(
      /^TOOL\s+CATEGORY\s+RISK\s+DISCLOSURE\s+EGRESS\s+ALIASES\s+HIDDEN HALF\s+NOTES$/,
    );
    const column = (lines[0] ?? "").indexOf("RISK");
    for (const line of lines.slice(1, 15)) expect(line.slice(column, column + 1)).toMatch(/[a-z]/);
    expect(findRow(out, "find")).toEqual([
      "find",
      "files",
      "read-only",
      "internal",
      "no",
      "glob",
      "-",
    ]);
    expect(findRow(out, "execute_command")).toEqual([
      "execute_command",
      "shell",
      "unknown",
      "private",
      "yes",
      "-",
      "execute_execute_command",
    ]);
    expect(findRow(out, "manage_memory").at(-1)).toMatch(/persists operator state/);
    expect(findRow(out, "git_log").slice(0, 5)).toEqual([
      "git_log",
      "custom",
      "read-only",
      "internal",
      "no",
    ]);
    expect(out).toMatch(/14 tools \(inventory [0-9a-f]{12}\)/);
  });

  it("prints stable JSON with --json", async () => {
    const { code, out } = await run(["tools", "--json"]);
    expect(code).toBe(0);
    const parsed = JSON.parse(out);
    expect(parsed.inventoryVersion).toMatch(/^[0-9a-f]{64}$/);
    expect(parsed.tools).toHaveLength(14);
    expect(parsed.tools[2]).toEqual({
      name: "find",
      category: "files",
      risk: "read-only",
      disclosure: "internal",
      egress: false,
      aliases: ["glob"],
      executeHalf: null,
      needsPerson: false,
      persistsOperatorState: false,
      description: expect.any(String),
    });
  });
});

describe("registration", () => {
  it("both verbs are in the command list", async () => {
    const { commands: all } = await import("../../src/cli/commands.ts");
    const loaded = await Promise.all(all.map((c) => ("load" in c ? c.load() : c)));
    expect(loaded).toContain(ceilingCommand);
    expect(loaded).toContain(toolsCommand);
  });
});
