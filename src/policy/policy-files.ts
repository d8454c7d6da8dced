// The operator's policy files, `agent.yaml` (the served agent) and `tools.yaml` (declared command
// tools and MCP servers), parsed from text and validated with zod. Pure: the loader reads the
// files and hashes them. A bad file stops start-up with every problem listed, each naming the
// file, the path inside it, the value found and what was expected (these are the only policy
// functions that throw, and only ConfigError).
//
// Over 500 lines for now, and not on purpose: the agent.yaml and tools.yaml schemas (with the
// declared-tools language) share field helpers here; one file per policy file is the split due.
//
// Unknown fields are errors, not ignored: a misspelt `deniedtools` must not silently deny nothing.
// The MCP per-tool metadata map is read key by key (never through a zod record, which drops a
// `__proto__` key) so every tool name a server declares is validated like any other.
import { parseDocument } from "yaml";
import { z } from "zod";
import { ConfigError, type Problem } from "../errors.ts";
import { parseAllowEntry } from "./command-key.ts";
import { refuseEnvName } from "./env-names.ts";
import { isToolOverride, toolOverrideValues } from "./overrides.ts";
import { quoteUntrusted } from "./quote.ts";
import { describeCodeRunner } from "./shell-programs.ts";
import {
  checkToolNames,
  describeTool,
  disclosureLevels,
  foldToolName,
  type Inventory,
  isToolCategory,
  listToolNames,
  riskLevels,
  type ToolDescriptor,
  toolCategories,
  toolNamePattern,
} from "./tools.ts";
import { compileUrlGrants } from "./url-grants.ts";

const expectName = "a tool name of 1 to 128 characters from A-Z a-z 0-9 _ . -";
const expectServerName = "an MCP server name of 1 to 64 characters from A-Z a-z 0-9 _ - (no dots)";
const serverNamePattern = /^[A-Za-z0-9_-]{1,64}$/;
const unknownFieldMessage = "a known field name (check the spelling)";

