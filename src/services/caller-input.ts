// What an admin may say about a caller, validated once at the service boundary. Every error names
// the field, the value and what is expected (ValidationError → 400 with `problems`).
import { z } from "zod";
import { jwtAlgorithms } from "../auth/jwt.ts";
import { type CallerBudgets, callerKinds, classifierModes } from "../db/schema.ts";
import { type Problem, ValidationError } from "../errors.ts";
import { plainIssueWords } from "../plain-issue.ts";
import { isToolOverride, nobodyThereModes, toolOverrideValues } from "../policy/overrides.ts";
import { toolNamePattern } from "../policy/tools.ts";
import { compileUrlGrants } from "../policy/url-grants.ts";
import { parseAllowEntry } from "../shell/command-key.ts";

export const callerNamePattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Tiers an admin may set. `none` is set only by revoking, so a revocation is always audited as one. */
export const settableTiers = ["public", "internal", "private"] as const;
export const approvalPolicyValues = ["auto", "read-only", "low-risk"] as const;

const positiveInt = (max: number) => z.number().int().positive().max(max);
const positiveMoney = z
  .number()
  .positive({
    error:
      "a number of US dollars above 0 (a cap of $0 would stop every run at once; for a model that costs nothing, price it at 0 in policies/models.yaml, or remove the limit)",
  })
  .max(1_000_000);

export const budgetsSchema = z.strictObject({
  tokens: positiveInt(100_000_000).optional(),
  costUsd: positiveMoney.optional(),
  durationMs: positiveInt(24 * 3_600_000).optional(),
  steps: positiveInt(10_000).optional(),
  concurrentRuns: positiveInt(1_000).optional(),
  daily: z
    .strictObject({
      tokens: positiveInt(10_000_000_000).optional(),
      costUsd: positiveMoney.optional(),
      runs: positiveInt(10_000_000).optional(),
    })
    .optional(),
});

/**
 * Budgets for a new caller, merged over the defaults (mergeBudgets): a number sets that limit,
 * null removes it (which widens, so it needs the operator token), a name left out keeps the default.
 */
export const budgetsChangeSchema = z.strictObject({
  tokens: positiveInt(100_000_000).nullable().optional(),
  costUsd: positiveMoney.nullable().optional(),
  durationMs: positiveInt(24 * 3_600_000)
    .nullable()
    .optional(),
  steps: positiveInt(10_000).nullable().optional(),
  concurrentRuns: positiveInt(1_000).nullable().optional(),
  daily: z
    .strictObject({
      tokens: positiveInt(10_000_000_000).nullable().optional(),
      costUsd: positiveMoney.nullable().optional(),
      runs: positiveInt(10_000_000).nullable().optional(),
    })
    .nullable()
    .optional(),
});

/** Bounded by default: an operator who forgets a budget gets a small one, not an unlimited one. */
export const defaultBudgets: CallerBudgets = {
  tokens: 200_000,
  costUsd: 1,
  durationMs: 300_000,
  steps: 25,
  concurrentRuns: 2,
  daily: { tokens: 2_000_000, costUsd: 10, runs: 500 },
};

/** A change to budgets: a number sets that limit, null removes it, a name left out keeps it. */
export type BudgetsChange = {
  [K in Exclude<keyof CallerBudgets, "daily">]?: number | null;
} & { daily?: { [K in keyof NonNullable<CallerBudgets["daily"]>]?: number | null } | null };

/**
 * The one merge rule for budgets, used by `callers add` (over the defaults), `callers set` and
 * `callers apply` (over the stored budgets): only the limits named change, `daily` included, so
 * a command that sets one cap never silently drops the others. Removing a limit is explicit.
 */
export function mergeBudgets(base: CallerBudgets, change: BudgetsChange): CallerBudgets {
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(change)) {
    if (key === "daily") continue;
    if (value === null) delete merged[key];
    else if (value !== undefined) merged[key] = value;
  }
  if (change.daily === null) delete merged.daily;
  else if (change.daily !== undefined) {
    const daily: Record<string, unknown> = { ...base.daily };
    for (const [key, value] of Object.entries(change.daily)) {
      if (value === null) delete daily[key];
      else if (value !== undefined) daily[key] = value;
    }
    if (Object.keys(daily).length) merged.daily = daily;
    else delete merged.daily;
  }
  return merged as CallerBudgets;
}

