// `tools.yaml`: the declared command tools (the declaration language of docs/declared-tools.md:
// four modes, argument contracts, executables pinned by SHA-256) and the MCP servers
// (mcp-servers-policy.ts), parsed and checked across the whole inventory: no declared name may
// shadow a built-in's name, alias or hidden half, nor another declared one.
import { z } from "zod";
import { isShellOrInterpreter, programName } from "../shell/programs.ts";
import { wrappers } from "../shell/runs.ts";
import { describeCodeRunner } from "../shell/walk.ts";
import { checkServerNames, type McpToolPolicy, mcpServerSchema } from "./mcp-servers-policy.ts";
import {
  failWith,
  formatPath,
  isMapping,
  limit,
  list,
  makeProblem,
  metadataFields,
  parseWith,
  processFields,
  text,
  timeoutMs,
  toolName,
} from "./policy-fields.ts";
import { checkToolNames, describeTool, listToolNames, type ToolDescriptor } from "./tools.ts";

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
  /**
   * The chain may run shells, interpreters or programs that run a command (`sh -c`, `xargs`):
   * each stage's code is then read by the risk floor and a flagged stage asks an operator.
   * Without it, a stage that would run code is refused.
   */
  runsCode: z.boolean({ error: "true or false" }).optional(),
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
export type { McpToolPolicy };
export type McpServerPolicy = ToolsPolicy["mcpServers"][number];

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
    ...checkChainCodeRunners(policy).map((p) => makeProblem(fileName, p.where, p.value, p.message)),
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

/** Programs that run code a chain stage hands them: shells, interpreters and wrappers. */
function runsCodeItself(program: string): boolean {
  const name = programName(program);
  return (
    isShellOrInterpreter(name) ||
    Object.hasOwn(wrappers, name) ||
    ["su", "runuser", "script", "parallel", "eval", "source", "."].includes(name)
  );
}

/**
 * A chain promises no shell: one that may run a shell, an interpreter or a wrapper says so with
 * `runsCode: true`, and then declares no risk below `unknown`, so that under every risk policy
 * each stage is gated, and a stage the floor flags asks an operator as execute_command's would.
 */
function checkChainCodeRunners(policy: ToolsPolicy) {
  const problems: { where: string; value: unknown; message: string }[] = [];
  const paths = new Map((policy.executables ?? []).map((e) => [e.id, e.path]));
  for (const [i, command] of policy.commands.entries()) {
    if (command.mode !== "chain") continue;
    if (command.runsCode === true) {
      if (command.risk !== undefined && command.risk !== "unknown") {
        problems.push({
          where: `commands[${i}].risk`,
          value: command.risk,
          message: `unknown or left out for tool ${command.name}: a chain with runsCode: true runs code like execute_command, so each stage asks under every risk policy (remove risk, or remove runsCode and the programs that run code)`,
        });
      }
      continue;
    }
    if (command.programs === undefined) {
      problems.push({
        where: `commands[${i}].programs`,
        value: undefined,
        message: `a list of the programs a stage may run for tool ${command.name}: without one a stage may run any program on PATH, shells included (list the programs, or declare runsCode: true to allow code)`,
      });
      continue;
    }
    for (const [j, program] of command.programs.entries()) {
      if (!runsCodeItself(paths.get(program) ?? program)) continue;
      problems.push({
        where: `commands[${i}].programs[${j}]`,
        value: program,
        message: `a program that runs no code for tool ${command.name}: ${program} runs a shell script, inline code or another command, and a chain promises no shell (remove it, or declare runsCode: true so each stage's code is read by the risk floor and asks an operator)`,
      });
    }
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
