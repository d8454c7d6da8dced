// Narrowing or changing a caller. A revoked caller cannot be given a tier back here (that is
// `restoreCaller`, which also issues new credentials); the version bumps on every change, which
// is what invalidates cached ceilings and credential lookups on every instance. A change that
// widens what the caller may do, judged on the stored row before and after, also needs the
// operator token (src/services/widening.ts); narrowing needs the admin token alone.
import { and, eq, sql } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { type Caller, callers } from "../db/schema.ts";
import { ConflictError } from "../errors.ts";
import type { CallerWrite } from "./add-caller.ts";
import { type OperatorProof, withWideningCheck } from "./admin-credentials.ts";
import { changeCaller } from "./caller-events.ts";
import {
  checkKindRules,
  parseInput,
  type UpdateCaller,
  updateCallerSchema,
} from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { findCallerRow, listCredentialRows } from "./find-caller.ts";
import { describeWidening } from "./widening.ts";

export type UpdatedCaller = {
  caller: CallerView;
  changed: string[];
  unknownAllowEntries: string[];
};

export async function updateCaller({
  services,
  name,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  name: string;
  input: unknown;
  actor: Actor;
  /** The operator token the request carried; needed when the change widens. */
  operator?: OperatorProof | undefined;
}): Promise<UpdatedCaller> {
  const data = parseInput(updateCallerSchema, input);
  return withWideningCheck(
    services,
    { proof: operator, actor, what: `changing caller ${name}` },
    (authorize) =>
      changeCaller(services, (tx, announce) =>
        updateCallerIn(services, { tx, announce, authorize }, name, data, actor),
      ),
  );
}

/** Changes a caller from parsed input inside `write`'s transaction (also `callers apply`). */
export async function updateCallerIn(
  services: ServiceContext,
  { tx, announce, authorize }: CallerWrite,
  name: string,
  data: UpdateCaller,
  actor: Actor,
): Promise<UpdatedCaller> {
  const current = await findCallerRow(tx, name);
  if (data.expectedVersion !== undefined && data.expectedVersion !== current.version) {
    throw new ConflictError(
      `caller ${name} is at version ${current.version}, not ${data.expectedVersion}; re-read it and retry`,
    );
  }
  if (current.revokedAt !== null && data.tier !== undefined) {
    throw new ConflictError(
      `caller ${name} is revoked; restore it (POST /admin/v1/callers/${name}/restore) to give it a tier again`,
    );
  }
  const patch: Partial<Caller> = {};
  if (data.tier !== undefined) patch.tier = data.tier;
  if (data.allow !== undefined) patch.allow = data.allow;
  if (data.approvalPolicy !== undefined) patch.approvalPolicy = data.approvalPolicy;
  if (data.budgets !== undefined) patch.budgets = data.budgets;
  if (data.promptTemplate !== undefined) patch.promptTemplate = data.promptTemplate;
  if (data.eventFilter !== undefined) patch.eventFilter = data.eventFilter;
  if (data.jwt !== undefined) patch.jwt = data.jwt;
  if (data.commands !== undefined) patch.commands = data.commands;
  if (data.toolOverrides !== undefined) patch.toolOverrides = data.toolOverrides;
  if (data.urlGrants !== undefined) patch.urlGrants = data.urlGrants;
  if (data.whenNobody !== undefined) patch.whenNobody = data.whenNobody;
  if (data.classifier !== undefined) patch.classifier = data.classifier;
  checkKindRules({ ...current, ...patch });
  const changed = Object.keys(patch).filter(
    (k) => JSON.stringify(patch[k as keyof Caller]) !== JSON.stringify(current[k as keyof Caller]),
  );
  const widened = describeWidening(current, { ...current, ...patch });
  await authorize(tx, `caller:${current.id}`, widened);
  if (changed.length === 0) {
    return {
      caller: describeCaller(current, await listCredentialRows(tx, current.id), services.now()),
      changed,
      unknownAllowEntries: [],
    };
  }
  const [updated] = await tx
    .update(callers)
    .set({ ...patch, version: sql`${callers.version} + 1`, updatedAt: services.now() })
    .where(and(eq(callers.id, current.id), eq(callers.version, current.version)))
    .returning();
  if (!updated) throw new ConflictError(`caller ${name} changed while it was being updated; retry`);
  await appendAuditEvent(tx, {
    actor,
    kind: "caller.updated",
    subject: `caller:${updated.id}`,
    data: {
      name,
      version: updated.version,
      changes: Object.fromEntries(
        changed.map((k) => [
          k,
          {
            from: current[k as keyof Caller] ?? null,
            to: updated[k as keyof Caller] ?? null,
          },
        ]),
      ),
      ...(widened.length ? { withOperator: widened.map((w) => w.field) } : {}),
    },
  });
  await announce({ callerId: updated.id, name, version: updated.version, change: "updated" });
  const unknown = (data.allow ?? []).filter((a) => !services.policies.inventory.names.has(a));
  return {
    caller: describeCaller(updated, await listCredentialRows(tx, updated.id), services.now()),
    changed,
    unknownAllowEntries: [...new Set(unknown)],
  };
}
