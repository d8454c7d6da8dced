// A declared tool that cannot run stops start-up with an error naming the full path of the file
// that declares it, the tool, the field, the value and the fix — loaded by the real loader.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.ts";
import { loadPolicies } from "../../../src/load-policies.ts";
import { silentLogger } from "../../../src/log.ts";
import { createToolRuntime } from "../../../src/tools/runtime.ts";

let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "peergate-startup-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

it("names the full path of tools.yaml, the tool, the field, the value and the fix", async () => {
  const policiesDir = path.join(base, "policies");
  const workspace = path.join(base, "ws");
  await mkdir(policiesDir, { recursive: true });
  await mkdir(workspace, { recursive: true });
  await writeFile(
    path.join(policiesDir, "agent.yaml"),
    [
      "name: startup",
      "description: d",
      'version: "1.0.0"',
      "skills: []",
      "instructions: i",
      "tools: [custom]",
      "deniedTools: []",
    ].join("\n"),
  );
  const toolsFile = path.join(policiesDir, "tools.yaml");
  await writeFile(
    toolsFile,
    "commands:\n  - {name: gone, description: d, mode: fixed, program: no-such-program-here}\n",
  );
  const policies = await loadPolicies(policiesDir);
  const error = await createToolRuntime({
    policies,
    workspace,
    dataDir: path.join(base, "data"),
    env: { PATH: "/usr/bin:/bin" },
    logger: silentLogger,
  }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ConfigError);
  const problem = (error as ConfigError).problems[0];
  expect(problem?.field).toBe(`${toolsFile}: commands[0] (gone).program`);
  expect(problem?.message).toMatch(
    new RegExp(
      `^${toolsFile.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}: command tool gone, field program = "no-such-program-here": .*; install it, fix the path, or declare it under executables$`,
    ),
  );
});
