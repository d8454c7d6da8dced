// The declared shell tools language, attacked through the real tool runtime: chain refusals one
// construct per row, per-stage gating against the caller's allowlist, skipped branches that ask
// nothing, scripts edited after load, pinned binaries swapped, stdin and argument bounds, secrets
// that never come back, nonzero as result or error, sanitized progress and the manifest binding.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.ts";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { parseAllowEntry } from "../../../src/shell/command-key.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type {
  StageRequest,
  ToolCallContext,
  ToolResult,
  ToolRuntime,
} from "../../../src/tools/types.ts";
import {
  baseEnv,
  buildPolicies,
  createSandbox,
  expectFailure,
  expectSuccess,
  makeContext,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let bin: string;
let runtime: ToolRuntime | undefined;
const secretValue = "s3cr3t-token-value-9f8e7d";

beforeEach(async () => {
  sandbox = await createSandbox();
  bin = path.join(sandbox.base, "bin");
  await mkdir(bin);
  await writeFile(
    path.join(bin, "print-args"),
    `#!/bin/sh\nfor a in "$@"; do printf '[%s]\\n' "$a"; done\n`,
  );
  await writeFile(path.join(bin, "fail"), "#!/bin/sh\necho failing >&2\nexit 3\n");
  await writeFile(path.join(bin, "mark"), `#!/bin/sh\n: > "$1"\necho marked\n`);
  await writeFile(path.join(bin, "sudo"), "#!/bin/sh\nexit 0\n");
  for (const name of ["print-args", "fail", "mark", "sudo"])
    await chmod(path.join(bin, name), 0o755);
});

afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await sandbox.cleanup();
});

async function start(yaml: string) {
  const toolsPolicy = parseToolsPolicy(yaml, "tools.yaml", builtinDescriptors);
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(toolsPolicy),
    env: baseEnv({ PATH: `${bin}:/usr/bin:/bin`, API_TOKEN: secretValue }),
  });
  return runtime;
}

