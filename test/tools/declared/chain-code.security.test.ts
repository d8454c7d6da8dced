// Chain stages are commands. A chain promises no shell: one that may run a shell, an interpreter
// or a wrapper must say so (`runsCode: true`, refused at load otherwise, naming the field, the
// value and the fix), a stage that would run code in a chain that did not say so is refused, and
// in a chain that did, every stage meets the risk floor and the denylist as execute_command's
// argv would, before any stage starts: a stage the floor flags asks an operator even when the
// allowlist covers its program. Attacked through the real tool runtime.
import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.ts";
import { parseToolsPolicy } from "../../../src/policy/policy-files.ts";
import { parseAllowEntry } from "../../../src/shell/command-key.ts";
import { builtinDescriptors } from "../../../src/tools/builtin-tools.ts";
import type { StageRequest, ToolResult, ToolRuntime } from "../../../src/tools/types.ts";
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
let runtime: ToolRuntime | undefined;

beforeEach(async () => {
  sandbox = await createSandbox();
  const bin = path.join(sandbox.base, "bin");
  await mkdir(bin);
  // `mark x` leaves mark-x.ran in the workspace: what ran is visible.
  await writeFile(path.join(bin, "mark"), '#!/bin/sh\n: > "mark-$1.ran"\n');
  await chmod(path.join(bin, "mark"), 0o755);
});

afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await sandbox.cleanup();
});

function load(yaml: string) {
  return parseToolsPolicy(yaml, "tools.yaml", builtinDescriptors);
}

async function start(yaml: string) {
  runtime = await startRuntime(sandbox, {
    policies: buildPolicies(load(yaml)),
    env: baseEnv({ PATH: `${path.join(sandbox.base, "bin")}:/usr/bin:/bin` }),
  });
  return runtime;
}

const entries = ["sh", "mark", "find"].map((t) => {
  const parsed = parseAllowEntry(t);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.entry;
});

async function call(
  command: string,
  gate: "none" | "deny" | "approve" | "park",
): Promise<{ result: ToolResult; asked: string[] }> {
  const tool = runtime?.tools.get("chain");
  if (tool === undefined) throw new Error("no chain tool");
  const asked: string[] = [];
  const commands =
    gate === "none"
      ? undefined
      : {
          entries,
          ...(gate === "park" ? { park: true } : {}),
          approveStage: async (stage: StageRequest) => {
            asked.push(stage.argv.join(" "));
            return gate === "approve";
          },
        };
  const result = await tool.execute(tool.inputSchema.parse({ command }), {
    ...makeContext(runtime as ToolRuntime),
    ...(commands === undefined ? {} : { commands }),
  });
  return { result, asked };
}

const ran = (file: string) => existsSync(path.join(sandbox.workspace, file));

function loadError(yaml: string): string {
  try {
    load(yaml);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => p.message).join("\n");
    throw error;
  }
  return "(loaded)";
}

describe("a chain that may run code must say so", () => {
  it("refuses a chain without programs (it runs any program on PATH, shells included)", () => {
    expect(loadError("commands:\n  - {name: chain, description: d, mode: chain}\n")).toContain(
      "tools.yaml: commands[0].programs = (missing): expected a list of the programs a stage may run for tool chain: without one a stage may run any program on PATH, shells included (list the programs, or declare runsCode: true to allow code)",
    );
  });

  it.each(["sh", "bash", "/bin/sh", "python3", "node", "env", "xargs", "sudo", "busybox", "su"])(
    "refuses a chain listing %s without runsCode",
    (program) => {
      const error = loadError(
        `commands:\n  - {name: chain, description: d, mode: chain, programs: [mark, "${program}"]}\n`,
      );
      expect(error).toContain(`commands[0].programs[1] = "${program}"`);
      expect(error).toContain("declare runsCode: true");
    },
  );

  it("refuses an executable alias that is a shell", () => {
    const error = loadError(
      "executables:\n  - {id: shell, path: /bin/bash}\ncommands:\n  - {name: chain, description: d, mode: chain, programs: [shell]}\n",
    );
    expect(error).toContain('commands[0].programs[0] = "shell"');
  });

  it("refuses runsCode with a risk below unknown (each stage must ask under every risk policy)", () => {
    const error = loadError(
      "commands:\n  - {name: chain, description: d, mode: chain, programs: [sh], runsCode: true, risk: high-risk}\n",
    );
    expect(error).toContain('commands[0].risk = "high-risk": expected unknown or left out');
  });

  it("loads a chain that says runsCode: true, and one of plain programs", () => {
    expect(
      loadError(
        "commands:\n  - {name: a, description: d, mode: chain, runsCode: true}\n  - {name: b, description: d, mode: chain, programs: [git, make, head]}\n",
      ),
    ).toBe("(loaded)");
  });
});