function isMapping(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const text = (what: string) => z.string({ error: what }).trim().min(1, { error: what });

/** A YAML key with nothing after it reads as null; for lists and maps that means "none". */
const list = <T extends z.ZodType>(item: T, what: string) =>
  z.preprocess((v) => (v === null ? undefined : v), z.array(item, { error: what }).default([]));

const toolName = z.string({ error: expectName }).regex(toolNamePattern, { error: expectName });

const metadataFields = {
  risk: z.enum(riskLevels, { error: `one of ${riskLevels.join(", ")}` }).optional(),
  disclosure: z
    .enum(disclosureLevels, { error: `one of ${disclosureLevels.join(", ")}` })
    .optional(),
  egress: z.boolean({ error: "true or false" }).optional(),
};

const timeoutMs = z
  .number({ error: "milliseconds, a whole number from 100 to 3600000" })
  .int({ error: "milliseconds, a whole number from 100 to 3600000" })
  .min(100, { error: "milliseconds, a whole number from 100 to 3600000" })
  .max(3_600_000, { error: "milliseconds, a whole number from 100 to 3600000" })
  .optional();

/** Variable names a process may see beyond the minimal base; each must exist to be passed. */
const envAllowlist = list(
  z.string({ error: "an environment variable name" }).superRefine((name, ctx) => {
    const why = refuseEnvName(name);
    if (why !== undefined) {
      ctx.addIssue({
        code: "custom",
        message: `a variable name a process may see (${JSON.stringify(name)}: ${why}; remove it from envAllowlist)`,
      });
    }
  }),
  "a list of environment variable names",
).optional();

const limit = (what: string, max: number) =>
  z
    .number({ error: `${what}, a whole number from 1 to ${max}` })
    .int({ error: `${what}, a whole number from 1 to ${max}` })
    .min(1, { error: `${what}, a whole number from 1 to ${max}` })
    .max(max, { error: `${what}, a whole number from 1 to ${max}` })
    .optional();

/** Resource limits of the tool's sandboxed processes (defaults in src/sandbox/types.ts). */
const sandboxLimits = z
  .strictObject(
    {
      processes: limit("processes", 65_536),
      cpuSeconds: limit("CPU seconds", 86_400),
      fileSizeBytes: limit("bytes", 2 ** 50),
      memoryBytes: limit("bytes", 2 ** 50),
    },
    { error: "a mapping with processes, cpuSeconds, fileSizeBytes and/or memoryBytes" },
  )
  .optional();

const processFields = { envAllowlist, limits: sandboxLimits };

const sha256Pin = z
  .string({ error: "the program's SHA-256, 64 lowercase hex digits (quoted)" })
  .regex(/^[0-9a-f]{64}$/, { error: "the program's SHA-256, 64 lowercase hex digits (quoted)" });

const count = (what: string, max: number) =>
  z
    .number({ error: `${what}, a whole number from 0 to ${max}` })
    .int({ error: `${what}, a whole number from 0 to ${max}` })
    .min(0, { error: `${what}, a whole number from 0 to ${max}` })
    .max(max, { error: `${what}, a whole number from 0 to ${max}` });

/** Hard ceilings of the declaration language; a declaration may only narrow them. */
export const declaredToolBounds = {
  maxCount: 256,
  maxItemBytes: 64 * 1024,
  maxStdinBytes: 16 * 1024 * 1024,
  maxOutputBytes: 4 * 1024 * 1024,
  maxSourceBytes: 16 * 1024 * 1024,
  maxRationaleBytes: 4096,
  maxCommandBytes: 64 * 1024,
};

/** What the model may append: `none`, `optional` or `required`, with count and size bounds. */
const argumentsContract = z
  .strictObject(
    {
      mode: z.enum(["none", "optional", "required"], { error: "none, optional or required" }),
      minCount: count("the fewest arguments", declaredToolBounds.maxCount).optional(),
      maxCount: count("the most arguments", declaredToolBounds.maxCount).optional(),
      maxItemBytes: limit("bytes per argument", declaredToolBounds.maxItemBytes),
    },
    { error: "a mapping with mode (none, optional, required), minCount, maxCount, maxItemBytes" },
  )
  .superRefine((c, ctx) => {
    if (c.minCount !== undefined && c.maxCount !== undefined && c.minCount > c.maxCount) {
      ctx.addIssue({ code: "custom", path: ["minCount"], message: "minCount at most maxCount" });
    }
    if (c.mode === "none" && (c.minCount ?? 0) > 0) {
      ctx.addIssue({ code: "custom", path: ["minCount"], message: "no minCount with mode none" });
    }
  })
  .optional();

/** One declared argv element: a literal, a secret from the environment, or a workspace path. */
const argSource = z.union(
  [
    z.string({ error: "an argument string" }),
    z.strictObject({ arg: z.string({ error: "an argument string" }) }),
    z.strictObject({
      secretArg: z.strictObject(
        {
          env: z
            .string({ error: "an environment variable name" })
            .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
              error: "an environment variable name",
            }),
          prefix: z.string({ error: "a prefix string" }).default(""),
        },
        { error: "a mapping with env (a variable name) and prefix" },
      ),
    }),
    z.strictObject({
      pathArg: text("a path relative to the workspace (or absolute, inside it)"),
    }),
  ],
  { error: "an argument: a string, {arg: text}, {secretArg: {env, prefix}} or {pathArg: path}" },
);

/** Contracts every declared command tool shares (the reference's common attributes). */
const commonFields = {
  name: toolName,
  description: text("a description the model reads (not empty)"),
  arguments: argumentsContract,
  stdin: z
    .enum(["none", "optional", "required"], { error: "none, optional or required" })
    .optional(),
  maxStdinBytes: limit("bytes of stdin", declaredToolBounds.maxStdinBytes),
  rationale: z
    .enum(["none", "optional", "required"], { error: "none, optional or required" })
    .optional(),
  result: z
    .enum(["combined", "stdout", "structured"], { error: "combined, stdout or structured" })
    .optional(),
  nonzero: z.enum(["result", "error"], { error: "result or error" }).optional(),
  stream: z.enum(["finalized", "sanitized"], { error: "finalized or sanitized" }).optional(),
  maxOutputBytes: limit("bytes per output stream", declaredToolBounds.maxOutputBytes),
  /** The model's arguments may be options (start with `-`); default: refused unless after `--`. */
  allowOptions: z.boolean({ error: "true or false" }).optional(),
  timeoutMs,
  ...metadataFields,
  ...processFields,
};

const programRef = text("a program: a name on PATH, an absolute path, or an executables id");

