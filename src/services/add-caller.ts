// Creating a caller: the row, its first credential and the audit event commit together. A caller
// created with more than the floor (a tier above public, allow entries, budgets above the
// defaults) needs the operator token as well as the admin token (src/services/widening.ts).
// A peer registered with a JWT key gets no static bearer token: the key is its one credential, so
// a leaked opaque token cannot stand in for a signature the peer never made.

import { eq } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import type { DbTransaction } from "../db/client.ts";
import { callers, credentials } from "../db/schema.ts";
import { ConflictError } from "../errors.ts";
import {
  type AuthorizeWidening,
  type OperatorProof,
  withWideningCheck,
} from "./admin-credentials.ts";
import { type CallerEvent, changeCaller } from "./caller-events.ts";
import {
  type CreateCaller,
  checkKindRules,
  createCallerSchema,
  defaultBudgets,
  mergeBudgets,
  parseInput,
} from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { isUniqueViolation } from "./db-errors.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { type IssuedCredential, issueCredential } from "./issue-credential.ts";
import { describeWidening, floorCaller } from "./widening.ts";

export type AddedCaller = {
  caller: CallerView;
  /** None for a JWT peer: it authenticates only with JWTs signed by its key. */
  credential: IssuedCredential | null;
  unknownAllowEntries: string[];
};

export async function addCaller({
  services,
  input,
  actor,
  operator,
}: {
  services: ServiceContext;
  input: unknown;
  actor: Actor;
  /** The operator token the request carried; needed when the caller starts above the floor. */
  operator?: OperatorProof | undefined;
}): Promise<AddedCaller> {
  const data = parseInput(createCallerSchema, input);
  checkKindRules(data);
  try {
    return await withWideningCheck(
      services,
      { proof: operator, actor, what: `creating caller ${data.name}` },
      (authorize) =>
        changeCaller(services, (tx, announce) =>
          createCallerIn(services, { tx, announce, authorize }, data, actor),
        ),
    );
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`a caller named "${data.name}" already exists`);
    }
    throw error;
  }
}

/** What a caller write runs in: its transaction, the announcer, and the widening check. */
export type CallerWrite = {
  readonly tx: DbTransaction;
  readonly announce: (event: CallerEvent) => Promise<void>;
  readonly authorize: AuthorizeWidening;
};

/** Creates a caller from parsed input inside `write`'s transaction (also `callers apply`). */
export async function createCallerIn(
  services: ServiceContext,
  { tx, announce, authorize }: CallerWrite,
  data: CreateCaller,
  actor: Actor,
): Promise<AddedCaller> {
  const row = {
    name: data.name,
    kind: data.kind,
    tier: data.tier,
    allow: data.allow,
    approvalPolicy: data.approvalPolicy,
    budgets: mergeBudgets(defaultBudgets, data.budgets ?? {}),
    promptTemplate: data.promptTemplate ?? null,
    eventFilter: data.eventFilter ?? null,
    jwt: data.jwt ?? null,
    commands: data.commands,
    toolOverrides: data.toolOverrides,
    urlGrants: data.urlGrants ?? null,
    whenNobody: data.whenNobody ?? null,
    classifier: data.classifier ?? "on",
  };
  // What the new caller may do beyond the floor is what needs the operator token.
  const widened = describeWidening(floorCaller, row);
  await authorize(tx, null, widened);
  const [caller] = await tx.insert(callers).values(row).returning();
  if (!caller) throw new Error("caller insert returned nothing");
  // A JWT peer gets no static token: it authenticates only with JWTs signed by its key.
  const credential = caller.jwt ? null : await issueCredential(tx, services, caller);
  await appendAuditEvent(tx, {
    actor,
    kind: "caller.created",
    subject: `caller:${caller.id}`,
    data: {
      name: caller.name,
      kind: caller.kind,
      tier: caller.tier,
      allow: caller.allow,
      approvalPolicy: caller.approvalPolicy,
      credential: credential ? { id: credential.id, prefix: credential.prefix } : null,
      ...(widened.length ? { withOperator: widened.map((w) => w.field) } : {}),
    },
  });
  await announce({
    callerId: caller.id,
    name: caller.name,
    version: caller.version,
    change: "created",
  });
  const stored = await tx.select().from(credentials).where(eq(credentials.callerId, caller.id));
  const unknown = data.allow.filter((a) => !services.policies.inventory.names.has(a));
  return {
    caller: describeCaller(caller, stored, services.now()),
    credential,
    unknownAllowEntries: [...new Set(unknown)],
  };
}
