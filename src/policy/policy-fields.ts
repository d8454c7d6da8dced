// What agent.yaml and tools.yaml share: YAML text read into a plain value (syntax errors and
// duplicate keys become problems with positions), a zod schema applied with every problem named
// by file, path inside it, value found and what was expected (unknown fields are errors: a
// misspelt `deniedtools` must not silently deny nothing), and the field helpers both files use.
import { parseDocument } from "yaml";
import { z } from "zod";
import { ConfigError, type Problem } from "../errors.ts";
import { plainIssueWords } from "../plain-issue.ts";
import { refuseEnvName } from "./env-names.ts";
import { quoteUntrusted } from "./quote.ts";
import { disclosureLevels, riskLevels, toolNamePattern } from "./tools.ts";

export const expectName = "a tool name of 1 to 128 characters from A-Z a-z 0-9 _ . -";
export const unknownFieldMessage = "a known field name (check the spelling)";

export function isMapping(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export const text = (what: string) => z.string({ error: what }).trim().min(1, { error: what });

/** A YAML key with nothing after it reads as null; for lists and maps that means "none". */
export const list = <T extends z.ZodType>(item: T, what: string) =>
  z.preprocess((v) => (v === null ? undefined : v), z.array(item, { error: what }).default([]));

/** Variable names a process may see beyond the minimal base; each must exist to be passed. */
export const envAllowlist = list(
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

export function formatPath(path: readonly PropertyKey[]): string {
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
export function findValue(raw: unknown, path: readonly PropertyKey[]): unknown {
  let node = raw;
  for (const segment of path) {
    if (node === null || typeof node !== "object") return undefined;
    const key = typeof segment === "number" ? segment : String(segment);
    if (!Object.hasOwn(node, key)) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

export function describeValue(value: unknown): string {
  return value === undefined ? "(missing)" : quoteUntrusted(value, 80);
}

export function makeProblem(
  fileName: string,
  path: string,
  value: unknown,
  expected: string,
): Problem {
  return {
    field: `${fileName}: ${path}`,
    value,
    expected,
    message: `${fileName}: ${path} = ${describeValue(value)}: expected ${expected}`,
  };
}

export function failWith(fileName: string, problems: readonly Problem[]): never {
  throw new ConfigError(problems, `peergate cannot start: bad policy file ${fileName}`);
}

/** YAML text to a plain value; syntax errors (and duplicate keys) become problems with positions. */
export function readYaml(text: string, fileName: string): unknown {
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

export function parseWith<T extends z.ZodType>(
  schema: T,
  text: string,
  fileName: string,
): z.output<T> {
  const raw = readYaml(text, fileName) ?? {};
  const parsed = schema.safeParse(raw, { error: plainIssueWords });
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

export const toolName = z
  .string({ error: expectName })
  .regex(toolNamePattern, { error: expectName });

export const metadataFields = {
  risk: z.enum(riskLevels, { error: `one of ${riskLevels.join(", ")}` }).optional(),
  disclosure: z
    .enum(disclosureLevels, { error: `one of ${disclosureLevels.join(", ")}` })
    .optional(),
  egress: z.boolean({ error: "true or false" }).optional(),
};

export const timeoutMs = z
  .number({ error: "milliseconds, a whole number from 100 to 3600000" })
  .int({ error: "milliseconds, a whole number from 100 to 3600000" })
  .min(100, { error: "milliseconds, a whole number from 100 to 3600000" })
  .max(3_600_000, { error: "milliseconds, a whole number from 100 to 3600000" })
  .optional();

export const limit = (what: string, max: number) =>
  z
    .number({ error: `${what}, a whole number from 1 to ${max}` })
    .int({ error: `${what}, a whole number from 1 to ${max}` })
    .min(1, { error: `${what}, a whole number from 1 to ${max}` })
    .max(max, { error: `${what}, a whole number from 1 to ${max}` })
    .optional();

/** Resource limits of the tool's sandboxed processes (defaults in src/sandbox/types.ts). */
export const sandboxLimits = z
  .strictObject(
    {
      processes: limit("processes", 65_536),
      cpuSeconds: limit("CPU seconds", 86_400),
      fileSizeBytes: limit("bytes", 2 ** 50),
      memoryBytes: limit("bytes", 2 ** 50),
      tmpBytes: limit("bytes", 2 ** 50),
    },
    {
      error: "a mapping with processes, cpuSeconds, fileSizeBytes, memoryBytes and/or tmpBytes",
    },
  )
  .optional();

export const processFields = { envAllowlist, limits: sandboxLimits };