const fixedCommandSchema = z.strictObject({
  ...commonFields,
  mode: z.literal("fixed"),
  program: programRef,
  args: list(argSource, "a list of arguments"),
  sha256: sha256Pin.optional(),
});

const structuredCommandSchema = z.strictObject({
  ...commonFields,
  mode: z.literal("structured"),
  programs: z
    .array(programRef, { error: "a list of the programs the model may run" })
    .min(1, { error: "a list of at least one program the model may run" }),
});

const chainCommandSchema = z.strictObject({
  ...commonFields,
  mode: z.literal("chain"),
  /** The programs a stage may name; absent: any program on PATH (each stage is still checked). */
  programs: z
    .array(programRef, { error: "a list of the programs a stage may run" })
    .min(1, { error: "a list of at least one program, or leave programs out" })
    .optional(),
  /** A pipeline's status is its last failing stage's (true) or its last stage's (false, default). */
  pipefail: z.boolean({ error: "true or false" }).optional(),
  maxCommandBytes: limit("bytes of command text", declaredToolBounds.maxCommandBytes),
});

const scriptCommandSchema = z
  .strictObject({
    ...commonFields,
    mode: z.literal("script"),
    script: text("the script file: absolute, or relative to the workspace"),
    /** The program that reads the script (`/bin/sh`), or leave it out with `executable: true`. */
    interpreter: programRef.optional(),
    executable: z.boolean({ error: "true or false" }).optional(),
    args: list(argSource, "a list of arguments"),
    sha256: sha256Pin.optional(),
    maxSourceBytes: limit("bytes of script", declaredToolBounds.maxSourceBytes),
  })
  .superRefine((tool, ctx) => {
    if ((tool.interpreter === undefined) === (tool.executable !== true)) {
      ctx.addIssue({
        code: "custom",
        path: ["interpreter"],
        message:
          "either an interpreter (e.g. /bin/sh) or executable: true for a script with its own #! line, not both",
      });
    }
  });

const commandToolSchema = z.discriminatedUnion(
  "mode",
  [fixedCommandSchema, structuredCommandSchema, chainCommandSchema, scriptCommandSchema],
  {
    error: (issue) =>
      isMapping(issue.input)
        ? "mode: fixed or structured, or chain or script (there is no raw mode)"
        : "a command tool: a mapping with name, description, mode, program or programs",
  },
);

/** An executable alias: tools name `id` instead of a path, and `sha256` pins the file. */
/** `${workspace}/` at the start of an executable's path: the workspace root. */
const workspacePrefix = ["$", "{workspace}/"].join("");

const executableSchema = z
  .strictObject(
    {
      id: z
        .string({ error: "an id of 1 to 64 characters from a-z A-Z 0-9 _ -" })
        .regex(/^[A-Za-z0-9_-]{1,64}$/, {
          error: "an id of 1 to 64 characters from a-z A-Z 0-9 _ -",
        }),
      path: text(`an absolute path to the program, or ${workspacePrefix}…`).refine(
        (p) => p.startsWith("/") || p.startsWith(workspacePrefix),
        {
          error: `an absolute path to the program, or ${workspacePrefix}… for one in the workspace`,
        },
      ),
      sha256: sha256Pin.optional(),
    },
    { error: "a mapping with id, path and sha256" },
  )
  .superRefine((executable, ctx) => {
    // The model can write to the workspace: a program there is only safe when pinned.
    if (executable.path.startsWith(workspacePrefix) && executable.sha256 === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["sha256"],
        message: "a sha256 pin for a program in the workspace (the model can change files there)",
      });
    }
  });

const mcpToolMetadataSchema = z.strictObject({
  description: z.string({ error: "a description" }).optional(),
  ...metadataFields,
});

export type McpToolPolicy = { readonly name: string } & z.output<typeof mcpToolMetadataSchema>;

/** Reads the per-tool metadata map key by key; a key with no value means "no metadata". */
const mcpToolMap = z.unknown().transform((raw, ctx): McpToolPolicy[] => {
  if (raw === undefined || raw === null) return [];
  if (!isMapping(raw)) {
    ctx.addIssue({ code: "custom", message: "a mapping of tool name to its metadata" });
    return z.NEVER;
  }
  const tools: McpToolPolicy[] = [];
  for (const [name, value] of Object.entries(raw as object)) {
    if (!toolNamePattern.test(name)) {
      ctx.addIssue({ code: "custom", message: expectName, path: [name] });
    }
    const parsed = mcpToolMetadataSchema.safeParse(value ?? {});
    if (!parsed.success) {
      for (const issue of parsed.error.issues)
        ctx.addIssue({ ...issue, path: [name, ...issue.path] });
      continue;
    }
    tools.push({ name, ...parsed.data });
  }
  return tools;
});

