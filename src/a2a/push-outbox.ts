// The push outbox (issue 16): every stored update of a task becomes one pending delivery per push
// config of that task, inserted by the same transaction that stores the update, so an update that
// commits is delivered and one that rolls back never is. The task store calls
// `enqueuePushDeliveries` inside its write; the workers of every instance claim the rows
// (push-worker.ts). A NOTIFY in the same transaction wakes them at commit; without it they would
// still find the rows on their next poll.
import { sql } from "drizzle-orm";
import { type DbTransaction, selectRows } from "../db/client.ts";
import type { Channel } from "../db/notifications.ts";

export const pushChannelName = "peergate_push";

/** Wakes push workers; the message carries nothing (the rows are the truth). */
export const pushWakeups: Channel<true> = {
  name: pushChannelName,
  parse: () => true,
  format: () => "",
};

/**
 * Queues the stored task `task` for every push config of (`taskId`, `callerId`); returns how many
 * deliveries were queued. Costs one indexed INSERT … SELECT when the task has no config.
 */
export async function enqueuePushDeliveries(
  tx: DbTransaction,
  write: { taskId: string; callerId: string; task: Record<string, unknown> },
): Promise<number> {
  const rows = await selectRows<{ id: number }>(
    tx,
    sql`insert into push_deliveries (push_config_id, task_id, caller_id, task)
        select id, task_id, caller_id, ${JSON.stringify(write.task)}::jsonb from push_configs
        where task_id = ${write.taskId} and caller_id = ${write.callerId}
        order by created_at, id
        returning id`,
  );
  if (rows.length > 0) await tx.execute(sql`select pg_notify(${pushChannelName}, '')`);
  return rows.length;
}
