// Caller changes are announced on one Postgres channel, inside the transaction that makes them:
// NOTIFY is delivered at commit, so no instance hears of a change that rolled back, and every
// instance sharing the database hears of every change that committed (DESIGN §6).
import { sql } from "drizzle-orm";
import type { Db, DbTransaction } from "../db/client.ts";
import type { Channel } from "../db/notifications.ts";
import type { CallerChange } from "../domain/caller.ts";

export const callerChannel = "peergate_callers";

export type CallerEvent = {
  callerId: string;
  name: string;
  version: number;
  change: CallerChange;
  /** `revoked`: the waiting runs the revocation closed (`revoked`), so surfaces learn they ended. */
  closedRunIds?: string[];
};

const runIdsPerEvent = 100;

/** Run ids in groups small enough for one NOTIFY payload; always at least one (maybe empty). */
export function chunkRunIds(ids: readonly string[]): string[][] {
  const chunks: string[][] = [];
  for (let i = 0; i < ids.length; i += runIdsPerEvent) {
    chunks.push(ids.slice(i, i + runIdsPerEvent));
  }
  return chunks.length > 0 ? chunks : [[]];
}

/** A caller event, or a message on the channel that could not be read (treat it as "any caller"). */
export type CallerNotice = CallerEvent | { readonly unreadable: true };

export const callerEvents: Channel<CallerNotice> = {
  name: callerChannel,
  parse(payload) {
    // Heartbeats once went on this channel; an instance of an older version may still send them.
    if (payload.startsWith('{"heartbeat"')) return undefined;
    return parseCallerEvent(payload) ?? { unreadable: true };
  },
  format: (notice) => JSON.stringify(notice),
};

export async function announceCallerChange(tx: DbTransaction, event: CallerEvent): Promise<void> {
  await tx.execute(sql`select pg_notify(${callerChannel}, ${callerEvents.format(event)})`);
}

export function parseCallerEvent(payload: string): CallerEvent | undefined {
  try {
    const value = JSON.parse(payload) as Partial<CallerEvent>;
    if (typeof value.callerId === "string" && typeof value.version === "number") {
      return value as CallerEvent;
    }
  } catch {
    // A malformed payload is ignored here; the watcher treats any event as "drop the cache".
  }
  return undefined;
}

/**
 * Runs a caller change in one transaction. `announce` NOTIFYs every instance at commit; after the
 * commit, `callerChanged` tells this instance at once, so a revocation made here is refused here
 * by the very next request rather than when the notification comes back.
 */
export async function changeCaller<T>(
  services: { db: Db; callerChanged?: ((event: CallerEvent) => void) | undefined },
  work: (tx: DbTransaction, announce: (event: CallerEvent) => Promise<void>) => Promise<T>,
): Promise<T> {
  const events: CallerEvent[] = [];
  const result = await services.db.transaction((tx) =>
    work(tx, async (event) => {
      await announceCallerChange(tx, event);
      events.push(event);
    }),
  );
  for (const event of events) services.callerChanged?.(event);
  return result;
}