const serverName = z
  .string({ error: expectServerName })
  .regex(serverNamePattern, { error: expectServerName });

const mcpServerSchema = z.discriminatedUnion(
  "transport",
  [
    z.strictObject({
      name: serverName,
      transport: z.literal("stdio"),
      command: text("the command that starts the server"),
      args: list(z.string({ error: "an argument string" }), "a list of argument strings"),
      tools: mcpToolMap.default([]),
      ...processFields,
    }),
    z.strictObject({
      name: serverName,
      transport: z.literal("http"),
      url: z.url({ protocol: /^https?$/, error: "an http:// or https:// URL" }),
      tools: mcpToolMap.default([]),
    }),
  ],
  {
    error: (issue) =>
      isMapping(issue.input)
        ? "transport: stdio or http"
        : "an MCP server: a mapping with name, transport, and command or url",
  },
);

export const toolsPolicySchema = z.strictObject(
  {
    executables: z.preprocess(
      (v) => (v === null ? undefined : v),
      z.array(executableSchema, { error: "a list of executables (id, path, sha256)" }).optional(),
    ),
    commands: list(commandToolSchema, "a list of command tools"),
    mcpServers: list(mcpServerSchema, "a list of MCP servers"),
  },
  { error: "a mapping with executables, commands and mcpServers" },
);

export type ToolsPolicy = z.output<typeof toolsPolicySchema>;
export type CommandToolPolicy = ToolsPolicy["commands"][number];
export type ExecutablePolicy = NonNullable<ToolsPolicy["executables"]>[number];
export type ArgSourcePolicy = Extract<CommandToolPolicy, { mode: "fixed" }>["args"][number];
export type McpServerPolicy = ToolsPolicy["mcpServers"][number];

const toolEntry = z
  .string({ error: `a tool name or a category (${toolCategories.join(", ")})` })
  .refine((v) => isToolCategory(v) || toolNamePattern.test(v), {
    error: `a tool name or a category (${toolCategories.join(", ")})`,
  });

const skillSchema = z.strictObject({
  id: text("a skill id (not empty)"),
  name: text("a skill name (not empty)"),
  description: text("what the skill does (not empty)"),
  tags: list(text("a tag (not empty)"), "a list of tags"),
  examples: list(z.string({ error: "an example prompt" }), "a list of example prompts"),
});

/** Command allowlist entries (`git status`), each one or two plain words (DESIGN §10). */
const commandEntries = list(
  z.string({ error: "a command key such as git status" }),
  "a list of command keys such as git status",
).superRefine((entries, ctx) => {
  entries.forEach((entry, i) => {
    const parsed = parseAllowEntry(entry);
    if ("problem" in parsed) {
      ctx.addIssue({ code: "custom", path: [i], message: parsed.problem, input: entry });
    }
  });
});

const overrideWhat = `a mapping of tool name to ${toolOverrideValues.join(", ")}`;
/** Tool name → allow | deny | prompt, read key by key (a `__proto__` key is a tool name too). */
const toolOverrides = z.preprocess(
  (v) => (v === null ? undefined : v),
  z
    .custom<Record<string, string>>((v) => isMapping(v), { error: overrideWhat })
    .superRefine((map, ctx) => {
      for (const key of Object.keys(map)) {
        if (!toolNamePattern.test(key)) {
          ctx.addIssue({ code: "custom", path: [key], message: expectName, input: key });
        } else if (!isToolOverride(map[key])) {
          ctx.addIssue({
            code: "custom",
            path: [key],
            message: `one of ${toolOverrideValues.join(", ")}`,
            input: map[key],
          });
        }
      }
    })
    .transform((map) => Object.fromEntries(Object.entries(map)) as Record<string, string>)
    .default({}),
);

const hostList = list(z.string({ error: "a host name" }), "a list of host names");
/** web_fetch URL grants: hosts, `.suffixes`, URL prefixes; validated like a caller's. */
const urlGrantsSchema = z.preprocess(
  (v) => (v === null ? undefined : v),
  z
    .strictObject(
      { hosts: hostList, suffixes: hostList, prefixes: hostList },
      { error: "a mapping with hosts, suffixes, prefixes" },
    )
    .optional(),
);

