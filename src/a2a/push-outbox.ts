// The push outbox (issue 16): every stored update of a task becomes one pending delivery per push
// config of that task, inserted by the very statement that stores the update (a data-modifying
// CTE), so an update that commits is delivered and one that does not never is, at no extra round
// trip for a task without configs. The task store wraps its upsert in `withPushOutbox`; the
// workers of every instance claim the rows (push-worker.ts). A NOTIFY in the same statement wakes
// them at commit; without it they would still find the rows on their next poll.
import { type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { Channel } from "../db/notifications.ts";

export const pushChannelName = "peergate_push";

/** Wakes push workers; the message carries nothing (the rows are the truth). */
export const pushWakeups: Channel<true> = {
  name: pushChannelName,
  parse: () => true,
  format: () => "",
};

/**
 * The statement that runs `write` — an upsert of `a2a_tasks` returning `id`, `caller_id` and
 * `task` for the row it stored (none when its guard refused the update) — and queues what it
 * stored for every push config of that task and caller. Its one row's `queued` says how many
 * deliveries were queued.
 */
export function withPushOutbox(write: SQLWrapper): SQL {
  // drizzle puts an embedded query in parentheses itself.
  return sql`with written as ${write},
      queued as (
        insert into push_deliveries (push_config_id, task_id, caller_id, task)
        select c.id, c.task_id, c.caller_id, w.task
        from written w join push_configs c on c.task_id = w.id and c.caller_id = w.caller_id
        order by c.created_at, c.id
        returning id)
      select count(*)::int as queued,
        (select pg_notify(${pushChannelName}, '') where exists (select 1 from queued)) as woke
      from queued`;
}
