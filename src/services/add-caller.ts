// Creating a caller: the row, its first credential and the audit event commit together.

import { eq } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { callers, credentials } from "../db/schema.ts";
import { ConflictError } from "../errors.ts";
import { changeCaller } from "./caller-events.ts";
import { checkKindRules, createCallerSchema, defaultBudgets, parseInput } from "./caller-input.ts";
import type { Actor, ServiceContext } from "./context.ts";
import { isUniqueViolation } from "./db-errors.ts";
import { type CallerView, describeCaller } from "./describe-caller.ts";
import { type IssuedCredential, issueCredential } from "./issue-credential.ts";

export async function addCaller({
  ctx,
  input,
  actor,
}: {
  ctx: ServiceContext;
  input: unknown;
  actor: Actor;
}): Promise<{ caller: CallerView; credential: IssuedCredential; unknownAllowEntries: string[] }> {
  const data = parseInput(createCallerSchema, input);
  checkKindRules(data);
  try {
    return await changeCaller(ctx, async (tx, announce) => {
      const [caller] = await tx
        .insert(callers)
        .values({
          name: data.name,
          kind: data.kind,
          tier: data.tier,
          allow: data.allow,
          approvalPolicy: data.approvalPolicy,
          budgets: { ...defaultBudgets, ...data.budgets },
          promptTemplate: data.promptTemplate ?? null,
          eventFilter: data.eventFilter ?? null,
          jwt: data.jwt ?? null,
        })
        .returning();
      if (!caller) throw new Error("caller insert returned nothing");
      const credential = await issueCredential(tx, ctx, caller);
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
          credential: { id: credential.id, prefix: credential.prefix },
        },
      });
      await announce({
        callerId: caller.id,
        name: caller.name,
        version: caller.version,
        change: "created",
      });
      const stored = await tx.select().from(credentials).where(eq(credentials.callerId, caller.id));
      const unknown = data.allow.filter((a) => !ctx.policies.inventory.names.has(a));
      return {
        caller: describeCaller(caller, stored, ctx.now()),
        credential,
        unknownAllowEntries: [...new Set(unknown)],
      };
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`a caller named "${data.name}" already exists`);
    }
    throw error;
  }
}
