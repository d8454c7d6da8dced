// The sandbox's start-up rules without running a server: when it is required, what a broken
// backend does to start-up, how PEERGATE_SANDBOX=none is reported, the workspace's place, the
// envAllowlist rules in the policy files, the environment a process gets, and redaction.
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ConfigError } from "../../src/errors.ts";
import { loadPolicies } from "../../src/load-policies.ts";
import { createLogger } from "../../src/log.ts";
import { parseAgentPolicy, parseToolsPolicy } from "../../src/policy/policy-files.ts";
import { bwrapArguments } from "../../src/sandbox/bwrap.ts";
import { createNoneBackend } from "../../src/sandbox/none.ts";
import { prepareSandbox } from "../../src/sandbox/prepare-sandbox.ts";
import { createRedactor, databaseUrlSecrets } from "../../src/sandbox/redact.ts";
import { defaultSandboxLimits, type SandboxBackend } from "../../src/sandbox/types.ts";
import { builtinDescriptors } from "../../src/tools/builtin-tools.ts";
import { scrubEnvironment } from "../../src/tools/scrub-environment.ts";
import { startsProcesses } from "../../src/tools/starts-processes.ts";
import { shippedPoliciesDir } from "../support/shipped-policies.ts";

const repoPolicies = shippedPoliciesDir;

let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "peergate-sandbox-start-"));
});
afterAll(() => rm(base, { recursive: true, force: true }));

async function policiesWith(agentTools: string, toolsYaml = "") {
  const dir = await mkdtemp(path.join(base, "policies-"));
  await writeFile(
    path.join(dir, "agent.yaml"),
    `name: t\ndescription: t\nversion: "1"\ntools: ${agentTools}\n`,
  );
  if (toolsYaml) await writeFile(path.join(dir, "tools.yaml"), toolsYaml);
  return loadPolicies(dir);
}

function recordingLogger() {
  const lines: string[] = [];
  return { logger: createLogger({ level: "debug", write: (line) => lines.push(line) }), lines };
}

/** A bwrap-kind backend whose probe always fails, as on a machine without bubblewrap. */
const brokenBackend: SandboxBackend = {
  kind: "bwrap",
  confines: true,
  wrap: () => ({ command: "/nonexistent/bwrap", args: [], cwd: "/", env: {} }),
};

describe("when the sandbox is required", () => {
  it("is not, with the shipped policies", async () => {
    expect(startsProcesses(await loadPolicies(repoPolicies))).toBe(false);
  });

  it.each([
    ["the agent offers the shell", "[shell]", ""],
    [
      "a command tool is declared",
      "[files]",
      "commands:\n  - {name: t, description: d, mode: fixed, program: /usr/bin/true}\n",
    ],
    [
      "a stdio MCP server is declared",
      "[files]",
      "mcpServers:\n  - {name: m, transport: stdio, command: /usr/bin/true}\n",
    ],
  ])("is, when %s", async (_what, tools, toolsYaml) => {
    expect(startsProcesses(await policiesWith(tools, toolsYaml))).toBe(true);
  });

  it("is not, when the shell is offered and then denied", async () => {
    const dir = await mkdtemp(path.join(base, "policies-"));
    await writeFile(
      path.join(dir, "agent.yaml"),
      'name: t\ndescription: t\nversion: "1"\ntools: [shell]\ndeniedTools: [execute_command]\n',
    );
    expect(startsProcesses(await loadPolicies(dir))).toBe(false);
  });
});

