// `callers apply`: a callers file made true on the server, in ONE transaction. Every entry is
// parsed and checked first (all problems listed at once, nothing written); then every create,
// change, push-grant replacement and prune commits together with its audit events, or none of
// them does. A dry run does exactly the same work in a transaction that is rolled back, so what
// it reports (old → new values, what would widen and needs the operator token) is what the apply
// would do, checked by the same code. The file describes callers, never credentials: new ones are
// returned once, from a committed apply only.
//
// Pruning (`prune: true`) is for callers the file omits: each is revoked (total and immediate, as
// `callers revoke`), then deleted when nothing refers to it — no run, task or webhook delivery —
// so history is never lost; one with history stays, revoked, and the report says so.
import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import { appendAuditEvent } from "../db/audit.ts";
import type { DbOrTx } from "../db/client.ts";
import { selectRows } from "../db/client.ts";
import { type Caller, callerPushHosts, callers } from "../db/schema.ts";
import { type CallerBudgets, managedCallerFields as managedFields } from "../domain/caller.ts";
import { type Problem, ValidationError } from "../errors.ts";
import { defaultNobodyThere } from "../policy/overrides.ts";
import { type CallerWrite, createCallerIn } from "./add-caller.ts";
import {
  type AuthorizeWidening,
  type OperatorProof,
  withWideningCheck,
} from "./admin-credentials.ts";
import { changeCaller } from "./caller-events.ts";
import {
  type BudgetsChange,
  checkKindRules,
  createCallerSchema,
  mergeBudgets,
  parseInput,
  updateCallerSchema,
} from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import type { IssuedCredential } from "./issue-credential.ts";
import { revokeCallerIn } from "./revoke-caller.ts";
import { readPushHostsInput, replacePushHostsIn } from "./set-push-hosts.ts";
import { updateCallerIn } from "./update-caller.ts";

const secretLooking = /token|secret|password|credential|^key$/i;

export const applyCallersSchema = z.strictObject({
  callers: z.array(z.record(z.string(), z.unknown())).max(10_000),
  /** Revoke (and delete, when nothing refers to it) every caller the file does not name. */
  prune: z.boolean().optional(),
  /** Do everything, then roll it back: the report is what an apply would do. */
  dryRun: z.boolean().optional(),
});

type Change = { from: unknown; to: unknown };
export type ApplyAction =
  | { name: string; action: "create"; fields: Record<string, unknown>; needsOperator: string[] }
  | { name: string; action: "update"; changes: Record<string, Change>; needsOperator: string[] }
  | { name: string; action: "unchanged" }
  | { name: string; action: "revoke" | "delete"; note: string }
  | { name: string; action: "drift"; note: string };

export type ApplyReport = {
  dryRun: boolean;
  actions: ApplyAction[];
  /** New callers' credentials, shown once; empty on a dry run. */
  credentials: Array<{ name: string } & IssuedCredential>;
};

type Entry = Record<string, unknown> & { name: string };

/** Every entry, checked for shape: named once, no secret-looking field. */
function readEntries(input: ReadonlyArray<Record<string, unknown>>): Entry[] {
  const problems: Problem[] = [];
  const seen = new Set<string>();
  input.forEach((entry, i) => {
    for (const key of Object.keys(entry)) {
      if (secretLooking.test(key)) {
        problems.push({
          field: `callers[${i}].${key}`,
          message: `callers[${i}].${key}: a callers file must not hold secrets; credentials are issued by the server and shown once`,
        });
      }
    }
    const name = entry.name;
    if (typeof name !== "string" || name === "") {
      problems.push({ field: `callers[${i}].name`, message: `callers[${i}].name: required` });
    } else if (seen.has(name)) {
      problems.push({
        field: `callers[${i}].name`,
        value: name,
        message: `caller ${name} appears twice`,
      });
    } else seen.add(name);
  });
  if (problems.length > 0) throw new ValidationError(problems);
  return input as Entry[];
}

function same(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => same(v, b[i]));
  if (a && b && typeof a === "object" && typeof b === "object") {
    // Only what the file says is compared: fields the file leaves out are not drift.
    return Object.entries(b).every(([k, v]) => same((a as Record<string, unknown>)[k], v));
  }
  return a === b;
}

/** Problems of one entry, each prefixed with the caller's name. */
function problemsOf(name: string, check: () => void): Problem[] {
  try {
    check();
    return [];
  } catch (error) {
    if (error instanceof ValidationError)
      return error.problems.map((p) => ({ ...p, message: `caller ${name}: ${p.message}` }));
    throw error;
  }
}

