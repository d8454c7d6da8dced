// Which rows of each table family may go once they are older than the family's retention, and
// the batched deletes that remove them (the audit trail is src/db/audit-prune.ts). What each row
// guards decides what is never deleted, whatever its age:
//
// - runs (with their tool calls and notices, by cascade): a run is the record of work done and
//   of a parked run's pending approval. Only an ended run goes (completed, failed, canceled,
//   rejected, expired, interrupted, revoked), never one that is submitted, working, parked or
//   waiting for input. A webhook claim that named it keeps its row, its run set to null
//   (migration 0013): a delivery whose run is gone reads as done, never as failed and retried.
// - tasks (with their push configs): what a peer reads back with GetTask and ListTasks. Only a
//   task in a terminal state, whose run is not live, and with no push delivery still pending.
// - push deliveries: the outbox. Only delivered or failed ones; a pending one is work to do.
// - webhook claims: they refuse a replayed delivery. GitHub signs only the body, so a claim's
//   body hash refuses a replay for `githubReplayWindowMs` (a year): a GitHub caller's claim is
//   kept at least that long, whatever the family's days; a claim whose run is live is kept.
// - JWT ids: a claim refuses a second use of a token until it expires (claims are stored with
//   the token's exp plus the clock tolerance). Only claims expired for longer than a margin for
//   clocks that disagree go.
//
// Every statement deletes at most `batchSize` rows, oldest first through an index, so no
// statement holds locks for long and the live tables never wait behind a prune.
import { type SQL, sql } from "drizzle-orm";
import type { RetentionFamily } from "../domain/retention.ts";
import { type DbOrTx, selectRows } from "./client.ts";

/** Run statuses in which a run is still live: never pruned. */
const liveRunStatuses = sql.raw(`('submitted', 'working', 'parked', 'input-required')`);

/** A2A task states after which a task never changes again. */
const terminalTaskStates = sql.raw(
  `('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')`,
);

/** A JWT claim expired for less than this may still meet a server whose clock lags. */
const jtiClockMarginSql = sql.raw(`interval '10 minutes'`);

export type PruneWindow = {
  /** Rows written before this may go. */
  cutoff: Date;
  /** How long a GitHub caller's claim refuses a replayed body (src/services/accept-webhook.ts). */
  githubReplayWindowMs: number;
};

type FamilyQuery = { table: string; key: string; order: string; where: (w: PruneWindow) => SQL };

const families: Record<Exclude<RetentionFamily, "audit">, FamilyQuery> = {
  runs: {
    table: "runs",
    key: "id",
    order: "created_at",
    where: (w) =>
      sql`x.created_at < ${w.cutoff.toISOString()}::timestamptz
          and x.status not in ${liveRunStatuses}`,
  },
  tasks: {
    table: "a2a_tasks",
    key: "id",
    order: "created_at",
    where: (w) =>
      sql`x.created_at < ${w.cutoff.toISOString()}::timestamptz
          and x.task->'status'->>'state' in ${terminalTaskStates}
          and not exists (select 1 from runs r
                           where r.a2a_task_id = x.id and r.status in ${liveRunStatuses})
          and not exists (select 1 from push_configs pc
                            join push_deliveries d on d.push_config_id = pc.id and d.state = 'pending'
                           where pc.task_id = x.id)`,
  },
  "push-deliveries": {
    table: "push_deliveries",
    key: "id",
    order: "created_at",
    where: (w) =>
      sql`x.created_at < ${w.cutoff.toISOString()}::timestamptz and x.state <> 'pending'`,
  },
  "webhook-claims": {
    table: "webhook_deliveries",
    key: "id",
    order: "received_at",
    where: (w) =>
      sql`x.received_at < ${w.cutoff.toISOString()}::timestamptz
          and (x.received_at < now() - ${w.githubReplayWindowMs}::double precision * interval '1 millisecond'
               or not exists (select 1 from callers c where c.id = x.caller_id and c.kind = 'github'))
          and (x.run_id is null or not exists (select 1 from runs r
                                                where r.id = x.run_id and r.status in ${liveRunStatuses}))`,
  },
  "jti-claims": {
    table: "jwt_replays",
    key: "(issuer, jti)",
    order: "expires_at",
    where: (w) =>
      sql`x.expires_at < ${w.cutoff.toISOString()}::timestamptz
          and x.expires_at < now() - ${jtiClockMarginSql}`,
  },
};

export type PrunableFamily = keyof typeof families;

/** Rows of `family` the prune would delete now. */
export async function countPrunable(
  db: DbOrTx,
  family: PrunableFamily,
  window: PruneWindow,
): Promise<number> {
  const f = families[family];
  const [row] = await selectRows<{ n: unknown }>(
    db,
    sql`select count(*)::bigint as n from ${sql.identifier(f.table)} x where ${f.where(window)}`,
  );
  return Number(row?.n ?? 0);
}

/**
 * Deletes up to `batchSize` of the oldest prunable rows of `family` in one statement; returns how
 * many went (fewer than `batchSize`: nothing more to prune). A task takes its push configs along
 * (their deliveries follow by cascade), in the same statement.
 */
export async function deletePrunableBatch(
  db: DbOrTx,
  family: PrunableFamily,
  window: PruneWindow,
  batchSize: number,
): Promise<number> {
  const f = families[family];
  const table = sql.identifier(f.table);
  const key = sql.raw(f.key);
  const order = sql.raw(`x.${f.order}`);
  const victims = sql`select ${sql.raw(f.key === "id" ? "x.id" : "x.issuer, x.jti")} from ${table} x
    where ${f.where(window)} order by ${order} limit ${batchSize}`;
  const deleted =
    family === "tasks"
      ? sql`with gone as (delete from ${table} where ${key} in (${victims}) returning id),
              configs as (delete from push_configs where task_id in (select id from gone))
            select count(*)::int as n from gone`
      : sql`with gone as (delete from ${table} where ${key} in (${victims}) returning 1)
            select count(*)::int as n from gone`;
  const [row] = await selectRows<{ n: unknown }>(db, deleted);
  return Number(row?.n ?? 0);
}
