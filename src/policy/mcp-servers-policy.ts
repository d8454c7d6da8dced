// The `mcpServers` of tools.yaml: each server's name, transport (stdio with its command and
// process limits, or http with its URL), the per-tool metadata it declares, and how its running
// instances live (src/tools/declared/mcp-instances.ts): one per caller or per run (`scope`), closed
// after `idleTimeoutMs` idle, at most `maxInstances` at once. The metadata map
// is read key by key (never through a zod record, which drops a `__proto__` key) so every tool
// name a server declares is validated like any other.
import { z } from "zod";
import {
  expectName,
  isMapping,
  limit,
  list,
  metadataFields,
  processFields,
  text,
  timeoutMs,
} from "./policy-fields.ts";
import { foldToolName, toolNamePattern } from "./tools.ts";

const expectServerName = "an MCP server name of 1 to 64 characters from A-Z a-z 0-9 _ - (no dots)";
const serverNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

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

const expectScope =
  "caller (one instance per caller, the default) or run (a fresh instance for each run, for a server that keeps state a run must not inherit)";

/** How a server's instances live; defaults in src/tools/declared/mcp-instances.ts. */
const instanceFields = {
  scope: z.enum(["caller", "run"], { error: expectScope }).default("caller"),
  idleTimeoutMs: timeoutMs,
  maxInstances: limit("instances at once", 1024),
};

const serverName = z
  .string({ error: expectServerName })
  .regex(serverNamePattern, { error: expectServerName });

export const mcpServerSchema = z.discriminatedUnion(
  "transport",
  [
    z.strictObject({
      name: serverName,
      transport: z.literal("stdio"),
      command: text("the command that starts the server"),
      args: list(z.string({ error: "an argument string" }), "a list of argument strings"),
      tools: mcpToolMap.default([]),
      ...processFields,
      ...instanceFields,
    }),
    z.strictObject({
      name: serverName,
      transport: z.literal("http"),
      url: z.url({ protocol: /^https?$/, error: "an http:// or https:// URL" }),
      tools: mcpToolMap.default([]),
      ...instanceFields,
    }),
  ],
  {
    error: (issue) =>
      isMapping(issue.input)
        ? "transport: stdio or http"
        : "an MCP server: a mapping with name, transport, and command or url",
  },
);

export function checkServerNames(servers: readonly { name: string; where: string }[]) {
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
