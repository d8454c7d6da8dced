// `agent.yaml`: the served agent (name, skills, instructions, model), its tool entries and
// denials, and the agent-wide controls (command allowlist, per-tool overrides, URL grants, the
// web_fetch host lists), parsed; then its tool entries are checked against the inventory.
import { z } from "zod";
import { ConfigError, type Problem } from "../errors.ts";
import { parseAllowEntry } from "../shell/command-key.ts";
import { isToolOverride, toolOverrideValues } from "./overrides.ts";
import {
  envAllowlist,
  expectName,
  failWith,
  isMapping,
  list,
  makeProblem,
  parseWith,
  text,
} from "./policy-fields.ts";
import {
  foldToolName,
  type Inventory,
  isToolCategory,
  toolCategories,
  toolNamePattern,
} from "./tools.ts";
import { compileUrlGrants } from "./url-grants.ts";

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
    /** The command risk classifier (src/gate/command-classifier.ts); its model defaults to the run's. */
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
