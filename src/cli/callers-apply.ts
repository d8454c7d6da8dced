// `peergate callers apply -f callers.yaml`: declarative callers. Creates what is missing, changes
// what differs, and reports drift it will not touch (callers on the server that the file does not
// name, revoked callers). Running it twice changes nothing the second time. The file describes
// callers, never credentials: a field that looks like a secret is refused, and new credentials
// are printed once (never written back to the file).
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import type { CallerBudgets } from "../domain/caller.ts";
import { ValidationError } from "../errors.ts";
import {
  type BudgetsChange,
  checkKindRules,
  createCallerSchema,
  defaultBudgets,
  mergeBudgets,
  parseInput,
  updateCallerSchema,
} from "../services/caller-input.ts";
import { type AuthorityFields, describeWidening, floorCaller } from "../services/widening.ts";
import { type AdminRequestBody, callAdmin, createAdminClient } from "./admin-client.ts";
import { type CliContext, type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

type Json = Record<string, unknown>;
/** The fields a callers file manages; `callers export` writes exactly these. */
export const managedFields = [
  "tier",
  "allow",
  "approvalPolicy",
  "budgets",
  "promptTemplate",
  "eventFilter",
  "jwt",
  "commands",
  "toolOverrides",
  "urlGrants",
  "whenNobody",
  "classifier",
] as const;
const secretLooking = /token|secret|password|credential|^key$/i;

type Action =
  | { name: string; action: "create"; fields: Json }
  | { name: string; action: "update"; changes: Record<string, { from: unknown; to: unknown }> }
  | { name: string; action: "unchanged" }
  | { name: string; action: "drift"; note: string };

function same(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => same(v, b[i]));
  if (a && b && typeof a === "object" && typeof b === "object") {
    // Only what the file says is compared: fields the file leaves out are not drift.
    return Object.entries(b as Json).every(([k, v]) => same((a as Json)[k], v));
  }
  return a === b;
}

function readDesired(text: string, file: string): Json[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    throw new UsageError(`${file}: not valid YAML: ${(error as Error).message}`);
  }
  const callers = (doc as { callers?: unknown } | null)?.callers;
  if (!Array.isArray(callers))
    throw new UsageError(`${file}: expected a top-level "callers:" list`);
  const seen = new Set<string>();
  return callers.map((entry, i) => {
    if (!entry || typeof entry !== "object" || Array.isArray(entry)) {
      throw new UsageError(`${file}: callers[${i}] is not a mapping`);
    }
    const caller = entry as Json;
    for (const key of Object.keys(caller)) {
      if (secretLooking.test(key)) {
        throw new UsageError(
          `${file}: callers[${i}].${key}: callers.yaml must not hold secrets; credentials are issued by the server and shown once`,
        );
      }
    }
    if (typeof caller.name !== "string")
      throw new UsageError(`${file}: callers[${i}].name is required`);
    if (seen.has(caller.name)) throw new UsageError(`${file}: caller ${caller.name} appears twice`);
    seen.add(caller.name);
    return caller;
  });
}

type Write = { name: string; action: "create" | "update"; body: Json; widens: boolean };

function printCredentials(
  ctx: CliContext,
  credentials: { name: string; secret: string; usage: string; url?: string }[],
): void {
  for (const c of credentials) {
    ctx.io.out(
      `\nCredential for ${escapeForTerminal(c.name)} (shown once; peergate keeps only its hash):\n  ${c.url ?? c.secret}\n  ${c.usage}`,
    );
  }
}

/** Problems of one entry as `caller NAME: field: message` lines. */
function problemsOf(name: string, check: () => void): string[] {
  try {
    check();
    return [];
  } catch (error) {
    if (error instanceof ValidationError)
      return error.problems.map((p) => `caller ${name}: ${p.message}`);
    throw error;
  }
}

const authorityOf = (c: Json): AuthorityFields => ({
  tier: c.tier as AuthorityFields["tier"],
  allow: (c.allow as string[]) ?? [],
  approvalPolicy: c.approvalPolicy as AuthorityFields["approvalPolicy"],
  budgets: (c.budgets as CallerBudgets) ?? {},
  promptTemplate: (c.promptTemplate as string | null) ?? null,
  eventFilter: (c.eventFilter as string[] | null) ?? null,
  jwt: (c.jwt as AuthorityFields["jwt"]) ?? null,
});