async function pushHostsOf(db: DbOrTx, callerId: string): Promise<string[]> {
  const rows = await db
    .select({ entry: callerPushHosts.entry })
    .from(callerPushHosts)
    .where(eq(callerPushHosts.callerId, callerId));
  return rows.map((r) => r.entry).sort();
}

/** The stored value of a managed field, as a file would say it. */
function storedField(row: Caller, field: (typeof managedFields)[number], hosts: string[]): unknown {
  if (field === "pushHosts") return hosts;
  // As the caller's view says it (and `callers export` writes it): the kind's default when unset.
  if (field === "whenNobody") return row.whenNobody ?? defaultNobodyThere(row.kind);
  return row[field];
}

/** True when something still refers to the caller: deleting it would lose history. */
async function hasHistory(db: DbOrTx, callerId: string): Promise<boolean> {
  const [row] = await selectRows<{ used: boolean }>(
    db,
    sql`select exists (select 1 from runs where caller_id = ${callerId})
          or exists (select 1 from a2a_tasks where caller_id = ${callerId})
          or exists (select 1 from webhook_deliveries where caller_id = ${callerId}) as used`,
  );
  return row?.used === true;
}

/** What each entry widened, by name, as `authorize` was asked while it was applied. */
type Widenings = { entry: string; fields: Map<string, Set<string>>; created: Set<string> };

class RolledBack extends Error {
  readonly report: ApplyReport;
  constructor(report: ApplyReport) {
    super("dry run: rolled back");
    this.report = report;
  }
}

export async function applyCallers({
  services,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  input: unknown;
  actor: Actor;
  operator?: OperatorProof | undefined;
}): Promise<ApplyReport> {
  const request = parseInput(applyCallersSchema, input);
  const entries = readEntries(request.callers);
  const dryRun = request.dryRun === true;
  // The push grants' own problems first; each entry's fields are checked as it is applied, and
  // every problem is listed at once with nothing written.
  const problems: Problem[] = [];
  for (const entry of entries) {
    if (entry.pushHosts === undefined) continue;
    problems.push(...problemsOf(entry.name, () => readPushHostsInput({ hosts: entry.pushHosts })));
  }
  if (problems.length > 0) throw new ValidationError(problems);

  const work = (authorize: AuthorizeWidening) =>
    changeCaller(services, async (tx, announce) => {
      const widening: Widenings = { entry: "", fields: new Map(), created: new Set() };
      const write: CallerWrite = {
        tx,
        announce,
        // Gathered, not checked one by one: the whole file's widenings are checked at once below.
        authorize: async (_tx, _subject, widened) => {
          const fields = widening.fields.get(widening.entry) ?? new Set<string>();
          for (const w of widened) fields.add(w.field);
          if (fields.size > 0) widening.fields.set(widening.entry, fields);
        },
      };
      const report = await applyIn(
        services,
        write,
        entries,
        request.prune === true,
        actor,
        widening,
      );
      // One check for the whole file (a dry run included: it needs what the apply would), every
      // caller that widens named in the refusal.
      const widened = [...widening.fields].map(([name, fields]) => {
        const what = widening.created.has(name) ? "creating it" : "the change widens it and";
        const list = [...fields].join(", ");
        return {
          field: name,
          message: `caller ${name}: ${what} needs the operator token (${list})`,
        };
      });
      await authorize(tx, null, widened);
      if (dryRun) throw new RolledBack({ ...report, dryRun: true, credentials: [] });
      return report;
    });
  try {
    return await withWideningCheck(
      services,
      { proof: operator, actor, what: "applying the callers file" },
      work,
    );
  } catch (error) {
    if (error instanceof RolledBack) return error.report;
    throw error;
  }
}