const httpsOrLoopbackUrl = z.string().refine(
  (v) => {
    try {
      const u = new URL(v);
      return (
        u.protocol === "https:" ||
        (u.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname))
      );
    } catch {
      return false;
    }
  },
  { error: "an https:// URL (http:// only on loopback)" },
);

export const jwtSettingsSchema = z
  .strictObject({
    issuer: z.string().min(1).max(512),
    audience: z.string().min(1).max(512),
    algorithms: z
      .array(z.enum(jwtAlgorithms, { error: `one of ${jwtAlgorithms.join(", ")}` }))
      .min(1)
      .max(jwtAlgorithms.length),
    maxAgeSeconds: z.number().int().min(1).max(3600).default(300),
    jwksUrl: httpsOrLoopbackUrl.optional(),
    jwk: z.record(z.string(), z.unknown()).optional(),
    pem: z.string().max(16_384).optional(),
  })
  .refine((s) => [s.jwksUrl, s.jwk, s.pem].filter((v) => v !== undefined).length === 1, {
    error: "exactly one of jwksUrl, jwk or pem",
  })
  .refine((s) => !s.jwk || !("d" in s.jwk || "k" in s.jwk), {
    error: "a public key: the JWK must not contain private or symmetric key material (d, k)",
  });

export const allowSchema = z
  .array(z.string().regex(toolNamePattern, { error: "tool names match ^[A-Za-z0-9_.-]{1,128}$" }))
  .max(10_000);

const eventFilterSchema = z
  .array(
    z.string().regex(/^[a-z_]{1,64}(\.[a-z_]{1,64})?$/, {
      error: "an event such as issues or issues.opened",
    }),
  )
  .max(200);

const promptTemplateSchema = z.string().min(1).max(16_384);

/** Command allowlist entries (DESIGN §10): one or two plain words, e.g. `git status`. */
const commandsSchema = z
  .array(z.string({ error: "a command key such as git status" }).max(256))
  .max(1_000)
  .superRefine((entries, ctx) => {
    entries.forEach((entry, i) => {
      const parsed = parseAllowEntry(entry);
      if ("problem" in parsed) {
        ctx.addIssue({ code: "custom", path: [i], message: parsed.problem, input: entry });
      }
    });
  });

