// A webhook fire becomes at most one run. The delivery is claimed inside the transaction that
// creates the run (StartRunRequest.inCreateTransaction), so "claimed" and "a run exists" are the
// same fact: a duplicate sent to two instances at once starts one run, and a start that fails
// (budget, concurrency) leaves the delivery unclaimed for the sender's retry.
import { createHash, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { appendAuditEvent } from "../db/audit.ts";
import { type Caller, webhookDeliveries } from "../db/schema.ts";
import { claimWebhookDelivery } from "../db/webhook-claims.ts";
import type { RunEngine } from "../runs/types.ts";
import { renderWebhookPrompt } from "../runs/webhook-prompt.ts";
import type { ServiceContext } from "./context.ts";

/** Same body from the same caller within this window is a duplicate (IFTTT has no delivery id). */
export const defaultDuplicateWindowMs = 10 * 60_000;

/**
 * GitHub signs only the body: X-GitHub-Event and X-GitHub-Delivery can be changed by whoever
 * replays a delivery. Every delivery GitHub makes has a body of its own (ids, timestamps), so a
 * body already seen from a caller is a replay, whatever headers come with it: bodies are
 * remembered for a year, and the ones that started no run (pings, events the filter ignored) are
 * claimed too — otherwise a signed `push` body, resent as `issues`, passed an `issues` filter.
 */
export const githubDuplicateWindowMs = 365 * 24 * 3_600_000;

export type WebhookFire = {
  caller: Caller;
  rawBody: Uint8Array;
  /** GitHub's X-GitHub-Delivery. */
  deliveryId?: string | undefined;
  /** GitHub's X-GitHub-Event. */
  event?: string | undefined;
};

export type WebhookAnswer =
  | { outcome: "started"; runId: string }
  | { outcome: "duplicate"; runId: string | null; reason: "delivery-id" | "body-hash" }
  | { outcome: "ignored"; reason: string }
  | { outcome: "pong" };

class DuplicateDelivery extends Error {
  readonly runId: string | null;
  readonly reason: "delivery-id" | "body-hash";
  constructor(runId: string | null, reason: "delivery-id" | "body-hash") {
    super("duplicate delivery");
    this.runId = runId;
    this.reason = reason;
  }
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** GitHub's event as the filter and template see it: `issues.opened`, or `push`. */
function describeGithubEvent(event: string, payload: Record<string, unknown> | undefined): string {
  const action = payload?.action;
  return typeof action === "string" && /^[a-z_]{1,64}$/.test(action) ? `${event}.${action}` : event;
}

export async function acceptWebhook({
  ctx,
  runs,
  fire,
}: {
  ctx: ServiceContext;
  runs: RunEngine;
  fire: WebhookFire;
}): Promise<WebhookAnswer> {
  const { caller } = fire;
  const text = new TextDecoder("utf-8", { fatal: false }).decode(fire.rawBody);
  const bodySha256 = createHash("sha256").update(fire.rawBody).digest("hex");
  let event: string | undefined;

  const bodyWindowMs =
    caller.kind === "github" ? githubDuplicateWindowMs : defaultDuplicateWindowMs;
  if (caller.kind === "github") {
    // An answer that starts no run still claims the body, so it cannot be replayed as another event.
    const settle = async (answer: WebhookAnswer): Promise<WebhookAnswer> => {
      await claimWebhookDelivery(ctx.db, {
        callerId: caller.id,
        deliveryId: fire.deliveryId,
        bodySha256,
        bodyWindowMs,
      });
      return answer;
    };
    const name = (fire.event ?? "").trim();
    if (!/^[a-z_]{1,64}$/.test(name))
      return settle({ outcome: "ignored", reason: "missing or malformed X-GitHub-Event" });
    const payload = parseJsonObject(text);
    // The event header is not signed: trust it only as far as the payload's shape agrees.
    if (name === "ping") {
      return settle(
        payload && typeof payload.zen === "string" && "hook_id" in payload
          ? { outcome: "pong" }
          : { outcome: "ignored", reason: "a ping event whose payload is not a ping" },
      );
    }
    if (!payload)
      return settle({ outcome: "ignored", reason: "GitHub payload is not a JSON object" });
    event = describeGithubEvent(name, payload);
    const filter = caller.eventFilter;
    if (filter && !filter.includes(name) && !filter.includes(event)) {
      await appendAuditEvent(ctx.db, {
        actor: `caller:${caller.name}`,
        kind: "webhook.ignored",
        subject: `caller:${caller.id}`,
        data: { event, reason: "not in the caller's event filter", bodySha256 },
      });
      return settle({
        outcome: "ignored",
        reason: `event ${event} is not in this caller's event filter`,
      });
    }
  }

  const prompt = renderWebhookPrompt({
    template: caller.promptTemplate ?? "{{payload}}",
    payload: text,
    event,
    fence: randomBytes(16).toString("hex"),
  });
  try {
    const handle = await runs.start({
      caller,
      origin: "webhook",
      messages: [{ role: "user", content: prompt }],
      inCreateTransaction: async (tx, runId) => {
        const claim = await claimWebhookDelivery(tx, {
          callerId: caller.id,
          deliveryId: fire.deliveryId,
          bodySha256,
          bodyWindowMs,
        });
        if (!claim.claimed) throw new DuplicateDelivery(claim.duplicateOf.runId, claim.reason);
        await tx.update(webhookDeliveries).set({ runId }).where(eq(webhookDeliveries.id, claim.id));
        await appendAuditEvent(tx, {
          actor: `caller:${caller.name}`,
          kind: "webhook.accepted",
          subject: `run:${runId}`,
          data: {
            caller: caller.name,
            ...(fire.deliveryId ? { deliveryId: fire.deliveryId.slice(0, 100) } : {}),
            ...(event ? { event } : {}),
            bodySha256,
            bytes: fire.rawBody.length,
          },
        });
      },
    });
    return { outcome: "started", runId: handle.runId };
  } catch (error) {
    if (error instanceof DuplicateDelivery) {
      return { outcome: "duplicate", runId: error.runId, reason: error.reason };
    }
    throw error;
  }
}