async function applyIn(
  services: ServiceContext,
  write: CallerWrite,
  entries: readonly Entry[],
  prune: boolean,
  actor: Actor,
  widening: Widenings,
): Promise<ApplyReport> {
  const needsOperator = (name: string) => [...(widening.fields.get(name) ?? [])];
  const { tx } = write;
  const actions: ApplyAction[] = [];
  const credentials: ApplyReport["credentials"] = [];
  const problems: Problem[] = [];
  // Locked for the apply: nothing else changes these rows until it commits.
  const rows = await tx.select().from(callers).for("update");
  const byName = new Map(rows.map((r) => [r.name, r]));
  for (const entry of entries) {
    const { name } = entry;
    widening.entry = name;
    const { pushHosts, ...fields } = entry;
    const hosts = pushHosts === undefined ? undefined : readPushHostsInput({ hosts: pushHosts });
    const have = byName.get(name);
    if (have === undefined) {
      const entryProblems = problemsOf(name, () => {
        const data = parseInput(createCallerSchema, fields);
        checkKindRules(data);
      });
      problems.push(...entryProblems);
      if (entryProblems.length > 0) continue;
      const created = await createCallerIn(
        services,
        write,
        parseInput(createCallerSchema, fields),
        actor,
      );
      if (created.credential) credentials.push({ name, ...created.credential });
      widening.created.add(name);
      if (hosts !== undefined && hosts.length > 0) {
        await replacePushHostsIn(write, { id: created.caller.id, name }, hosts, actor);
      }
      actions.push({ name, action: "create", fields: entry, needsOperator: needsOperator(name) });
      continue;
    }
    if (fields.kind !== undefined && fields.kind !== have.kind) {
      actions.push({
        name,
        action: "drift",
        note: `is a ${have.kind} caller on the server, ${String(fields.kind)} in the file; kind cannot change`,
      });
      continue;
    }
    if (have.revokedAt !== null) {
      actions.push({
        name,
        action: "drift",
        note: "is revoked on the server; restore it explicitly (`peergate callers restore`)",
      });
      continue;
    }
    const storedHosts = await pushHostsOf(tx, have.id);
    const changes: Record<string, Change> = {};
    for (const field of managedFields) {
      const want = field === "pushHosts" ? hosts : fields[field];
      if (want === undefined) continue;
      const stored = storedField(have, field, storedHosts);
      if (field === "budgets") {
        const merged = mergeBudgets(have.budgets as CallerBudgets, want as BudgetsChange);
        if (JSON.stringify(merged) !== JSON.stringify(have.budgets))
          changes.budgets = { from: have.budgets, to: merged };
      } else if (!same(stored, want)) {
        changes[field] = { from: stored ?? null, to: want };
      }
    }
    if (Object.keys(changes).length === 0) {
      actions.push({ name, action: "unchanged" });
      continue;
    }
    const { pushHosts: hostChange, ...callerChanges } = changes;
    const patch = Object.fromEntries(Object.entries(callerChanges).map(([k, v]) => [k, v.to]));
    if (Object.keys(patch).length > 0) {
      const entryProblems = problemsOf(name, () => {
        const data = parseInput(updateCallerSchema, patch);
        checkKindRules({ ...have, ...data });
      });
      problems.push(...entryProblems);
      if (entryProblems.length > 0) continue;
      await updateCallerIn(services, write, name, parseInput(updateCallerSchema, patch), actor);
    }
    if (hostChange !== undefined && hosts !== undefined) {
      await replacePushHostsIn(write, have, hosts, actor);
    }
    actions.push({ name, action: "update", changes, needsOperator: needsOperator(name) });
  }
  if (problems.length > 0) throw new ValidationError(problems);

  widening.entry = "";
  const named = new Set(entries.map((e) => e.name));
  for (const row of rows) {
    if (named.has(row.name)) continue;
    if (!prune) {
      actions.push({
        name: row.name,
        action: "drift",
        note: "is on the server but not in the file (left alone; --prune revokes it)",
      });
      continue;
    }
    if (row.revokedAt === null) {
      await revokeCallerIn(services, write, row.name, "not in the applied callers file", actor);
      actions.push({ name: row.name, action: "revoke", note: "not in the file: revoked" });
    }
    if (await hasHistory(tx, row.id)) {
      if (row.revokedAt !== null) {
        actions.push({
          name: row.name,
          action: "drift",
          note: "revoked, kept for its runs and tasks (deleting it would lose history)",
        });
      }
      continue;
    }
    await appendAuditEvent(tx, {
      actor,
      kind: "caller.deleted",
      subject: `caller:${row.id}`,
      data: { name: row.name, reason: "not in the applied callers file" },
    });
    await tx.delete(callers).where(eq(callers.id, row.id));
    await write.announce({
      callerId: row.id,
      name: row.name,
      version: row.version + 1,
      change: "deleted",
    });
    actions.push({
      name: row.name,
      action: "delete",
      note: "not in the file, and nothing refers to it",
    });
  }
  return { dryRun: false, actions, credentials };
}