describe("a chain of plain programs runs no code", () => {
  const yaml =
    "commands:\n  - {name: chain, description: d, mode: chain, programs: [mark, find]}\n";

  it.each([
    ["find . -exec sh -c 'mark x' ';'", "find -exec runs sh"],
    ["mark a && find . -maxdepth 0 -exec mark x ';' -exec python3 -c 1 ';'", "python3"],
  ])(
    "refuses %j before any stage runs",
    async (command, what) => {
      await start(yaml);
      const out = await call(command, "none");
      expect(expectFailure(out.result, "refused")).toContain(what.split(" ").at(-1) as string);
      expect(ran("mark-x.ran") || ran("mark-a.ran")).toBe(false);
    },
    20_000,
  );

  it("runs a find that runs a plain program", async () => {
    await start(yaml);
    expectSuccess((await call("find . -maxdepth 0 -exec mark x ';'", "none")).result);
    expect(ran("mark-x.ran")).toBe(true);
  }, 20_000);
});

describe("a chain that runs code meets the floor and the denylist before any stage starts", () => {
  const yaml =
    "commands:\n  - {name: chain, description: d, mode: chain, programs: [mark, sh, find], runsCode: true}\n";
  const flagged = "mark a && sh -c 'mark b > f; echo $(id)'";

  it("asks for the flagged stage first, though the allowlist covers sh, and runs nothing when turned down", async () => {
    await start(yaml);
    const out = await call(flagged, "deny");
    expect(out.asked).toEqual(["sh -c mark b > f; echo $(id)"]);
    expect(expectFailure(out.result, "stage-not-approved")).toContain("risk floor");
    expect(ran("mark-a.ran")).toBe(false);
  }, 20_000);

  it("parks before any stage starts when the engine can park", async () => {
    await start(yaml);
    const out = await call(flagged, "park");
    expectFailure(out.result, "stage-approval");
    expect(ran("mark-a.ran")).toBe(false);
  }, 20_000);

  it("asks for a flagged stage in a branch that is not taken too", async () => {
    await start(yaml);
    const out = await call("mark a || find . -exec sh -c 'echo `id`' ';'", "deny");
    expect(out.asked).toEqual(["find . -exec sh -c echo `id` ;"]);
    expect(ran("mark-a.ran")).toBe(false);
  }, 20_000);

  it("runs the chain once an operator approves the flagged stage", async () => {
    await start(yaml);
    const out = await call("mark a && sh -c 'mark b'; sh -c 'x=1; echo $((x))'", "approve");
    expectSuccess(out.result);
    expect(out.asked).toEqual(["sh -c x=1; echo $((x))"]);
    expect(ran("mark-a.ran") && ran("mark-b.ran")).toBe(true);
  }, 20_000);

  it("refuses a stage the denylist denies wherever its code sits", async () => {
    await start(yaml);
    for (const command of [
      "sh -c 'sudo id'",
      "find . -exec sh -c 'rm -rf x' ';'",
      "mark a; sh -c 'eval \"sudo id\"'",
    ]) {
      const out = await call(command, "approve");
      expectFailure(out.result, "refused");
      expect(out.asked).toEqual([]);
    }
    expect(ran("mark-a.ran")).toBe(false);
  }, 20_000);
});