describe("start-up with a sandbox that does not work", () => {
  const failing = async () => ({ ok: false as const, problem: "bwrap: not found" });

  it("stops start-up, naming the fix, when a tool starts processes", async () => {
    const { logger } = recordingLogger();
    const error = await prepareSandbox({
      kind: "bwrap",
      processTools: startsProcesses(await policiesWith("[shell]")),
      logger,
      backend: brokenBackend,
      probe: failing,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain("bwrap: not found");
    expect(message).toContain("apt-get install bubblewrap");
    expect(message).toContain("PEERGATE_SANDBOX=none");
  });

  it("starts anyway when no tool starts processes, and says so in /readyz's detail", async () => {
    const { logger, lines } = recordingLogger();
    const prepared = await prepareSandbox({
      kind: "bwrap",
      processTools: startsProcesses(await loadPolicies(repoPolicies)),
      logger,
      backend: brokenBackend,
      probe: failing,
    });
    expect(prepared.status.ok).toBe(true);
    expect(prepared.status.detail).toContain("not working");
    expect(prepared.status.detail).toContain("no tool starts processes");
    expect(lines.join("\n")).toContain("bwrap: not found");
  });

  it("probes the real launcher and finds a missing bwrap", async () => {
    const { probeSandbox } = await import("../../src/sandbox/probe.ts");
    const { createBwrapBackend } = await import("../../src/sandbox/bwrap.ts");
    const probe = await probeSandbox(createBwrapBackend({ prlimitPath: "/nonexistent/prlimit" }));
    expect(probe.ok).toBe(false);
  });
});

describe("PEERGATE_SANDBOX=none", () => {
  it("is logged as a warning and shown in /readyz's detail", async () => {
    const { logger, lines } = recordingLogger();
    const prepared = await prepareSandbox({
      kind: "none",
      processTools: startsProcesses(await policiesWith("[shell]")),
      logger,
    });
    expect(prepared.backend.confines).toBe(false);
    expect(prepared.status.detail).toContain("PEERGATE_SANDBOX=none");
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.level === "warn");
    expect(warning?.msg ?? warning?.message ?? JSON.stringify(warning)).toContain("NOT confined");
  });

  it("must be chosen: the default is bwrap and anything else is refused", () => {
    expect(loadConfig({}, "/srv/app").sandbox).toBe("bwrap");
    expect(loadConfig({ PEERGATE_SANDBOX: "none" }, "/srv/app").sandbox).toBe("none");
    expect(() => loadConfig({ PEERGATE_SANDBOX: "off" }, "/srv/app")).toThrow(
      /PEERGATE_SANDBOX="off": expected bwrap .* or none/,
    );
  });
});

describe("the workspace's place", () => {
  it("defaults to ./workspace, beside the data directory, not in it", () => {
    const config = loadConfig({}, "/srv/app");
    expect(config.workspace).toBe("/srv/app/workspace");
    expect(config.dataDir).toBe("/srv/app/.peergate");
  });

  it.each([
    [{ PEERGATE_WORKSPACE: "/srv/app/.peergate/workspace" }, /inside the data directory/],
    [{ PEERGATE_WORKSPACE: "/srv/app/.peergate" }, /inside the data directory/],
    [{ PEERGATE_WORKSPACE: "/srv" }, /PEERGATE_DATA_DIR=.* is inside the workspace/],
    [{ PEERGATE_DATA_DIR: "workspace/.peergate" }, /is inside the workspace/],
  ])("refuses %j, naming the fix", (env, message) => {
    expect(() => loadConfig(env, "/srv/app")).toThrow(message);
    expect(() => loadConfig(env, "/srv/app")).toThrow(/set PEERGATE_/);
  });

  it("accepts siblings whose names share a prefix", () => {
    expect(
      loadConfig({ PEERGATE_WORKSPACE: "/srv/app/.peergate-work" }, "/srv/app").workspace,
    ).toBe("/srv/app/.peergate-work");
  });
});

describe("envAllowlist in the policy files", () => {
  it.each(["SSH_AUTH_SOCK", "PEERGATE_ADMIN_TOKEN", "DATABASE_URL", "OPENAI_API_KEY", "A-B"])(
    "refuses %s in tools.yaml, naming the file, the field and the fix",
    (name) => {
      const error = (() => {
        try {
          parseToolsPolicy(
            `commands:\n  - {name: t, description: d, mode: fixed, program: /usr/bin/true, envAllowlist: [${name}]}\n`,
            "/etc/pg/tools.yaml",
            builtinDescriptors,
          );
        } catch (e) {
          return e as ConfigError;
        }
        throw new Error("expected a ConfigError");
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toContain("/etc/pg/tools.yaml");
      expect(error.message).toContain("envAllowlist");
      expect(error.message).toContain(name);
      expect(error.message).toContain("remove it from envAllowlist");
    },
  );

  it("accepts ordinary names agent-wide, per tool and per stdio MCP server", () => {
    const agent = parseAgentPolicy(
      'name: t\ndescription: t\nversion: "1"\nenvAllowlist: [GITHUB_TOKEN, npm_config_cache]\n',
      "agent.yaml",
    );
    expect(agent.envAllowlist).toEqual(["GITHUB_TOKEN", "npm_config_cache"]);
    const tools = parseToolsPolicy(
      "commands:\n  - {name: t, description: d, mode: fixed, program: /usr/bin/true, envAllowlist: [GOPATH], limits: {processes: 8}}\nmcpServers:\n  - {name: m, transport: stdio, command: /usr/bin/true, envAllowlist: [NODE_OPTIONS]}\n",
      "tools.yaml",
      builtinDescriptors,
    );
    expect(tools.commands[0]?.envAllowlist).toEqual(["GOPATH"]);
    expect(tools.commands[0]?.limits).toEqual({ processes: 8 });
  });

  it("refuses a bad limit with the expectation", () => {
    expect(() =>
      parseToolsPolicy(
        "commands:\n  - {name: t, description: d, mode: fixed, program: /usr/bin/true, limits: {processes: 0}}\n",
        "tools.yaml",
        builtinDescriptors,
      ),
    ).toThrow(/processes, a whole number from 1/);
  });
});

describe("a process's environment", () => {
  const parent = {
    PATH: "/usr/bin",
    LANG: "C.UTF-8",
    LC_TIME: "C",
    TERM: "xterm",
    TZ: "UTC",
    HOME: "/root",
    USER: "root",
    GITHUB_TOKEN: "t",
    DATABASE_URL: "postgres://u:p@h/d",
    HARMLESS: "x",
    SSH_AUTH_SOCK: "/s",
  };

  it("is the base plus listed names that exist, never a refused name", () => {
    expect(
      scrubEnvironment(parent, ["GITHUB_TOKEN", "MISSING", "DATABASE_URL", "SSH_AUTH_SOCK"]),
    ).toEqual({
      PATH: "/usr/bin",
      LANG: "C.UTF-8",
      LC_TIME: "C",
      TERM: "xterm",
      TZ: "UTC",
      GITHUB_TOKEN: "t",
    });
  });

  it("binds no read-only path of the workspace: a symlink a command left there is not followed", async () => {
    const workspace = await mkdtemp(path.join(base, "ws-"));
    const outside = path.join(base, `host-secret-${path.basename(workspace)}`);
    await writeFile(outside, "secret");
    const program = path.join(workspace, "tool");
    await symlink(outside, program);
    const args = bwrapArguments(
      {
        argv: [program],
        workspace,
        cwd: workspace,
        env: {},
        egress: false,
        limits: defaultSandboxLimits,
        readOnlyPaths: [program, outside],
      },
      "/staged-etc",
    );
    const binds = args.flatMap((arg, i) => (arg === "--ro-bind" ? [args[i + 1]] : []));
    expect(binds).not.toContain(program);
    // A program of the operator's outside the workspace is still bound.
    expect(binds).toContain(outside);
  });

  it("is passed to bwrap as --setenv after --clearenv, with the sandbox's HOME", () => {
    const args = bwrapArguments(
      {
        argv: ["true"],
        workspace: "/w",
        cwd: "/w",
        env: { PATH: "/usr/bin", A: "1" },
        egress: false,
        limits: defaultSandboxLimits,
      },
      "/staged-etc",
    );
    const clear = args.indexOf("--clearenv");
    expect(clear).toBeGreaterThan(-1);
    expect(args.slice(clear + 1)).toEqual([
      "--setenv",
      "HOME",
      "/tmp",
      "--setenv",
      "PATH",
      "/usr/bin",
      "--setenv",
      "A",
      "1",
    ]);
    expect(args).toContain("--unshare-net");
    expect(args).toContain("--die-with-parent");
    expect(args).toContain("--new-session");
  });

  it("binds a declared program read-only, but never a directory nor the data dir", async () => {
    const dataDir = path.join(base, "data");
    const script = path.join(base, "tool.sh");
    const inData = path.join(dataDir, "admin-token");
    await mkdir(dataDir, { recursive: true });
    await writeFile(script, "#!/bin/sh\n");
    await writeFile(inData, "token");
    const args = bwrapArguments(
      {
        argv: ["/bin/sh", script],
        workspace: "/w",
        cwd: "/w",
        env: {},
        egress: false,
        limits: defaultSandboxLimits,
        readOnlyPaths: [script, "/", base, inData, "/usr/bin/sh"],
      },
      "/staged-etc",
      [dataDir],
    );
    const bound = args.flatMap((a, i) => (a === "--ro-bind" ? [args[i + 1]] : []));
    expect(bound).toEqual(["/usr", "/proc/sys", "/staged-etc", script]);
  });

  it("the none backend runs the program itself, with exactly the given environment", () => {
    const command = createNoneBackend().wrap({
      argv: ["ls", "-l"],
      workspace: "/w",
      cwd: "/w/sub",
      env: { PATH: "/usr/bin" },
      egress: true,
      limits: defaultSandboxLimits,
    });
    expect(command).toEqual({
      command: "ls",
      args: ["-l"],
      cwd: "/w/sub",
      env: { HOME: "/w", PATH: "/usr/bin" },
    });
  });
});

describe("createRedactor", () => {
  const redactor = createRedactor(["sk-live-0123456789", "short", undefined, "p@ss word!"]);

  it("replaces every occurrence of every secret, however it is surrounded", () => {
    expect(redactor.redact("a sk-live-0123456789b\nsk-live-0123456789 p@ss word!")).toBe(
      "a [redacted]b\n[redacted] [redacted]",
    );
  });

  it("ignores values too short to be secrets", () => {
    expect(redactor.size).toBe(2);
    expect(redactor.redact("short")).toBe("short");
  });

  it("redacts the start of a secret where output was cut", () => {
    expect(redactor.redact("tail sk-live-01", { cut: true })).toBe("tail [redacted]");
    expect(redactor.redact("tail sk-live-01")).toBe("tail sk-live-01");
  });

  it("finds the password of a database URL, encoded or not", () => {
    expect(databaseUrlSecrets("postgres://user:s%40cret-pass@db/peergate")).toEqual([
      "s@cret-pass",
      "s%40cret-pass",
    ]);
    expect(databaseUrlSecrets("postgres://db/peergate")).toEqual([]);
    expect(databaseUrlSecrets(undefined)).toEqual([]);
  });
});