/**
 * What apply would do, and every reason it cannot: each entry is parsed with the schemas the
 * server uses, and a widening without the operator token is a problem here, not a refusal
 * half-way through. Budgets merge into what is stored (mergeBudgets), as `callers set` does.
 */
export function planApply(
  desired: Json[],
  byName: Map<string, Json>,
  { withOperator }: { file: string; withOperator: boolean },
): { actions: Action[]; writes: Write[]; problems: string[] } {
  const actions: Action[] = [];
  const writes: Write[] = [];
  const problems: string[] = [];
  for (const want of desired) {
    const name = want.name as string;
    const have = byName.get(name);
    if (!have) {
      const entryProblems = problemsOf(name, () => {
        const data = parseInput(createCallerSchema, want);
        checkKindRules(data);
      });
      problems.push(...entryProblems);
      if (entryProblems.length) continue;
      const data = parseInput(createCallerSchema, want);
      const widened = describeWidening(floorCaller, {
        ...authorityOf(data as unknown as Json),
        budgets: mergeBudgets(defaultBudgets, data.budgets ?? {}),
      });
      if (widened.length && !withOperator)
        problems.push(
          `caller ${name}: creating it needs the operator token (${widened.map((w) => w.field).join(", ")})`,
        );
      actions.push({ name, action: "create", fields: want });
      writes.push({ name, action: "create", body: want, widens: widened.length > 0 });
      continue;
    }
    if (want.kind !== undefined && want.kind !== have.kind) {
      actions.push({
        name,
        action: "drift",
        note: `is a ${String(have.kind)} caller on the server, ${String(want.kind)} in the file; kind cannot change`,
      });
      continue;
    }
    if (have.revoked === true) {
      actions.push({
        name,
        action: "drift",
        note: "is revoked on the server; restore it explicitly (`peergate callers restore`)",
      });
      continue;
    }
    const changes: Record<string, { from: unknown; to: unknown }> = {};
    for (const field of managedFields) {
      if (want[field] === undefined) continue;
      if (field === "budgets") {
        if (!want.budgets || typeof want.budgets !== "object") {
          problems.push(`caller ${name}: budgets: expected a mapping of limits`);
          continue;
        }
        const merged = mergeBudgets(
          (have.budgets as CallerBudgets) ?? {},
          want.budgets as BudgetsChange,
        );
        if (JSON.stringify(merged) !== JSON.stringify(have.budgets))
          changes.budgets = { from: have.budgets, to: merged };
      } else if (!same(have[field], want[field])) {
        changes[field] = { from: have[field], to: want[field] };
      }
    }
    if (Object.keys(changes).length === 0) {
      actions.push({ name, action: "unchanged" });
      continue;
    }
    const patch: Json = Object.fromEntries(Object.entries(changes).map(([k, v]) => [k, v.to]));
    const entryProblems = problemsOf(name, () => {
      const data = parseInput(updateCallerSchema, patch);
      checkKindRules({ ...(have as { kind: string }), ...data });
    });
    problems.push(...entryProblems);
    if (entryProblems.length) continue;
    const widened = describeWidening(authorityOf(have), authorityOf({ ...have, ...patch }));
    if (widened.length && !withOperator)
      problems.push(
        `caller ${name}: the change widens it and needs the operator token (${widened.map((w) => w.field).join(", ")})`,
      );
    actions.push({ name, action: "update", changes });
    writes.push({
      name,
      action: "update",
      body: { ...patch, expectedVersion: have.version },
      widens: widened.length > 0,
    });
  }
  return { actions, writes, problems };
}

