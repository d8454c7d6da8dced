// The push worker: takes deliveries from the outbox (push-outbox.ts) and sends them, on every
// instance. The database is the only coordination:
//
// 1. Claim. One statement picks pending deliveries that are due, whose lease (if any) ran out,
//    and that are the oldest pending delivery of their config (so a receiver sees a task's updates
//    in the order they were stored, a retry included), locking them `FOR UPDATE SKIP LOCKED` so
//    two workers never pick the same row, and stamps a lease and one more attempt on them.
// 2. Send. The target is checked again (grants, then web_fetch's egress guard) and the request
//    goes to the address judged (push-sender.ts builds it). Redirects are not followed.
// 3. Finish, fenced by the attempt number: 2xx marks the delivery delivered; a refused target
//    fails it at once; anything else is retried with exponential backoff until `maxAttempts`.
//    The outcomes that finished meanwhile are written in one transaction with their audit events
//    (`push.delivered`, `push.failed`: one event per kind and batch, listing each delivery), so
//    the audit trail's lock is taken once per batch rather than once per delivery. A worker
//    whose lease was taken over finds its attempt number stale and writes nothing.
//
// An instance that dies mid-delivery holds a lease that runs out (`leaseMs`); any worker then
// claims the delivery again. The receiver may so get one attempt twice (at-least-once, as any
// delivery over a network that can lose the answer); both carry the same
// `X-A2A-Notification-Id`. A graceful stop releases the leases it holds at once.
//
// Workers wake on a NOTIFY the outbox sends at commit, and poll for what is due later (a retry
// whose timer was on an instance that died, a lease that ran out) or a wake-up that was lost:
// every `pollMs` while deliveries are about, the pause doubling after each poll that finds none
// (src/db/back-off.ts, as the audit chainer's) until it is `idlePollMs` (30 s, or
// the lease if shorter), so an idle instance polls twice a minute and a lost wake-up or a dead
// worker's delivery waits at most that long past its due time or lease. Finished
// deliveries are removed a day after they finished (`keepFinishedMs`), looked for every 10
// minutes; the audit trail keeps their record.
import { sql } from "drizzle-orm";
import type { SecretKey } from "../auth/sealed-secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import { backOff } from "../db/back-off.ts";
import type { Database } from "../db/client.ts";
import { selectRows } from "../db/client.ts";
import type { Notifications } from "../db/notifications.ts";
import type { PushConfigRow } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { failSpan, inSpan, ROOT_CONTEXT, SpanKind } from "../trace.ts";
import { pushWakeups } from "./push-outbox.ts";
import { buildPushRequest, type PushSigning } from "./push-sender.ts";
import { openPushConfig } from "./push-store.ts";
import { checkPushTargetWith, type PushEgress } from "./push-targets.ts";

export type PushWorkerOptions = {
  database: Database;
  secretKey: SecretKey;
  egress: PushEgress;
  signing?: PushSigning;
  logger: Logger;
  notifications?: Notifications;
  /** How long a claim holds a delivery before another worker may retake it (default 30 s). */
  leaseMs?: number;
  /** First retry delay, doubled per attempt up to 5 minutes (default 1 s). */
  retryBaseMs?: number;
  /** Attempts before a delivery is given up (default 8). */
  maxAttempts?: number;
  /** One attempt's time limit (default 10 s; kept below the lease). */
  timeoutMs?: number;
  /** Deliveries in flight at once (default 64). */
  concurrency?: number;
  /** How often the outbox is polled without a wake-up while deliveries are about (default 500 ms). */
  pollMs?: number;
  /** The longest pause between polls when none finds anything (default 30 s, at most the lease). */
  idlePollMs?: number;
  /** How long delivered and failed rows are kept (default 1 day). */
  keepFinishedMs?: number;
};

export type PushWorker = {
  /** Claims what is due now (tests and benches call it; the worker also runs on its own). */
  wake(): void;
  /** Deliveries this worker holds right now. */
  inFlight(): number;
  stop(): Promise<void>;
};

