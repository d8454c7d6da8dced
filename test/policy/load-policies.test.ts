// Loading the policy files from disk: versions, optional tools.yaml, and errors naming the file.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.ts";
import { loadPolicies } from "../../src/load-policies.ts";

const agentYaml = `name: peergate\ndescription: test agent\nversion: "0.1.0"\ntools: [files, web]\n`;
const toolsYaml = `commands:\n  - {name: git_log, description: d, mode: fixed, program: git, risk: read-only, disclosure: internal, egress: false}\n`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "peergate-policies-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function loadError(): Promise<ConfigError> {
  try {
    await loadPolicies(dir);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("loadPolicies", () => {
  it("loads agent.yaml alone: tools.yaml is optional", async () => {
    await writeFile(path.join(dir, "agent.yaml"), agentYaml);
    const loaded = await loadPolicies(dir);
    expect(loaded.agent.name).toBe("peergate");
    expect(loaded.inventory.tools).toHaveLength(13);
    expect(loaded.agentVersion).toMatch(/^[0-9a-f]{64}$/);
    expect(loaded.inventoryVersion).toMatch(/^[0-9a-f]{64}$/);
    expect(loaded.agent.version).toBe(loaded.agentVersion);
    expect(loaded.inventory.version).toBe(loaded.inventoryVersion);
    expect(Object.isFrozen(loaded.agent.tools)).toBe(true);
  });

  it("adds declared tools to the inventory and changes its version", async () => {
    await writeFile(path.join(dir, "agent.yaml"), agentYaml);
    const before = await loadPolicies(dir);
    await writeFile(path.join(dir, "tools.yaml"), toolsYaml);
    const after = await loadPolicies(dir);
    expect(after.inventory.names.get("git_log")?.tool).toMatchObject({ category: "custom" });
    expect(after.inventoryVersion).not.toBe(before.inventoryVersion);
    expect(after.agentVersion).toBe(before.agentVersion);
  });

  it("versions are content hashes: stable across loads and blind to comments", async () => {
    await writeFile(path.join(dir, "agent.yaml"), agentYaml);
    await writeFile(path.join(dir, "tools.yaml"), toolsYaml);
    const first = await loadPolicies(dir);
    await writeFile(path.join(dir, "agent.yaml"), `# a comment\n${agentYaml}`);
    const second = await loadPolicies(dir);
    expect(second.agentVersion).toBe(first.agentVersion);
    expect(second.inventoryVersion).toBe(first.inventoryVersion);
    await writeFile(path.join(dir, "agent.yaml"), agentYaml.replace("[files, web]", "[files]"));
    expect((await loadPolicies(dir)).agentVersion).not.toBe(first.agentVersion);
  });

  it("says where it looked when agent.yaml is missing", async () => {
    const error = await loadError();
    expect(error.message).toContain(path.join(dir, "agent.yaml"));
    expect(error.message).toContain("PEERGATE_POLICIES_DIR");
  });

  it("names the file that cannot be read", async () => {
    await mkdir(path.join(dir, "agent.yaml"));
    const error = await loadError();
    expect(error.message).toContain(`${path.join(dir, "agent.yaml")}: cannot be read`);
  });

  it("reports problems in both files at once, each with its full path", async () => {
    await writeFile(path.join(dir, "agent.yaml"), "name: x\n");
    await writeFile(path.join(dir, "tools.yaml"), "commands: nope\n");
    const error = await loadError();
    const fields = error.problems.map((p) => p.field);
    expect(fields).toContain(`${path.join(dir, "agent.yaml")}: description`);
    expect(fields).toContain(`${path.join(dir, "tools.yaml")}: commands`);
  });

  it("refuses an agent naming a tool the inventory does not have", async () => {
    await writeFile(path.join(dir, "agent.yaml"), `${agentYaml}deniedTools: [git_logg]\n`);
    await writeFile(path.join(dir, "tools.yaml"), toolsYaml);
    const error = await loadError();
    expect(error.problems[0]?.message).toMatch(/agent\.yaml: deniedTools\[0\] = "git_logg"/);
  });
});