export const callersApplyCommand: Command = {
  words: ["callers", "apply"],
  summary: "create and update callers to match a YAML file (idempotent)",
  help: [
    "-f callers.yaml [--dry-run] [--json]",
    "",
    "The file holds `callers:`, a list of {name, kind, tier, allow, approvalPolicy, budgets,",
    "promptTemplate, eventFilter, jwt}. Missing callers are created (their credentials printed",
    "once), differing fields are changed, and drift that apply leaves alone is reported: callers",
    "the file does not name, and revoked callers (restore them explicitly).",
    "",
    "Creating a caller above the floor, and changes that widen one (a higher tier, new allow",
    "entries, a milder approval policy, a budget raised or removed), need the operator token as",
    "well as the admin token: set PEERGATE_OPERATOR_TOKEN or pass --operator-token-file.",
    "",
    "Options:",
    "  -f, --file F  the callers file (required)",
    "  --dry-run     say what would change, change nothing",
    "  --json        print {actions, credentials} as JSON",
    ...operatorTokenHelp.map((line) => line.replace(/^ {2}/, "  ")),
  ].join("\n"),
  options: {
    file: { type: "string", short: "f" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    ...operatorTokenOption,
  },
  async run(args, ctx) {
    const file = args.values.file;
    if (typeof file !== "string") throw new UsageError("-f callers.yaml is required");
    const desired = readDesired(await readFile(file, "utf8"), file);
    const client = await createAdminClient(ctx);
    const asOperator = await operatorHeaders(args, ctx);
    // Read generically: the managed fields are compared by name, whatever the view carries.
    const current: Json[] = (await callAdmin(ctx, "listCallers", {}, client)).callers;
    const byName = new Map(current.map((c) => [c.name as string, c]));
    const dryRun = args.values["dry-run"] === true;
    const credentials: { name: string; secret: string; usage: string; url?: string }[] = [];

    // 1. Plan and validate every entry, exactly as the server will, before changing anything:
    //    the run is all-or-nothing on what can be known in advance, and --dry-run says the same.
    const { actions, writes, problems } = planApply(desired, byName, {
      file,
      withOperator: Object.keys(asOperator).length > 0,
    });
    if (problems.length) {
      throw new UsageError(
        [`${file}: nothing was applied; fix these first:`, ...problems.map((p) => `  - ${p}`)].join(
          "\n",
        ),
      );
    }

    // 2. Apply. Writes that need the operator token go first, so a wrong token stops the run
    //    before anything changed. If a write still fails (the server changed meanwhile), what was
    //    done is said, and the credentials of callers already created are printed all the same.
    if (!dryRun) {
      const ordered = [...writes].sort((a, b) => Number(b.widens) - Number(a.widens));
      const done: string[] = [];
      for (const write of ordered) {
        try {
          if (write.action === "create") {
            const created = await callAdmin(
              ctx,
              "createCaller",
              { body: write.body as AdminRequestBody<"createCaller">, headers: asOperator },
              client,
            );
            if (created.credential) credentials.push({ name: write.name, ...created.credential });
          } else {
            await callAdmin(
              ctx,
              "updateCaller",
              {
                params: { name: write.name },
                body: write.body as AdminRequestBody<"updateCaller">,
                headers: asOperator,
              },
              client,
            );
          }
          done.push(`${write.action}d ${write.name}`);
        } catch (error) {
          printCredentials(ctx, credentials);
          const left = ordered.slice(ordered.indexOf(write) + 1).map((w) => w.name);
          throw new Error(
            [
              `callers apply stopped at caller ${write.name} (${write.action}): ${(error as Error).message}`,
              `  applied: ${done.length ? done.join(", ") : "nothing"}`,
              `  not applied: ${[write.name, ...left].join(", ")}`,
            ].join("\n"),
          );
        }
      }
    }
    const named = new Set(desired.map((d) => d.name as string));
    for (const c of current) {
      if (!named.has(c.name as string))
        actions.push({
          name: c.name as string,
          action: "drift",
          note: "is on the server but not in the file (left alone)",
        });
    }

    if (args.values.json) {
      ctx.io.out(toTerminalJson({ dryRun, actions, credentials }));
      return exitCodes.ok;
    }
    for (const a of actions) {
      const verb =
        dryRun && (a.action === "create" || a.action === "update") ? `would ${a.action}` : a.action;
      if (a.action === "update")
        ctx.io.out(`${verb} ${a.name}: ${Object.keys(a.changes).join(", ")}`);
      else if (a.action === "drift") ctx.io.out(`drift   ${a.name} ${a.note}`);
      else ctx.io.out(`${verb} ${a.name}`);
    }
    printCredentials(ctx, credentials);
    return exitCodes.ok;
  },
};
