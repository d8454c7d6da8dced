// A webhook fire becomes at most one run that did not fail. The delivery is claimed inside the
// transaction that creates the run (StartRunRequest.delivery), so "claimed" and "a run
// exists" are the same fact: a duplicate sent to two instances at once starts one run, a start
// that fails (budget, concurrency) leaves the delivery unclaimed for the sender's retry, and a
// delivery whose run failed starts a new run when delivered again (GitHub's Redeliver), audited
// with `retryOf`.
//
// Nothing a sender could take for success is silent: a delivery peergate cannot read (a content
// type GitHub does not send, a payload that is not an object, no event header) is answered 4xx,
// which GitHub's delivery log shows as failed, and audited as `webhook.refused`; one the caller's
// event filter leaves out is answered 200 `ignored` and audited as `webhook.ignored`.
import { createHash, randomBytes } from "node:crypto";
import { appendAuditEvent } from "../db/audit.ts";
import type { Caller } from "../db/schema.ts";
import { claimWebhookDelivery } from "../db/webhook-claims.ts";
import type { RunEngine } from "../runs/types.ts";
import { renderWebhookPrompt } from "../runs/webhook-prompt.ts";
import type { ServiceContext } from "./context.ts";
import { DeliveryTakenError } from "./runs/delivery-claim.ts";

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
  /** GitHub's X-GitHub-Delivery, or another sender's Idempotency-Key. */
  deliveryId?: string | undefined;
  /** GitHub's X-GitHub-Event. */
  event?: string | undefined;
  /** The Content-Type header (GitHub: application/json or application/x-www-form-urlencoded). */
  contentType?: string | undefined;
};

export type WebhookAnswer =
  | { outcome: "started"; runId: string; retryOf?: string }
  | { outcome: "duplicate"; runId: string | null; reason: "delivery-id" | "body-hash" }
  | { outcome: "ignored"; reason: string }
  /** Not readable as a delivery of its kind: answered 4xx so the sender's log shows it failed. */
  | { outcome: "refused"; status: 400 | 415; reason: string }
  | { outcome: "pong" };

/**
 * GitHub's payload text by the delivery's content type: the body itself for JSON, the `payload`
 * field of a form-encoded body (GitHub's default content type). Undefined: not a type GitHub
 * sends, or a form without `payload`.
 */
function githubPayloadText(
  contentType: string | undefined,
  text: string,
): { text: string } | { refused: string } {
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "application/json") return { text };
  if (type === "application/x-www-form-urlencoded") {
    const payload = new URLSearchParams(text).get("payload");
    return payload === null
      ? { refused: "a form-encoded delivery without a payload field" }
      : { text: payload };
  }
  return {
    refused: `content type ${JSON.stringify(type || "(none)")} is not one GitHub sends (application/json or application/x-www-form-urlencoded)`,
  };
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
  services,
  runs,
  fire,
}: {
  services: ServiceContext;
  runs: RunEngine;
  fire: WebhookFire;
}): Promise<WebhookAnswer> {
  const { caller } = fire;
  const text = new TextDecoder("utf-8", { fatal: false }).decode(fire.rawBody);
  const bodySha256 = createHash("sha256").update(fire.rawBody).digest("hex");
  let event: string | undefined;

  // GitHub's bodies are unique per delivery, so a body seen again from the caller is a replay;
  // other senders' repeats are real fires, told apart only by an Idempotency-Key they send.
  const bodyWindowMs = caller.kind === "github" ? githubDuplicateWindowMs : undefined;
  let payloadText = text;
  if (caller.kind === "github") {
    const refuse = async (status: 400 | 415, reason: string): Promise<WebhookAnswer> => {
      await appendAuditEvent(services.db, {
        actor: `caller:${caller.name}`,
        kind: "webhook.refused",
        subject: `caller:${caller.id}`,
        data: {
          reason,
          ...(fire.deliveryId ? { deliveryId: fire.deliveryId.slice(0, 100) } : {}),
          bodySha256,
        },
      });
      return { outcome: "refused", status, reason };
    };
    // An answer that starts no run still claims the body, so it cannot be replayed as another
    // event (a content type peergate cannot read claims nothing: fixed, it can be redelivered).
    const claimBody = () =>
      claimWebhookDelivery(services.db, {
        callerId: caller.id,
        deliveryId: fire.deliveryId,
        bodySha256,
        bodyWindowMs,
      });
    const settle = async (answer: WebhookAnswer): Promise<WebhookAnswer> => {
      await claimBody();
      return answer;
    };
    const read = githubPayloadText(fire.contentType, text);
    if ("refused" in read) return refuse(415, read.refused);
    payloadText = read.text;
    const name = (fire.event ?? "").trim();
    if (!/^[a-z_]{1,64}$/.test(name)) {
      await claimBody();
      return refuse(400, "missing or malformed X-GitHub-Event");
    }
    const payload = parseJsonObject(payloadText);
    // The event header is not signed: trust it only as far as the payload's shape agrees.
    if (name === "ping") {
      if (payload && typeof payload.zen === "string" && "hook_id" in payload) {
        return settle({ outcome: "pong" });
      }
      await claimBody();
      return refuse(400, "a ping event whose payload is not a ping");
    }
    if (!payload) {
      await claimBody();
      return refuse(400, "GitHub payload is not a JSON object");
    }
    event = describeGithubEvent(name, payload);
    const filter = caller.eventFilter;
    if (filter && !filter.includes(name) && !filter.includes(event)) {
      await appendAuditEvent(services.db, {
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
    payload: payloadText,
    event,
    fence: randomBytes(16).toString("hex"),
  });
  try {
    const handle = await runs.start({
      caller,
      origin: "webhook",
      messages: [{ role: "user", content: prompt }],
      delivery: {
        kind: "fire",
        callerName: caller.name,
        deliveryId: fire.deliveryId,
        event,
        bodySha256,
        bytes: fire.rawBody.length,
        bodyWindowMs,
      },
    });
    return {
      outcome: "started",
      runId: handle.runId,
      ...(handle.retryOf ? { retryOf: handle.retryOf } : {}),
    };
  } catch (error) {
    if (error instanceof DeliveryTakenError && error.reason !== "retried") {
      return { outcome: "duplicate", runId: error.runId, reason: error.reason };
    }
    throw error;
  }
}