export const agentPolicySchema = z.strictObject(
  {
    name: text("the agent's name (not empty)"),
    description: text("what the agent does (not empty)"),
    version: text('a version string such as "0.1.0" (quote it if it looks like a number)'),
    skills: list(skillSchema, "a list of skills (id, name, description, tags)").refine(
      (skills) => new Set(skills.map((s) => s.id)).size === skills.length,
      { error: "skills with distinct ids" },
    ),
    instructions: z
      .preprocess((v) => (v === null ? undefined : v), z.string({ error: "instruction text" }))
      .default(""),
    model: z.preprocess(
      (v) => (v === null || v === "" ? undefined : v),
      text("a model id such as provider:model-name").optional(),
    ),
    tools: list(toolEntry, "a list of tool names and categories"),
    deniedTools: list(toolEntry, "a list of tool names and categories"),
    /** The command risk classifier (src/runs/command-classifier.ts); its model defaults to the run's. */
    classifier: z.preprocess(
      (v) => (v === null ? undefined : v),
      z
        .strictObject(
          {
            model: z.preprocess(
              (v) => (v === null || v === "" ? undefined : v),
              text("a model id such as provider:model-name").optional(),
            ),
          },
          { error: "a mapping with model (the classifier's model id)" },
        )
        .optional(),
    ),
    envAllowlist,
    /** Command allowlist entries for every caller (united with each caller's own). */
    commands: commandEntries,
    /** Agent-wide per-tool overrides; the stricter of this and a caller's wins. */
    toolOverrides,
    /** web_fetch URL grants for every caller (united with each caller's own). */
    urlGrants: urlGrantsSchema,
    /** The operator-wide web_fetch host lists (exact hosts or `*.example.com`). */
    webFetch: z.preprocess(
      (v) => (v === null ? undefined : v),
      z
        .strictObject(
          { allowHosts: hostList, denyHosts: hostList, allowAddresses: hostList },
          { error: "a mapping with allowHosts, denyHosts, allowAddresses" },
        )
        .optional(),
    ),
  },
  { error: "a mapping with name, description, version, skills, instructions, tools, deniedTools" },
);

export type AgentPolicy = z.output<typeof agentPolicySchema>;

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (typeof segment === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)) {
      out += out === "" ? segment : `.${segment}`;
    } else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out === "" ? "(top level)" : out;
}

