// Notices about parked runs, for an operator who is not watching the console: when a run parks on
// a call that needs approval, and again when its approval window is about to close, each notify
// target (PEERGATE_NOTIFY_URL) gets one POST with a Slack-compatible body (`text`, plus the same
// facts as JSON under `peergate`), signed with PEERGATE_NOTIFY_SECRET:
//
//   X-Peergate-Timestamp: <unix seconds>
//   X-Peergate-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>
//   X-Peergate-Event: run.parked | run.expiring
//   X-Peergate-Delivery: <run id>:<call id>:<parked|expiring>   (the same on every retry)
//
// Every instance looks every `intervalMs`; the one whose claim row (run_notices) lands sends the
// notice, so several instances never send it twice. A failed POST is retried with backoff; the
// outcome per target is one `run.notified` audit event. Targets are reached through the same
// rules against request forgery as web_fetch (src/notify/safe-post.ts). A notice whose instance
// stops during its retries is not sent again by another instance (its claim stays `sending`).
// The settings are read with every other one, in config.ts, so a bad value stops start-up before
// the database opens.
import { createHmac } from "node:crypto";
import { sql } from "drizzle-orm";
import type { NotifyConfig } from "../config.ts";
import { appendAuditEvent } from "../db/audit.ts";
import { type Database, selectRows } from "../db/client.ts";
import type { Logger } from "../log.ts";
import { type SafePostOptions, safePost } from "./safe-post.ts";

/** The signature a receiver recomputes: HMAC-SHA256 over "<timestamp>.<body>". */
export function signNotice(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

type DueRow = {
  run_id: string;
  kind: "parked" | "expiring";
  call_id: string;
  tool: string | null;
  summary: string | null;
  parked_until: string | Date | null;
  caller_name: string;
};

export type ParkedRunNotifier = {
  /** One look: claims and sends what is due (the timer does this every intervalMs). */
  tick(): Promise<void>;
  close(): Promise<void>;
};

/** Slack reads `text` as mrkdwn: &, < and > are its markup, control characters are dropped. */
const slackText = (s: string) =>
  s
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
    .replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, " ")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");

