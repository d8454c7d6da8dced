// Declared command tools from tools.yaml: fixed and structured modes, literal argv, argument and
// output bounds, PATH resolution at start, and the SHA-256 pin checked at start and per call.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.ts";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import { shippedPoliciesDir } from "../../support/shipped-policies.ts";
import {
  baseEnv,
  buildPolicies,
  callTool,
  createSandbox,
  expectFailure,
  expectSuccess,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let bin: string;
let runtime: ToolRuntime | undefined;

const printArgs = `#!/bin/sh\nfor a in "$@"; do printf '[%s]\\n' "$a"; done\n`;

beforeEach(async () => {
  sandbox = await createSandbox();
  bin = path.join(sandbox.base, "bin");
  await mkdir(bin);
  await writeFile(path.join(bin, "print-args"), printArgs);
  await writeFile(path.join(bin, "flood"), "#!/bin/sh\nhead -c 100000 /dev/zero | tr '\\0' 'x'\n");
  await writeFile(path.join(bin, "slow"), "#!/bin/sh\nsleep 5\n");
  for (const name of ["print-args", "flood", "slow"]) await chmod(path.join(bin, name), 0o755);
});

afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await sandbox.cleanup();
});

async function start(yaml: string, pathVariable = `${bin}:/usr/bin:/bin`) {
  const toolsPolicy = parseToolsPolicy(yaml, "tools.yaml", builtinDescriptors);
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(toolsPolicy),
    env: baseEnv({ PATH: pathVariable, SERVICE_TOKEN: "leak" }),
  });
  return runtime;
}

function lines(content: Record<string, unknown>): string[] {
  return (content.stdout as string).split("\n").filter((l) => l !== "");
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("fixed command tools", () => {
  it("appends the model's arguments as literal argv after the fixed ones", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args, args: ["--fixed", "a b"], allowOptions: true, risk: read-only, disclosure: public, egress: false}
`);
    const hostile = ["; rm -rf /", "$(id)", "`id`", "x\ny", "*", "--output=/etc/passwd"];
    const result = expectSuccess(await callTool(rt, "show", { arguments: hostile }));
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe(["--fixed", "a b", ...hostile].map((a) => `[${a}]\n`).join(""));
    expect(lines(expectSuccess(await callTool(rt, "show", {})))).toEqual(["[--fixed]", "[a b]"]);
  });

  it("bounds the argument count and size in its schema", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args}
`);
    const schema = rt.tools.get("show")?.inputSchema;
    expect(schema?.safeParse({ arguments: Array.from({ length: 33 }, () => "a") }).success).toBe(
      false,
    );
    expect(schema?.safeParse({ arguments: ["x".repeat(4097)] }).success).toBe(false);
    expect(schema?.safeParse({ arguments: ["é".repeat(2049)] }).success).toBe(false);
    expect(schema?.safeParse({ arguments: ["ok"], extra: 1 }).success).toBe(false);
    expect(schema?.safeParse({ arguments: Array.from({ length: 32 }, () => "a") }).success).toBe(
      true,
    );
  });

  it("caps output at 16 KiB and flags it", async () => {
    const rt = await start(`commands:
  - {name: flood, description: d, mode: fixed, program: flood}
`);
    const result = await callTool(rt, "flood", {});
    expect(result).toMatchObject({ ok: true, truncated: true });
    const stdout = expectSuccess(result).stdout as string;
    expect(stdout.startsWith("x".repeat(16 * 1024))).toBe(true);
    expect(stdout).toContain("[output truncated: 83616 more bytes not shown]");
  });

  it("times out at the declared timeoutMs", async () => {
    const rt = await start(`commands:
  - {name: slow, description: d, mode: fixed, program: slow, timeoutMs: 300}
`);
    expectFailure(await callTool(rt, "slow", {}), "timeout");
  });

  it("runs with the scrubbed environment in the workspace", async () => {
    const rt = await start(`commands:
  - {name: environment, description: d, mode: fixed, program: env}
  - {name: where, description: d, mode: fixed, program: pwd}
`);
    expect(expectSuccess(await callTool(rt, "environment", {})).stdout).not.toContain(
      "SERVICE_TOKEN",
    );
    expect(expectSuccess(await callTool(rt, "where", {})).stdout).toBe(`${sandbox.workspace}\n`);
  });
});

