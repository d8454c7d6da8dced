// Each stage of a chain is keyed on its own and matched against the caller's allowlist by that
// key, attacked through the real tool runtime: an allowlisted first stage never carries the rest,
// quoting does not change which program a stage runs (or its key), look-alike and escaped names
// are other programs, and what a chain cannot express (substitution, assignments, redirections,
// here-documents, newlines) is refused before any stage runs or asks.
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { parseAllowEntry } from "../../../src/shell/command-key.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type { StageRequest, ToolResult, ToolRuntime } from "../../../src/tools/types.ts";
import {
  baseEnv,
  buildPolicies,
  createSandbox,
  expectFailure,
  makeContext,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let runtime: ToolRuntime | undefined;

beforeEach(async () => {
  sandbox = await createSandbox();
  const bin = path.join(sandbox.base, "bin");
  await mkdir(bin);
  // Each program leaves a file named after itself and its first argument: what ran is visible.
  for (const name of ["git", "mark", "sh", "print-args"]) {
    await writeFile(path.join(bin, name), `#!/bin/sh\n: > "${name}-$1.ran"\n`);
    await chmod(path.join(bin, name), 0o755);
  }
  const yaml = `commands:
  - name: chain
    description: Run a chain.
    mode: chain
    programs: [git, mark, sh, print-args]
    runsCode: true
`;
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(parseToolsPolicy(yaml, "tools.yaml", builtinDescriptors)),
    env: baseEnv({ PATH: `${bin}:/usr/bin:/bin` }),
  });
});
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await sandbox.cleanup();
});

const entries = ["git status", "git log", "print-args"].map((t) => {
  const parsed = parseAllowEntry(t);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.entry;
});

/** Runs `command` with the allowlist above; every uncovered stage is asked and turned down. */
async function run(command: string): Promise<{ result: ToolResult; asked: string[] }> {
  const tool = runtime?.tools.get("chain");
  if (tool === undefined) throw new Error("no chain tool");
  const asked: string[] = [];
  const result = await tool.execute(tool.inputSchema.parse({ command }), {
    ...makeContext(runtime as ToolRuntime),
    commands: {
      entries,
      approveStage: async (stage: StageRequest) => {
        asked.push(stage.argv.join(" "));
        return false;
      },
    },
  });
  return { result, asked };
}
const ran = (file: string) => existsSync(path.join(sandbox.workspace, file));

describe("each stage is keyed by its own command", () => {
  const rows: [string, string, string[], string[]][] = [
    // command, the stage asked (turned down), what ran, what did not
    ["git status && git push", "git push", ["git-status.ran"], ["git-push.ran"]],
    ["git status | sh", "sh", [], ["git-status.ran", "sh-.ran"]],
    ["git log; mark x", "mark x", ["git-log.ran"], ["mark-x.ran"]],
    ["git status || mark x; git push", "git push", ["git-status.ran"], ["git-push.ran"]],
    // Quoting removes nothing: the program and key are the words bash would run.
    ["'mark' x", "mark x", [], ["mark-x.ran"]],
    ['git "push"', "git push", [], ["git-push.ran"]],
    ["g'i't push", "git push", [], ["git-push.ran"]],
    // An allowlisted program as an argument covers nothing; word boundaries hold.
    ["mark print-args", "mark print-args", [], ["mark-print-args.ran"]],
    ["git statusx", "git statusx", [], ["git-statusx.ran"]],
    ["git status-all", "git status-all", [], ["git-status-all.ran"]],
    // A flag before the subcommand: the key is the program alone, which no entry covers.
    ["git -C . push", "git -C . push", [], ["git--C.ran"]],
    // ANSI-C quoting is quoting: the word is what bash would pass.
    ["mark $'x'", "mark x", [], ["mark-x.ran"]],
  ];
  it.each(rows)("%s asks for %s alone", async (command, asked, didRun, didNotRun) => {
    const out = await run(command);
    expect(out.asked).toEqual([asked]);
    expectFailure(out.result, "stage-not-approved");
    for (const file of didRun) expect(ran(file), file).toBe(true);
    for (const file of didNotRun) expect(ran(file), file).toBe(false);
  });

  it("runs a chain whose every stage is covered, asking nothing", async () => {
    const out = await run("git status && git log --oneline | print-args x");
    expect(out.asked).toEqual([]);
    expect(ran("git-status.ran") && ran("git-log.ran") && ran("print-args-x.ran")).toBe(true);
  });
});

describe("what a chain cannot say is refused before any stage runs or asks", () => {
  const rows: [string, string][] = [
    ["substitution inside an allowlisted stage", "git status $(mark x)"],
    ["backticks inside an allowlisted stage", "git status `mark x`"],
    ["substitution in double quotes", 'git status "$(mark x)"'],
    ["process substitution", "git status <(mark x)"],
    ["an environment prefix", "GIT_DIR=/tmp git status"],
    ["an environment prefix on a later stage", "git status && PATH=/tmp mark x"],
    ["a redirection onto a file", "git status > mark-x.ran"],
    ["a here-document", "sh <<EOF\nmark x\nEOF"],
    ["a here-string", "sh <<< 'mark x'"],
    ["a newline splitting commands", "git status\nmark x"],
    ["a carriage return", "git status\rmark x"],
    ["a background job", "git status & mark x"],
    ["a subshell", "git status; (mark x)"],
    ["a variable as the program", "$P status"],
    ["an escaped space gluing words", "git\\ status"],
    ["a glob", "mark *"],
  ];
  it.each(rows)("%s", async (_, command) => {
    const out = await run(command);
    expect(out.asked).toEqual([]);
    expect((out.result as { ok?: boolean }).ok).toBe(false);
    expect(ran("git-status.ran")).toBe(false);
    expect(ran("mark-x.ran")).toBe(false);
    expect(ran("sh-.ran")).toBe(false);
  });

  it("a Unicode look-alike program is another program, not the declared one", async () => {
    const out = await run("mаrk x"); // Cyrillic а
    expect(out.asked).toEqual([]);
    expectFailure(out.result, "not-declared");
  });
});