export function startParkedRunNotifier({
  database,
  config,
  instanceId,
  logger,
  intervalMs = 2_000,
  retryDelaysMs = [1_000, 5_000, 30_000],
  post = safePost,
}: {
  database: Database;
  config: NotifyConfig;
  instanceId: string;
  logger: Logger;
  intervalMs?: number;
  /** Waits between attempts; one attempt more than there are delays. */
  retryDelaysMs?: readonly number[];
  post?: typeof safePost;
}): ParkedRunNotifier {
  const stopping = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const postOptions: SafePostOptions = { allowAddresses: config.allowAddresses };

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopping.signal.aborted) return resolve();
      const timer = setTimeout(resolve, ms);
      stopping.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });

  const deliver = async (row: DueRow) => {
    const event = row.kind === "parked" ? "run.parked" : "run.expiring";
    const until = row.parked_until ? new Date(row.parked_until).toISOString() : null;
    const facts = {
      event,
      runId: row.run_id,
      caller: row.caller_name,
      callId: row.call_id,
      tool: row.tool,
      summary: row.summary?.slice(0, 300) ?? null,
      parkedUntil: until,
      approve: `peergate runs approve ${row.run_id}`,
      reject: `peergate runs reject ${row.run_id}`,
    };
    const what =
      row.kind === "parked" ? "waits for approval" : "still waits; its window closes soon";
    const text = slackText(
      `peergate: run ${row.run_id} of caller ${row.caller_name} ${what}: ${row.tool ?? "a call"}${
        facts.summary ? ` (${facts.summary})` : ""
      }, until ${until ?? "?"}. Approve with \`${facts.approve}\`, or reject with \`${facts.reject}\`.`,
    );
    const body = JSON.stringify({ text, peergate: facts });
    const outcomes: {
      target: string;
      status: "sent" | "failed";
      attempts: number;
      reason?: string;
    }[] = [];
    for (const target of config.targets) {
      let attempts = 0;
      let reason: string | undefined;
      for (;;) {
        attempts += 1;
        const timestamp = String(Math.floor(Date.now() / 1000));
        const result = await post(
          target,
          body,
          {
            "content-type": "application/json",
            "x-peergate-event": event,
            "x-peergate-delivery": `${row.run_id}:${row.call_id}:${row.kind}`,
            "x-peergate-timestamp": timestamp,
            "x-peergate-signature": signNotice(config.secret, timestamp, body),
          },
          postOptions,
        );
        if (result.ok) {
          reason = undefined;
          break;
        }
        reason = result.reason;
        const wait = retryDelaysMs[attempts - 1];
        if (wait === undefined || stopping.signal.aborted) break;
        await pause(wait);
      }
      // The target's origin only: its path may hold a token (Slack's does).
      outcomes.push({
        target: target.origin,
        status: reason === undefined ? "sent" : "failed",
        attempts,
        ...(reason === undefined ? {} : { reason }),
      });
      if (reason !== undefined)
        logger.warn("a parked-run notice could not be delivered", {
          runId: row.run_id,
          target: target.origin,
          attempts,
          reason,
        });
    }
    const sent = outcomes.every((o) => o.status === "sent");
    await database.db.transaction(async (tx) => {
      await tx.execute(
        sql`update run_notices set status = ${sent ? "sent" : "failed"},
          attempts = ${Math.max(...outcomes.map((o) => o.attempts))}
          where run_id = ${row.run_id} and call_id = ${row.call_id} and kind = ${row.kind}`,
      );
      await appendAuditEvent(tx, {
        actor: `instance:${instanceId}`,
        kind: "run.notified",
        subject: `run:${row.run_id}`,
        data: { runId: row.run_id, callId: row.call_id, notice: row.kind, targets: outcomes },
      });
    });
  };

  const tick = async () => {
    const due = await selectRows<DueRow>(
      database.db,
      sql`select r.id as run_id, k.kind, r.pending_approval->>'callId' as call_id,
          coalesce(r.pending_approval->>'calledTool', r.pending_approval->>'tool') as tool,
          r.pending_approval->>'summary' as summary, r.parked_until, c.name as caller_name
        from runs r
        join callers c on c.id = r.caller_id
        cross join (values ('parked'), ('expiring')) as k(kind)
        where r.status = 'parked' and r.pending_approval is not null
          and (k.kind = 'parked'
            or r.parked_until < now() + make_interval(secs => ${config.expiringWithinMs / 1000}))
          and not exists (select 1 from run_notices n where n.run_id = r.id
            and n.call_id = r.pending_approval->>'callId' and n.kind = k.kind)
        order by r.parked_until
        limit 50`,
    );
    for (const row of due) {
      if (stopping.signal.aborted) return;
      const claimed = await selectRows<{ run_id: string }>(
        database.db,
        sql`insert into run_notices (run_id, call_id, kind, instance_id)
          values (${row.run_id}, ${row.call_id}, ${row.kind}, ${instanceId})
          on conflict do nothing returning run_id`,
      );
      if (claimed.length === 0) continue; // another instance sends this one
      const sending = deliver(row).catch((error: unknown) =>
        logger.error("sending a parked-run notice failed", { runId: row.run_id, error }),
      );
      inFlight.add(sending);
      void sending.finally(() => inFlight.delete(sending));
    }
  };

  let looking: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (looking) return;
    looking = tick()
      .catch((error: unknown) => logger.warn("looking for parked runs to notify failed", { error }))
      .finally(() => {
        looking = undefined;
      });
  }, intervalMs);
  timer.unref();

  return {
    tick,
    async close() {
      clearInterval(timer);
      stopping.abort();
      await looking;
      await Promise.allSettled([...inFlight]);
    },
  };
}