type Claimed = {
  id: number;
  push_hosts: string[];
  attempts: number;
  task_id: string;
  caller_id: string;
  task: Record<string, unknown>;
  push_config_id: string;
  config_id: string;
  config: unknown;
  sealed_secrets: string | null;
  wire_version: string;
};

type Outcome =
  | { kind: "delivered"; status: number }
  | { kind: "refused"; reason: string }
  | { kind: "retry"; reason: string };

const maxRetryDelayMs = 5 * 60_000;

export function startPushWorker(options: PushWorkerOptions): PushWorker {
  const { database, logger } = options;
  const db = database.db;
  const leaseMs = options.leaseMs ?? 30_000;
  const retryBaseMs = options.retryBaseMs ?? 1_000;
  const maxAttempts = options.maxAttempts ?? 8;
  const timeoutMs = Math.min(options.timeoutMs ?? 10_000, Math.max(100, leaseMs - 500));
  const concurrency = options.concurrency ?? 64;
  const pollMs = options.pollMs ?? 500;
  const idlePollMs = Math.max(pollMs, Math.min(options.idlePollMs ?? 30_000, leaseMs));
  let pollPauseMs = pollMs;
  let poller: NodeJS.Timeout | undefined;
  const log = logger.child({ component: "push" });
  const stopping = new AbortController();
  const held = new Map<number, Promise<void>>();
  let claiming = false;
  let again = false;
  let stopped = false;

  async function claim(limit: number): Promise<Claimed[]> {
    return selectRows<Claimed>(
      db,
      sql`with next as (
            select d.id from push_deliveries d
            where d.state = 'pending' and d.next_attempt_at <= now()
              and (d.lease_until is null or d.lease_until <= now())
              and not exists (
                select 1 from push_deliveries e
                where e.push_config_id = d.push_config_id and e.state = 'pending' and e.id < d.id)
            order by d.id
            limit ${limit}
            for update of d skip locked)
          update push_deliveries p
          set lease_until = now() + ${leaseMs} * interval '1 millisecond', attempts = p.attempts + 1
          from next, push_configs c
          where p.id = next.id and c.id = p.push_config_id
          returning p.id, p.attempts, p.task_id, p.caller_id, p.task, p.push_config_id,
            c.config_id, c.config, c.sealed_secrets, c.wire_version,
            coalesce((select array_agg(h.entry) from caller_push_hosts h
                      where h.caller_id = p.caller_id), '{}') as push_hosts`,
    );
  }

  async function send(row: Claimed): Promise<Outcome> {
    const config = openPushConfig(options.secretKey, {
      id: row.push_config_id,
      taskId: row.task_id,
      callerId: row.caller_id,
      configId: row.config_id,
      config: row.config,
      sealedSecrets: row.sealed_secrets,
      wireVersion: row.wire_version,
      createdAt: new Date(0),
    } satisfies PushConfigRow);
    const signal = AbortSignal.any([stopping.signal, AbortSignal.timeout(timeoutMs)]);
    const target = await checkPushTargetWith(
      row.push_hosts ?? [],
      options.egress,
      config.url,
      signal,
    );
    if (!target.ok) {
      if (stopping.signal.aborted) throw stopping.signal.reason;
      return { kind: "refused", reason: target.reason };
    }
    const request = await buildPushRequest({
      deliveryId: Number(row.id),
      config,
      wireVersion: row.wire_version,
      task: typeof row.task === "string" ? JSON.parse(row.task) : row.task,
      signing: options.signing,
    });
    try {
      const response = await options.egress.fetchHop(target.hop, signal, {
        method: "POST",
        headers: request.headers,
        body: request.body,
      });
      if (response.status >= 200 && response.status < 300) {
        return { kind: "delivered", status: response.status };
      }
      return { kind: "retry", reason: `the receiver answered HTTP ${response.status}` };
    } catch (error) {
      if (stopping.signal.aborted) throw error;
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).name ?? "an error";
      return { kind: "retry", reason: `the request failed: ${String(code).slice(0, 80)}` };
    }
  }

  type Finished = {
    row: Claimed;
    attempts: number;
    state: "delivered" | "failed" | "pending";
    reason: string | null;
    status: number | null;
    delayMs: number;
    done: () => void;
  };
  let finishing: Finished[] = [];
  let writing: Promise<void> | undefined;

  function finish(row: Claimed, outcome: Outcome): Promise<void> {
    const attempts = Number(row.attempts);
    const giveUp =
      outcome.kind === "refused" || (outcome.kind === "retry" && attempts >= maxAttempts);
    return new Promise((resolve) => {
      finishing.push({
        row,
        attempts,
        state: outcome.kind === "delivered" ? "delivered" : giveUp ? "failed" : "pending",
        reason: outcome.kind === "delivered" ? null : outcome.reason,
        status: outcome.kind === "delivered" ? outcome.status : null,
        delayMs: Math.min(retryBaseMs * 2 ** (attempts - 1), maxRetryDelayMs),
        done: resolve,
      });
      writing ??= writeFinished().finally(() => {
        writing = undefined;
      });
    });
  }

  /** Writes every finished outcome queued, batch after batch, until none is left. */
  async function writeFinished(): Promise<void> {
    while (finishing.length > 0) {
      const batch = finishing;
      finishing = [];
      try {
        await writeBatch(batch);
      } catch (error) {
        // Unwritten, the deliveries stay pending under their lease and are retaken after it.
        log.error("recording push outcomes failed", { error, count: batch.length });
      }
      for (const item of batch) item.done();
      // What waited behind these deliveries (the next update of the same config) is due now.
      wake();
      for (const item of batch) {
        if (item.state === "pending") {
          log.info("push delivery will be retried", {
            deliveryId: item.row.id,
            attempts: item.attempts,
            reason: item.reason,
          });
          setTimeout(wake, item.delayMs + 5).unref();
        } else if (item.state === "failed") {
          log.warn("push delivery given up", {
            deliveryId: item.row.id,
            attempts: item.attempts,
            reason: item.reason,
          });
        }
      }
    }
  }

  async function writeBatch(batch: Finished[]): Promise<void> {
    const values = sql.join(
      batch.map(
        (f) =>
          sql`(${Number(f.row.id)}::bigint, ${f.attempts}::int, ${f.state}::text, ${f.reason}::text, ${f.delayMs}::int)`,
      ),
      sql`, `,
    );
    await db.transaction(async (tx) => {
      const updated = await selectRows<{ id: number }>(
        tx,
        sql`update push_deliveries p set
              state = v.state,
              lease_until = null,
              last_error = v.reason,
              next_attempt_at = case when v.state = 'pending'
                then now() + v.delay * interval '1 millisecond' else p.next_attempt_at end,
              finished_at = case when v.state = 'pending' then null else now() end
            from (values ${values}) as v(id, attempts, state, reason, delay)
            where p.id = v.id and p.attempts = v.attempts and p.state = 'pending'
            returning p.id`,
      );
      // A delivery another worker took over after this one's lease ran out is its to report.
      const written = new Set(updated.map((r) => Number(r.id)));
      for (const kind of ["delivered", "failed"] as const) {
        const items = batch.filter((f) => f.state === kind && written.has(Number(f.row.id)));
        if (items.length === 0) continue;
        const tasks = [...new Set(items.map((f) => f.row.task_id))];
        await appendAuditEvent(tx, {
          actor: "system",
          kind: `push.${kind}`,
          subject: tasks.length === 1 ? `task:${tasks[0]}` : null,
          data: {
            deliveries: items.map((f) => ({
              deliveryId: Number(f.row.id),
              taskId: f.row.task_id,
              configId: f.row.config_id,
              callerId: f.row.caller_id,
              attempts: f.attempts,
              ...(kind === "delivered" ? { status: f.status } : { reason: f.reason }),
            })),
          },
        });
      }
    });
  }

  async function deliver(row: Claimed): Promise<void> {
    let outcome: Outcome;
    try {
      outcome = await tracePushDelivery(row, () => send(row));
    } catch (error) {
      if (stopping.signal.aborted) return;
      log.error("push delivery failed inside peergate", { deliveryId: row.id, error });
      return;
    }
    // The slot frees when the attempt ends; the outcome goes out with the next batch. Until then
    // the delivery stays pending under its lease, so neither it nor a later one of its config
    // can be claimed: order holds.
    void finish(row, outcome);
  }

  async function pump(): Promise<void> {
    if (claiming) {
      again = true;
      return;
    }
    claiming = true;
    try {
      do {
        again = false;
        const room = concurrency - held.size;
        if (stopped || room <= 0) break;
        const rows = await claim(room);
        // Deliveries about: poll at the short pause; none: back off towards the idle pause.
        pollPauseMs = rows.length > 0 || held.size > 0 ? pollMs : backOff(pollPauseMs, idlePollMs);
        for (const row of rows) {
          const id = Number(row.id);
          const work = deliver(row).finally(() => {
            held.delete(id);
            if (!stopped) wake();
          });
          held.set(id, work);
        }
        if (rows.length === room) again = true;
      } while (again && !stopped);
    } catch (error) {
      if (!stopped) log.error("claiming push deliveries failed", { error });
    } finally {
      claiming = false;
      schedulePoll();
    }
  }

  function wake(): void {
    if (!stopped) void pump();
  }

  /** The next poll, `pollPauseMs` after the last look. */
  function schedulePoll(): void {
    clearTimeout(poller);
    if (stopped) return;
    poller = setTimeout(wake, pollPauseMs);
    poller.unref();
  }

  const keepFinishedMs = options.keepFinishedMs ?? 24 * 60 * 60_000;
  const sweeper = setInterval(() => {
    selectRows(
      db,
      sql`delete from push_deliveries where state <> 'pending'
          and finished_at < now() - ${keepFinishedMs} * interval '1 millisecond'`,
    ).catch((error: unknown) => log.warn("removing finished push deliveries failed", { error }));
  }, 10 * 60_000);
  sweeper.unref();
  const unsubscribe = options.notifications?.subscribe(pushWakeups, wake);
  unsubscribe?.catch((error: unknown) => log.error("push wake-ups unavailable", { error }));
  wake();

  return {
    wake,
    inFlight: () => held.size,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(poller);
      clearInterval(sweeper);
      await (await unsubscribe?.catch(() => undefined))?.();
      const ids = [...held.keys()];
      stopping.abort(new Error("the push worker stopped"));
      await Promise.allSettled(held.values());
      await writing;
      // Leases of deliveries cut short are released, so another instance takes them at once.
      if (ids.length > 0) {
        await selectRows(
          db,
          sql`update push_deliveries set lease_until = null
              where state = 'pending' and id in (${sql.join(
                ids.map((id) => sql`${id}`),
                sql`, `,
              )})
              returning id`,
        ).catch((error: unknown) => log.warn("releasing push leases failed", { error }));
      }
    },
  };
}

/**
 * One delivery attempt as a trace of its own (it runs in the worker, after the request that
 * caused it has been answered): the delivery, its task, the attempt and how it ended. Never the
 * target's URL, its token or its credentials. The receiver gets the span's `traceparent`.
 */
function tracePushDelivery(row: Claimed, send: () => Promise<Outcome>): Promise<Outcome> {
  return inSpan(
    "peergate.push.deliver",
    {
      "peergate.push.delivery_id": Number(row.id),
      "peergate.push.attempt": row.attempts,
      "peergate.a2a.task_id": row.task_id,
      "peergate.caller.id": row.caller_id,
    },
    async (span) => {
      const outcome = await send();
      span.setAttribute("peergate.push.outcome", outcome.kind);
      if (outcome.kind === "delivered") {
        span.setAttribute("http.response.status_code", outcome.status);
      } else {
        failSpan(span, undefined, outcome.kind);
      }
      return outcome;
    },
    { kind: SpanKind.CLIENT, parent: ROOT_CONTEXT },
  );
}