async function call(
  rt: ToolRuntime,
  name: string,
  args: unknown,
  extra: Partial<ToolCallContext> = {},
): Promise<ToolResult> {
  const tool = rt.tools.get(name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const parsed = tool.inputSchema.parse(args);
  return tool.execute(parsed, { ...makeContext(rt), ...extra });
}

const entries = (...texts: string[]) =>
  texts.map((t) => {
    const parsed = parseAllowEntry(t);
    if ("problem" in parsed) throw new Error(parsed.problem);
    return parsed.entry;
  });

const chainTool = `commands:
  - name: chain
    description: Run a chain.
    mode: chain
    programs: [print-args, fail, mark, tr, "true", "false", head]
    result: structured
    risk: high-risk
`;

describe("chain mode", () => {
  it("runs a three-stage pipeline and conditionals with plain words", async () => {
    const rt = await start(chainTool);
    const result = expectSuccess(
      await call(rt, "chain", {
        command: "print-args 'a b' c | tr a-z A-Z | head -n 1 && print-args done",
      }),
    );
    expect(result.stdout).toBe("[A B]\n[done]\n");
    expect(result.status).toEqual({ exited: 0 });
    const commands = result.commands as {
      program: string;
      executable: string;
      executable_sha256: string;
    }[];
    expect(commands.map((c) => c.program)).toEqual(["print-args", "tr", "head", "print-args"]);
    for (const c of commands) expect(c.executable_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(result.backend).toBe("none");
    expect(result.manifest_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  const refused: [string, string, string][] = [
    ["redirection", "print-args a > out.txt", "redirection"],
    ["input redirection", "tr a b < /etc/passwd", "redirection"],
    ["here-document", "tr a b <<EOF\nx\nEOF", "heredoc"],
    ["command substitution", "print-args $(id)", "substitution"],
    ["backticks", "print-args `id`", "substitution"],
    ["background job", "print-args a &", "background"],
    ["subshell", "(print-args a)", "grouping"],
    ["grouping", "{ print-args a; }", "grouping"],
    ["variable expansion", "print-args $HOME", "variable"],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell syntax under test
    ["braced variable", "print-args ${HOME}", "variable"],
    ["glob", "print-args *", "glob"],
    ["function", "f() { print-args a; }", "function"],
    ["alias", "alias x=print-args", "builtin"],
    ["eval", "eval print-args", "builtin"],
    ["assignment", "X=1 print-args a", "assignment"],
    ["newline", "print-args a\nprint-args b", "control"],
    ["stderr pipe", "fail |& tr a b", "redirection"],
    ["stderr redirection", "fail 2>&1 | tr a b", "redirection"],
    ["negation", "! print-args a", "compound"],
    ["if", "if true; then print-args a; fi", "compound"],
  ];
  it.each(refused)(
    "refuses %s with a typed error and runs nothing",
    async (_, command, construct) => {
      const rt = await start(chainTool);
      const marker = path.join(sandbox.workspace, "out.txt");
      const result = await call(rt, "chain", { command });
      expectFailure(result, "chain-syntax");
      expect((result as { construct?: string }).construct).toBe(construct);
      expect(existsSync(marker)).toBe(false);
    },
  );

  it("refuses a stage whose program is not declared, before anything runs", async () => {
    const rt = await start(chainTool);
    const result = await call(rt, "chain", { command: "mark first && rm -rf x" });
    expectFailure(result, "not-declared");
    expect(existsSync(path.join(sandbox.workspace, "first"))).toBe(false);
  });

  it("gates each stage on its own: an approval for one stage does not run another", async () => {
    const rt = await start(chainTool);
    const asked: StageRequest[] = [];
    const result = await call(
      rt,
      "chain",
      { command: "print-args a && mark one && mark two" },
      {
        commands: {
          entries: entries("print-args"),
          approveStage: async (stage) => {
            asked.push(stage);
            return stage.argv.join(" ") === "mark one";
          },
        },
      },
    );
    const error = expectFailure(result, "stage-not-approved");
    expect(error).toContain("mark two");
    expect(asked.map((s) => s.argv.join(" "))).toEqual(["mark one", "mark two"]);
    expect(asked[0]?.fingerprint).not.toBe(asked[1]?.fingerprint);
    expect(existsSync(path.join(sandbox.workspace, "one"))).toBe(true);
    expect(existsSync(path.join(sandbox.workspace, "two"))).toBe(false);
  });

  it("refuses an uncovered stage when the engine cannot ask", async () => {
    const rt = await start(chainTool);
    const result = await call(
      rt,
      "chain",
      { command: "mark one" },
      { commands: { entries: entries("print-args") } },
    );
    expectFailure(result, "stage-not-approved");
    expect(existsSync(path.join(sandbox.workspace, "one"))).toBe(false);
  });

  it("does not prompt for a branch not taken", async () => {
    const rt = await start(chainTool);
    const asked: string[] = [];
    const gate = {
      entries: entries("print-args", "true", "false"),
      approveStage: async (stage: StageRequest) => {
        asked.push(stage.argv.join(" "));
        return true;
      },
    };
    const result = expectSuccess(
      await call(
        rt,
        "chain",
        { command: "false && mark skipped; true || mark also-skipped; print-args end" },
        { commands: gate },
      ),
    );
    expect(asked).toEqual([]);
    expect(result.stdout).toBe("[end]\n");
    const statuses = (result.commands as { program: string; status: unknown }[]).map(
      (c) => c.status,
    );
    expect(statuses).toEqual([
      { exited: 1 },
      { skipped: true },
      { exited: 0 },
      { skipped: true },
      { exited: 0 },
    ]);
    expect(existsSync(path.join(sandbox.workspace, "skipped"))).toBe(false);
  });

  it("takes pipefail from the declaration", async () => {
    const off = await start(chainTool);
    expect(expectSuccess(await call(off, "chain", { command: "fail | tr a b" })).status).toEqual({
      exited: 0,
    });
    await off.close();
    const on = await start(
      chainTool.replace("result: structured", "result: structured\n    pipefail: true"),
    );
    expect(expectSuccess(await call(on, "chain", { command: "fail | tr a b" })).status).toEqual({
      exited: 3,
    });
  });

  it("refuses a stage the denylist denies, even in a branch not taken", async () => {
    const rt = await start(
      chainTool
        .replace("programs: [", "programs: [sudo, ")
        .replace("risk: high-risk", "runsCode: true"),
    );
    expectFailure(await call(rt, "chain", { command: "false && sudo print-args" }), "refused");
  }, 20_000);
});

describe("script mode", () => {
  const scriptYaml = (extra = "") => `commands:
  - name: checks
    description: Run the checks.
    mode: script
    script: scripts/check.sh
    interpreter: /bin/sh
    args: ["--ci"]
    arguments: {mode: optional, maxCount: 2}
    maxSourceBytes: 4096${extra}
`;

  beforeEach(async () => {
    await mkdir(path.join(sandbox.workspace, "scripts"));
    await writeFile(
      path.join(sandbox.workspace, "scripts", "check.sh"),
      'for a in "$@"; do echo "arg:$a"; done\n',
    );
  });

  it("runs the script with its fixed arguments before the model's", async () => {
    const rt = await start(scriptYaml());
    const result = expectSuccess(await call(rt, "checks", { arguments: ["x y"] }));
    expect(result.stdout).toBe("arg:--ci\narg:x y\n");
  });

  it("refuses a script edited after load, with a typed failure", async () => {
    const rt = await start(scriptYaml());
    await writeFile(
      path.join(sandbox.workspace, "scripts", "check.sh"),
      "echo pwned > pwned.txt\n",
    );
    expectFailure(await call(rt, "checks", {}), "script-changed");
    expect(existsSync(path.join(sandbox.workspace, "pwned.txt"))).toBe(false);
  });

  it("stops start-up for a script over maxSourceBytes, naming the tool, field and fix", async () => {
    await writeFile(path.join(sandbox.workspace, "scripts", "check.sh"), `#${"x".repeat(5000)}\n`);
    const error = await start(scriptYaml()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]?.message).toMatch(
      /command tool checks, field script = .*over maxSourceBytes 4096.*fix/,
    );
  });

  it("runs an executable script without an interpreter", async () => {
    const file = path.join(sandbox.workspace, "scripts", "own");
    await writeFile(file, "#!/bin/sh\necho own\n");
    await chmod(file, 0o755);
    const rt = await start(`commands:
  - {name: own, description: d, mode: script, script: scripts/own, executable: true}
`);
    expect(expectSuccess(await call(rt, "own", {})).stdout).toBe("own\n");
  });

  it("refuses a declaration with both or neither of interpreter and executable", () => {
    expect(() =>
      parseToolsPolicy(
        "commands:\n  - {name: s, description: d, mode: script, script: a.sh}\n",
        "tools.yaml",
        builtinDescriptors,
      ),
    ).toThrow(/commands\[0\]\.interpreter.*either an interpreter/);
  });
});

describe("pinned executables", () => {
  it("refuses a call after the pinned binary was swapped", async () => {
    const file = path.join(bin, "print-args");
    const { readFile } = await import("node:fs/promises");
    const pin = createHash("sha256")
      .update(await readFile(file))
      .digest("hex");
    const rt = await start(`executables:
  - {id: printer, path: ${JSON.stringify(file)}, sha256: "${pin}"}
commands:
  - {name: show, description: d, mode: fixed, program: printer}
  - {name: chain, description: d, mode: chain, programs: [printer]}
`);
    expect(expectSuccess(await call(rt, "show", { arguments: ["a"] })).stdout).toBe("[a]\n");
    await writeFile(file, "#!/bin/sh\necho swapped\n");
    expectFailure(await call(rt, "show", { arguments: ["a"] }), "refused");
    expectFailure(await call(rt, "chain", { command: "printer a" }), "refused");
  });

  it("stops start-up when an alias's pin does not match", async () => {
    const error = await start(`executables:
  - {id: printer, path: ${JSON.stringify(path.join(bin, "print-args"))}, sha256: "${"0".repeat(64)}"}
commands:
  - {name: show, description: d, mode: fixed, program: printer}
`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]?.message).toMatch(
      /show, field executables printer\.sha256 .*not the pinned/,
    );
  });
});

describe("contracts", () => {
  const fixedYaml = (extra: string) => `commands:
  - name: show
    description: Show arguments.
    mode: fixed
    program: print-args
    allowOptions: true
${extra}`;

  it("refuses stdin over its limit in the schema, before any approval", async () => {
    const rt = await start(
      fixedYaml(
        "    stdin: required\n    maxStdinBytes: 8\n    program: tr\n".replace(
          "    program: tr\n",
          "",
        ),
      ),
    );
    const schema = rt.tools.get("show")?.inputSchema;
    expect(schema?.safeParse({ stdin: "12345678" }).success).toBe(true);
    expect(schema?.safeParse({ stdin: "123456789" }).success).toBe(false);
    expect(schema?.safeParse({}).success).toBe(false);
  });

  it("passes stdin to the first stage only", async () => {
    const rt = await start(`commands:
  - {name: upper, description: d, mode: chain, programs: [tr, head], stdin: optional}
`);
    expect(
      expectSuccess(await call(rt, "upper", { command: "tr a-z A-Z | head -c 3", stdin: "hello" }))
        .stdout,
    ).toBe("HEL");
  });

  it("bounds argument counts and sizes at and past their limits", async () => {
    const rt = await start(
      fixedYaml("    arguments: {mode: required, minCount: 1, maxCount: 2, maxItemBytes: 4}\n"),
    );
    const schema = rt.tools.get("show")?.inputSchema;
    expect(schema?.safeParse({ arguments: [] }).success).toBe(false);
    expect(schema?.safeParse({ arguments: ["a"] }).success).toBe(true);
    expect(schema?.safeParse({ arguments: ["a", "b"] }).success).toBe(true);
    expect(schema?.safeParse({ arguments: ["a", "b", "c"] }).success).toBe(false);
    expect(schema?.safeParse({ arguments: ["abcd"] }).success).toBe(true);
    expect(schema?.safeParse({ arguments: ["abcde"] }).success).toBe(false);
    expect(schema?.safeParse({}).success).toBe(false);
  });

  it("refuses arguments to a tool with mode none, and a rationale to a fixed tool by default", async () => {
    const rt = await start(fixedYaml("    arguments: {mode: none}\n"));
    const schema = rt.tools.get("show")?.inputSchema;
    expect(schema?.safeParse({}).success).toBe(true);
    expect(schema?.safeParse({ arguments: ["a"] }).success).toBe(false);
    expect(schema?.safeParse({ rationale: "because" }).success).toBe(false);
  });

  it("bounds and sanitises the rationale", async () => {
    const rt = await start(fixedYaml("    rationale: required\n"));
    const schema = rt.tools.get("show")?.inputSchema;
    expect(schema?.safeParse({}).success).toBe(false);
    expect(schema?.safeParse({ rationale: "x".repeat(1025) }).success).toBe(false);
    expect(
      expectSuccess(await call(rt, "show", { rationale: "\u001b[31mred\u0007" })).exitCode,
    ).toBe(0);
  });

  it("returns a nonzero exit as a result or as an error carrying the same result", async () => {
    const asResult = await start(`commands:
  - {name: f, description: d, mode: fixed, program: fail}
`);
    const result = expectSuccess(await call(asResult, "f", {}));
    expect(result.exitCode).toBe(3);
    expect(result.stderr).toBe("failing\n");
    await asResult.close();
    const asError = await start(`commands:
  - {name: f, description: d, mode: fixed, program: fail, nonzero: error, result: structured}
`);
    const error = expectFailure(await call(asError, "f", {}), "nonzero-exit");
    expect(error).toContain('"status":{"exited":3}');
    expect(error).toContain("failing");
  });

  it("returns stdout only for result: stdout", async () => {
    const rt = await start(`commands:
  - {name: f, description: d, mode: fixed, program: fail, result: stdout}
`);
    expect(expectSuccess(await call(rt, "f", {}))).toEqual({
      exitCode: 3,
      stdout: "",
      stdoutTruncated: false,
    });
  });

  it("strips terminal control sequences and flags truncation", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args, allowOptions: true, maxOutputBytes: 64}
`);
    const result = expectSuccess(
      await call(rt, "show", { arguments: ["\u001b[2J\u001b]0;title\u0007ok", "x".repeat(100)] }),
    );
    expect(result.stdout).toMatch(/^\[ok\]\n\[x+\n\[output truncated: \d+ more bytes not shown\]$/);
    expect(result.stdoutTruncated).toBe(true);
  });
});

describe("secretArg", () => {
  it("never shows the value: not in output, description, schema, records or errors", async () => {
    const yaml = `commands:
  - name: call_api
    description: Call the API.
    mode: fixed
    program: print-args
    args: [--header, {secretArg: {env: API_TOKEN, prefix: "Authorization: Bearer "}}]
    allowOptions: true
    result: structured
    nonzero: error
`;
    const rt = await start(yaml);
    const tool = rt.tools.get("call_api");
    const result = expectSuccess(await call(rt, "call_api", { arguments: ["x"] }));
    const everything = JSON.stringify({
      result,
      description: tool?.description,
      schema: tool?.inputSchema.parse({}),
    });
    expect(everything).not.toContain(secretValue);
    expect(result.stdout).toBe("[--header]\n[Authorization: Bearer [redacted]]\n[x]\n");
    expect((result.commands as { arguments: string[] }[])[0]?.arguments).toEqual([
      "--header",
      "[secret]",
      "x",
    ]);
    // The manifest does not depend on the value.
    await rt.close();
    const toolsPolicy = parseToolsPolicy(yaml, "tools.yaml", builtinDescriptors);
    runtime = await startRuntime(sandbox, {
      policies: buildPolicies(toolsPolicy),
      env: baseEnv({ PATH: `${bin}:/usr/bin:/bin`, API_TOKEN: "another-token-value-12345" }),
    });
    const other = expectSuccess(await call(runtime, "call_api", {}));
    expect(other.manifest_sha256).toBe(result.manifest_sha256);
  });

  it("stops start-up when the variable is not set", async () => {
    const error = await start(`commands:
  - {name: c, description: d, mode: fixed, program: print-args, args: [{secretArg: {env: MISSING_TOKEN}}]}
`).catch((e: unknown) => e);
    expect((error as ConfigError).problems[0]?.message).toMatch(
      /field args\[0\].*MISSING_TOKEN is not set/,
    );
  });
});

describe("pathArg", () => {
  it("passes a canonical workspace path and refuses one leading outside", async () => {
    await writeFile(path.join(sandbox.workspace, "query.json"), "{}");
    const rt = await start(`commands:
  - {name: p, description: d, mode: fixed, program: print-args, args: [{pathArg: ./sub/../query.json}], result: structured}
`);
    const result = expectSuccess(await call(rt, "p", {}));
    expect(result.stdout).toBe(`[${path.join(sandbox.workspace, "query.json")}]\n`);
    await rt.close();
    const error = await start(`commands:
  - {name: p, description: d, mode: fixed, program: print-args, args: [{pathArg: ../outside/secret}]}
`).catch((e: unknown) => e);
    expect((error as ConfigError).problems[0]?.message).toMatch(
      /field args\[0\].*inside the workspace/,
    );
  });
});

describe("manifest and description", () => {
  it("refuses a call (or an approval) made for another manifest", async () => {
    const rt = await start(`commands:
  - {name: show, description: d, mode: fixed, program: print-args}
`);
    const parsed = rt.tools.get("show")?.inputSchema.parse({}) as { manifest: string };
    expect(parsed.manifest).toMatch(/^[0-9a-f]{64}$/);
    const stale = { manifest: "a".repeat(64) };
    expectFailure(await call(rt, "show", stale), "manifest-changed");
    expect(expectSuccess(await call(rt, "show", parsed)).exitCode).toBe(0);
  });

  it("composes the built-in contract, then the operator's guidance", async () => {
    const rt = await start(`commands:
  - {name: search, description: Search repository text and prefer concise patterns., mode: fixed, program: print-args}
  - {name: c, description: Chain., mode: chain, programs: [tr], nonzero: error}
`);
    const fixed = rt.tools.get("search")?.description ?? "";
    expect(fixed).toMatch(/^Runs a fixed program/);
    expect(fixed).toContain("A nonzero exit is a normal result.");
    expect(fixed).toMatch(/governed by the operator's policy, approvals, sandbox and limits/);
    expect(
      fixed.endsWith(
        "\n\nAdditional tool guidance: Search repository text and prefer concise patterns.",
      ),
    ).toBe(true);
    const chain = rt.tools.get("c")?.description ?? "";
    expect(chain).toContain('"command"');
    expect(chain).toContain("reported as a tool error");
  });
});

describe("sanitized streaming", () => {
  it("publishes bounded, filtered, redacted progress while the command runs", async () => {
    const rt = await start(`commands:
  - name: s
    description: d
    mode: fixed
    program: print-args
    args: [{secretArg: {env: API_TOKEN}}]
    stream: sanitized
    allowOptions: true
`);
    const seen: string[] = [];
    const result = expectSuccess(
      await call(
        rt,
        "s",
        { arguments: ["\u001b[31mred"] },
        { progress: (text) => seen.push(text) },
      ),
    );
    const progress = seen.join("");
    expect(progress).toBe("[[redacted]]\n[red]\n");
    expect(result.stdout).toBe(progress);
  });

  it("publishes nothing for a finalized tool", async () => {
    const rt = await start(`commands:
  - {name: s, description: d, mode: fixed, program: print-args}
`);
    const seen: string[] = [];
    await call(rt, "s", { arguments: ["a"] }, { progress: (text) => seen.push(text) });
    expect(seen).toEqual([]);
  });
});