/** Tool name → allow | deny | prompt; read key by key, so `__proto__` is a tool name too. */
const toolOverridesSchema = z
  .custom<Record<string, string>>((v) => typeof v === "object" && v !== null && !Array.isArray(v), {
    error: `a mapping of tool name to ${toolOverrideValues.join(", ")}`,
  })
  // What the OpenAPI document says of it (a custom check has no JSON Schema of its own).
  .meta({
    type: "object",
    additionalProperties: { type: "string", enum: [...toolOverrideValues] },
  })
  .superRefine((map, ctx) => {
    const keys = Object.keys(map);
    if (keys.length > 1_000) {
      ctx.addIssue({ code: "custom", message: "at most 1000 overrides", input: keys.length });
    }
    for (const key of keys) {
      if (!toolNamePattern.test(key)) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: "a tool name matching ^[A-Za-z0-9_.-]{1,128}$",
          input: key,
        });
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
  .transform((map) => Object.fromEntries(Object.entries(map)) as Record<string, string>);

const grantList = z
  .array(z.string({ error: "a text entry" }).max(2_048))
  .max(1_000)
  .optional();
/** web_fetch URL grants: hosts, `.suffixes`, URL prefixes (src/policy/url-grants.ts). */
const urlGrantsSchema = z
  .strictObject({ hosts: grantList, suffixes: grantList, prefixes: grantList })
  .superRefine((grants, ctx) => {
    const compiled = compileUrlGrants(grants);
    if (compiled.ok) return;
    for (const problem of compiled.problems) {
      const [list, index] = (problem.field ?? "").replace("]", "").split("[");
      ctx.addIssue({
        code: "custom",
        path: [list ?? "", Number(index)],
        message: problem.expected ?? problem.message,
        input: problem.value,
      });
    }
  });

const whenNobodySchema = z.enum(nobodyThereModes, {
  error: `one of ${nobodyThereModes.join(", ")} (what happens to a call that needs a person)`,
});

const classifierSchema = z.enum(classifierModes, {
  error: `one of ${classifierModes.join(", ")} (off: the command risk classifier never rates this caller's commands, so an uncovered one always asks)`,
});

export const createCallerSchema = z.strictObject({
  name: z.string().regex(callerNamePattern, {
    error:
      "lower-case letters, digits and '-', starting with a letter or digit, at most 63 characters",
  }),
  kind: z.enum(callerKinds, { error: `one of ${callerKinds.join(", ")}` }),
  tier: z.enum(settableTiers, { error: `one of ${settableTiers.join(", ")}` }).default("public"),
  allow: allowSchema.default([]),
  approvalPolicy: z
    .enum(approvalPolicyValues, { error: `one of ${approvalPolicyValues.join(", ")}` })
    .default("auto"),
  budgets: budgetsChangeSchema.optional(),
  promptTemplate: promptTemplateSchema.optional(),
  eventFilter: eventFilterSchema.optional(),
  jwt: jwtSettingsSchema.optional(),
  commands: commandsSchema.default([]),
  toolOverrides: toolOverridesSchema.default({}),
  urlGrants: urlGrantsSchema.optional(),
  whenNobody: whenNobodySchema.optional(),
  classifier: classifierSchema.optional(),
});
export type CreateCallerInput = z.input<typeof createCallerSchema>;
export type CreateCaller = z.output<typeof createCallerSchema>;

export const updateCallerSchema = z.strictObject({
  tier: z.enum(settableTiers, { error: `one of ${settableTiers.join(", ")}` }).optional(),
  allow: allowSchema.optional(),
  approvalPolicy: z
    .enum(approvalPolicyValues, { error: `one of ${approvalPolicyValues.join(", ")}` })
    .optional(),
  budgets: budgetsSchema.optional(),
  promptTemplate: promptTemplateSchema.optional(),
  eventFilter: eventFilterSchema.nullable().optional(),
  jwt: jwtSettingsSchema.nullable().optional(),
  commands: commandsSchema.optional(),
  toolOverrides: toolOverridesSchema.optional(),
  /** null removes the grants (fetches then follow the approval policy alone). */
  urlGrants: urlGrantsSchema.nullable().optional(),
  /** null returns to the kind's default (decline for webhooks, park for peers). */
  whenNobody: whenNobodySchema.nullable().optional(),
  /** `on` again is a widening: it needs the operator token too. */
  classifier: classifierSchema.optional(),
  /** Compare-and-set: refuse the change if the caller moved on since it was read. */
  expectedVersion: z.number().int().positive().optional(),
});
export type UpdateCallerInput = z.input<typeof updateCallerSchema>;
export type UpdateCaller = z.output<typeof updateCallerSchema>;

/** Parses `input` with `schema`, throwing ValidationError that names every bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input, { error: plainIssueWords });
  if (result.success) return result.data;
  const problems: Problem[] = result.error.issues.map((issue) => {
    const field = issue.path.length ? issue.path.join(".") : "(body)";
    const value = valueAt(input, issue.path);
    const message =
      issue.code === "unrecognized_keys"
        ? `${field}: unknown field(s) ${issue.keys.join(", ")}`
        : value === undefined
          ? `${field}: missing; expected ${issue.message}`
          : `${field}: got ${JSON.stringify(value)?.slice(0, 120)}; expected ${issue.message}`;
    return { field, value, expected: issue.message, message };
  });
  throw new ValidationError(problems);
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = input;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    if (!Object.hasOwn(current, key)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Kind-specific rules the schema alone cannot say. */
export function checkKindRules(caller: {
  kind: string;
  promptTemplate?: string | null | undefined;
  eventFilter?: readonly string[] | null | undefined;
  jwt?: unknown;
}): void {
  const problems: Problem[] = [];
  const webhook = caller.kind !== "peer";
  if (webhook && !caller.promptTemplate) {
    problems.push({
      field: "promptTemplate",
      message: `promptTemplate: missing; a ${caller.kind} caller fires a fixed prompt (use {{payload}} where the request body goes)`,
    });
  }
  if (!webhook && caller.promptTemplate) {
    problems.push({
      field: "promptTemplate",
      message: "promptTemplate: only webhook callers (github, ifttt, webhook) have one",
    });
  }
  if (caller.kind !== "github" && caller.eventFilter) {
    problems.push({ field: "eventFilter", message: "eventFilter: only github callers have one" });
  }
  if (caller.kind !== "peer" && caller.jwt) {
    problems.push({ field: "jwt", message: "jwt: only peer callers authenticate with JWTs" });
  }
  if (problems.length) throw new ValidationError(problems);
}