describe("resolution and pinning", () => {
  it("stops start-up naming the tool when its program is missing or only on a relative PATH entry", async () => {
    await writeFile(path.join(sandbox.workspace, "planted"), "#!/bin/sh\necho hijacked\n");
    await chmod(path.join(sandbox.workspace, "planted"), 0o755);
    for (const [program, pathVariable] of [
      ["no-such-program", `${bin}:/usr/bin`],
      ["planted", `.:workspace:${bin}`],
      ["./print-args", `${bin}`],
    ] as const) {
      const error = await start(
        `commands:\n  - {name: broken_tool, description: d, mode: fixed, program: "${program}"}\n`,
        pathVariable,
      ).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain("broken_tool");
    }
  });

  it("checks the SHA-256 pin at start", async () => {
    const good = sha256(printArgs);
    const ok = await start(`commands:
  - {name: pinned, description: d, mode: fixed, program: ${path.join(bin, "print-args")}, sha256: ${good}}
`);
    expect(lines(expectSuccess(await callTool(ok, "pinned", { arguments: ["x"] })))).toEqual([
      "[x]",
    ]);
    await ok.close();
    const error = await start(`commands:
  - {name: pinned, description: d, mode: fixed, program: print-args, sha256: "${"0".repeat(64)}"}
`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain("pinned");
    expect((error as ConfigError).message).toContain(good);
  });

  it("refuses a call when the pinned program changed after start", async () => {
    const rt = await start(`commands:
  - {name: pinned, description: d, mode: fixed, program: print-args, sha256: ${sha256(printArgs)}}
`);
    await writeFile(path.join(bin, "print-args"), "#!/bin/sh\necho swapped > swapped.txt\n");
    const error = expectFailure(await callTool(rt, "pinned", {}), "refused");
    expect(error).toContain("changed");
    await expect(readFile(path.join(sandbox.workspace, "swapped.txt"))).rejects.toThrow();
  });
});

describe("structured command tools", () => {
  it("runs one of the declared programs with literal argv, nothing else", async () => {
    const rt = await start(`commands:
  - {name: tools_run, description: d, mode: structured, programs: [print-args, "true", sh]}
`);
    const result = expectSuccess(
      await callTool(rt, "tools_run", { program: "print-args", arguments: ["$(id)", "a b"] }),
    );
    expect(lines(result)).toEqual(["[$(id)]", "[a b]"]);
    expect(expectSuccess(await callTool(rt, "tools_run", { program: "true" })).exitCode).toBe(0);
    const schema = rt.tools.get("tools_run")?.inputSchema;
    expect(schema?.safeParse({ program: "rm", arguments: ["-rf", "."] }).success).toBe(false);
    expect(schema?.safeParse({ program: "/bin/print-args" }).success).toBe(false);
    // Even a schema bypass cannot pick another program.
    const forged = await rt.tools.get("tools_run")?.execute(
      { program: "rm", arguments: [] },
      {
        signal: new AbortController().signal,
        workspace: rt.workspace ?? "",
        callId: "c",
        now: () => new Date(),
      },
    );
    expect(forged).toMatchObject({ ok: false });
  });

  it("applies the denylist to what the model asks a declared shell to run", async () => {
    const rt = await start(`commands:
  - {name: tools_run, description: d, mode: structured, programs: [sh], allowOptions: true}
`);
    const error = expectFailure(
      await callTool(rt, "tools_run", { program: "sh", arguments: ["-c", "sudo id"] }),
      "refused",
    );
    expect(error).toContain("privilege escalation");
  });
});

describe("fixed tools cannot be steered by options", () => {
  it("refuses a model argument starting with - unless the declaration allows options", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args, args: [fixed]}
  - {name: pick, description: d, mode: structured, programs: [print-args]}
  - {name: open, description: d, mode: fixed, program: print-args, allowOptions: true}
`);
    expect(rt.tools.get("show")?.description).toContain("none starting with -");
    for (const argument of ["--output=/tmp/x", "-o", "-", "--"]) {
      const error = expectFailure(
        await callTool(rt, "show", { arguments: ["ok", argument] }),
        "refused",
      );
      expect(error).toContain("does not take options");
      expectFailure(
        await callTool(rt, "pick", { program: "print-args", arguments: [argument] }),
        "refused",
      );
    }
    expect(lines(expectSuccess(await callTool(rt, "open", { arguments: ["-o", "x"] })))).toEqual([
      "[-o]",
      "[x]",
    ]);
  });

  it("passes them after an operator-placed --, where they are operands", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args, args: [log, --]}
`);
    const result = expectSuccess(await callTool(rt, "show", { arguments: ["--output=x", "-p"] }));
    expect(lines(result)).toEqual(["[log]", "[--]", "[--output=x]", "[-p]"]);
  });

  it.skipIf(!existsSync("/usr/bin/git"))(
    "the shipped read-only git example cannot be made to write a file",
    async () => {
      // The example exactly as shipped in policies/tools.yaml, uncommented.
      const shipped = readFileSync(path.join(shippedPoliciesDir, "tools.yaml"), "utf8");
      const lines_ = shipped.split("\n");
      const first = lines_.indexOf("#   - name: git_log");
      const last = lines_.indexOf("#", first);
      const block = lines_.slice(first, last).map((line) => line.slice(2));
      const yaml = `commands:\n${block.join("\n")}\n`;
      const git = (...args: string[]) =>
        spawnSync("git", args, {
          cwd: sandbox.workspace,
          env: {
            ...baseEnv(),
            GIT_AUTHOR_NAME: "t",
            GIT_AUTHOR_EMAIL: "t@example.com",
            GIT_COMMITTER_NAME: "t",
            GIT_COMMITTER_EMAIL: "t@example.com",
          },
        });
      git("init", "-q");
      await writeFile(path.join(sandbox.workspace, "a.txt"), "a\n");
      git("add", "a.txt");
      git("commit", "-qm", "first");
      const rt = await start(yaml);
      const stolen = path.join(sandbox.outside, "written-by-git");
      // Before the fix, git read this as its --output option and wrote the log to the file.
      const result = await callTool(rt, "git_log", { arguments: [`--output=${stolen}`] });
      expect(existsSync(stolen)).toBe(false);
      expect(existsSync(path.join(sandbox.workspace, `--output=${stolen}`))).toBe(false);
      // Passed after the shipped `--`, the argument is a path that matches no commit.
      expect(expectSuccess(result).stdout).toBe("");
      expect(lines(expectSuccess(await callTool(rt, "git_log", { arguments: ["a.txt"] })))).toEqual(
        [expect.stringMatching(/^[0-9a-f]+ first$/)],
      );
    },
  );
});