/** The value at `path` in the raw parsed YAML, following own properties only. */
function findValue(raw: unknown, path: readonly PropertyKey[]): unknown {
  let node = raw;
  for (const segment of path) {
    if (node === null || typeof node !== "object") return undefined;
    const key = typeof segment === "number" ? segment : String(segment);
    if (!Object.hasOwn(node, key)) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

function describeValue(value: unknown): string {
  return value === undefined ? "(missing)" : quoteUntrusted(value, 80);
}

function makeProblem(fileName: string, path: string, value: unknown, expected: string): Problem {
  return {
    field: `${fileName}: ${path}`,
    value,
    expected,
    message: `${fileName}: ${path} = ${describeValue(value)}: expected ${expected}`,
  };
}

function failWith(fileName: string, problems: readonly Problem[]): never {
  throw new ConfigError(problems, `peergate cannot start: bad policy file ${fileName}`);
}

/** YAML text to a plain value; syntax errors (and duplicate keys) become problems with positions. */
function readYaml(text: string, fileName: string): unknown {
  const document = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (document.errors.length > 0) {
    failWith(
      fileName,
      document.errors.map((error) => {
        const at = error.linePos?.[0];
        const where = at ? `line ${at.line}, column ${at.col}` : "(somewhere)";
        // Pretty messages end with " at line L, column C:" and a snippet; keep the sentence.
        const message = (error.message.split("\n")[0] ?? "").replace(
          / at line \d+, column \d+:?$/,
          "",
        );
        return {
          field: `${fileName}: ${where}`,
          expected: "valid YAML",
          message: `${fileName}: ${where}: not valid YAML: ${message}`,
        };
      }),
    );
  }
  return document.toJS({ maxAliasCount: 100 });
}

function parseWith<T extends z.ZodType>(schema: T, text: string, fileName: string): z.output<T> {
  const raw = readYaml(text, fileName) ?? {};
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const problems: Problem[] = [];
  for (const issue of parsed.error.issues) {
    const keys = issue.code === "unrecognized_keys" ? issue.keys : [undefined];
    for (const key of keys) {
      const path = key === undefined ? issue.path : [...issue.path, key];
      problems.push(
        makeProblem(
          fileName,
          formatPath(path),
          findValue(raw, path),
          key === undefined ? issue.message : unknownFieldMessage,
        ),
      );
    }
  }
  failWith(fileName, problems);
}

/** Parses agent.yaml text. Throws ConfigError listing every problem. */
export function parseAgentPolicy(text: string, fileName: string): AgentPolicy {
  const policy = parseWith(agentPolicySchema, text, fileName);
  if (policy.urlGrants !== undefined) {
    const compiled = compileUrlGrants(policy.urlGrants);
    if (!compiled.ok) {
      throw new ConfigError(
        compiled.problems.map((p) => ({
          ...p,
          field: `urlGrants.${p.field ?? ""}`,
          message: `${fileName}: urlGrants.${p.message}`,
        })),
      );
    }
  }
  return policy;
}

/**
 * Parses tools.yaml text, including the name rules across the whole inventory: no declared name
 * may equal a built-in's name, alias or hidden half up to case or NFKC, nor another declared one.
 * `builtins` are the built-in descriptors (src/tools/ declares them; policy only receives them).
 * Throws ConfigError listing every problem.
 */
export function parseToolsPolicy(
  text: string,
  fileName: string,
  builtins: readonly ToolDescriptor[],
): ToolsPolicy {
  const policy = parseWith(toolsPolicySchema, text, fileName);
  const entries: { name: string; where: string }[] = [];
  for (const tool of builtins) {
    for (const name of listToolNames(tool)) {
      const what =
        name === tool.name ? "tool" : name === tool.executeHalf ? "hidden half" : "alias";
      entries.push({
        name,
        where: `built-in ${what} ${name}${name === tool.name ? "" : ` of ${tool.name}`}`,
      });
    }
  }
  for (const [i, command] of policy.commands.entries()) {
    entries.push({ name: command.name, where: `commands[${i}].name` });
  }
  const servers: { name: string; where: string }[] = [];
  for (const [i, server] of policy.mcpServers.entries()) {
    servers.push({ name: server.name, where: `mcpServers[${i}].name` });
    for (const tool of server.tools) {
      entries.push({
        name: `${server.name}.${tool.name}`,
        where: formatPath(["mcpServers", i, "tools", tool.name]),
      });
    }
  }
  const problems = [
    ...checkExecutables(policy).map((p) => makeProblem(fileName, p.where, p.value, p.message)),
    ...checkToolNames(entries).map((p) => makeProblem(fileName, p.where, p.name, p.message)),
    ...checkServerNames(servers).map((p) => makeProblem(fileName, p.where, p.name, p.message)),
    ...checkReadOnlyCodeRunners(policy).map((p) =>
      makeProblem(fileName, p.where, "read-only", p.message),
    ),
  ];
  // Built-ins come first, so a collision is always reported at the operator's declaration.
  if (problems.length > 0) failWith(fileName, problems);
  return policy;
}

/**
 * A shell, an interpreter or a wrapper declared `read-only` runs whatever code the model's
 * arguments give it, unless the declaration already fixes that code (a `fixed` tool whose `args`
 * hold the script or the script file): then the model's arguments are only the code's operands.
 */
function checkReadOnlyCodeRunners(policy: ToolsPolicy) {
  const problems: { where: string; message: string }[] = [];
  for (const [i, command] of policy.commands.entries()) {
    if (command.risk !== "read-only") continue;
    const literal = (args: readonly ArgSourcePolicy[]) =>
      args.map((a) => (typeof a === "string" ? a : "arg" in a ? a.arg : ""));
    const reasons =
      command.mode === "fixed"
        ? [describeCodeRunner([command.program, ...literal(command.args)])]
        : command.mode === "script"
          ? []
          : command.programs === undefined
            ? ["a chain without a programs list runs any program on PATH"]
            : command.programs.map((program) => describeCodeRunner([program]));
    const reason = reasons.find((r) => r !== undefined);
    if (reason === undefined) continue;
    const fix =
      command.mode === "fixed"
        ? 'put the script in args (e.g. args: [-c, "git log -n 5"]) or declare risk: high-risk'
        : "declare risk: high-risk, or a fixed tool whose args hold the script";
    problems.push({
      where: `commands[${i}].risk`,
      message: `not read-only for tool ${command.name}: ${reason}, and the model chooses its arguments; ${fix}`,
    });
  }
  return problems;
}

/** Executable ids are unique; a tool's sha256 pin and an alias's pin do not both apply. */
function checkExecutables(policy: ToolsPolicy) {
  const problems: { where: string; value: unknown; message: string }[] = [];
  const ids = new Set<string>();
  for (const [i, executable] of (policy.executables ?? []).entries()) {
    if (ids.has(executable.id)) {
      problems.push({
        where: `executables[${i}].id`,
        value: executable.id,
        message: "an id no other executable has (rename one of them)",
      });
    }
    ids.add(executable.id);
  }
  for (const [i, command] of policy.commands.entries()) {
    if ((command.mode === "fixed" || command.mode === "script") && command.sha256 !== undefined) {
      const program = command.mode === "fixed" ? command.program : undefined;
      if (program !== undefined && ids.has(program)) {
        problems.push({
          where: `commands[${i}].sha256`,
          value: command.sha256,
          message: `no sha256 on a tool whose program is the executable ${program} (pin it there)`,
        });
      }
    }
  }
  return problems;
}

function checkServerNames(servers: readonly { name: string; where: string }[]) {
  const seen = new Map<string, string>();
  const problems: { where: string; name: string; message: string }[] = [];
  for (const { name, where } of servers) {
    const folded = foldToolName(name);
    const earlier = seen.get(folded);
    if (earlier === undefined) seen.set(folded, where);
    else {
      problems.push({
        where,
        name,
        message: `a server name not already used by ${earlier} (names may not differ only by case)`,
      });
    }
  }
  return problems;
}

/** Every tool the policy files declare: the built-ins, then command tools, then MCP tools. */
export function listPolicyTools(
  policy: ToolsPolicy,
  builtins: readonly ToolDescriptor[],
): ToolDescriptor[] {
  const tools: ToolDescriptor[] = [...builtins];
  for (const command of policy.commands) {
    tools.push(
      describeTool({
        name: command.name,
        category: "custom",
        description: command.description,
        risk: command.risk,
        disclosure: command.disclosure,
        egress: command.egress,
      }),
    );
  }
  for (const server of policy.mcpServers) {
    for (const tool of server.tools) {
      tools.push(
        describeTool({
          name: `${server.name}.${tool.name}`,
          category: "mcp",
          description: tool.description,
          risk: tool.risk,
          disclosure: tool.disclosure,
          egress: tool.egress,
        }),
      );
    }
  }
  return tools;
}

/**
 * Checks agent.yaml's tool entries against the inventory: every name must exist (a misspelt
 * denial would protect nothing), and `tools` may not name a hidden execute half (only the approval
 * path runs those). Throws ConfigError listing every problem.
 */
export function validateAgentTools(
  agent: AgentPolicy,
  inventory: Inventory,
  fileName: string,
): void {
  let folded: Map<string, string> | undefined;
  const suggest = (name: string): string => {
    folded ??= new Map([...inventory.names.keys()].map((n) => [foldToolName(n), n]));
    const match = folded.get(foldToolName(name));
    return match === undefined ? "" : ` (names are case-sensitive: did you mean ${match}?)`;
  };
  const problems: Problem[] = [];
  const expected = `a tool in the inventory (peergate tools lists them) or a category (${toolCategories.join(", ")})`;
  for (const field of ["tools", "deniedTools"] as const) {
    for (const [i, entry] of agent[field].entries()) {
      if (isToolCategory(entry)) continue;
      const found = inventory.names.get(entry);
      if (found === undefined) {
        problems.push(
          makeProblem(fileName, `${field}[${i}]`, entry, `${expected}${suggest(entry)}`),
        );
      } else if (field === "tools" && found.kind === "execute-half") {
        problems.push(
          makeProblem(
            fileName,
            `${field}[${i}]`,
            entry,
            `not a hidden execute half: name ${found.tool.name}, which brings its half with it`,
          ),
        );
      }
    }
  }
  if (problems.length > 0) failWith(fileName, problems);
}
