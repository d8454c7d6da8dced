// Where authentication finds callers: by credential hash, through a per-instance cache that can
// never outlive a revocation. Every instance hears the caller channel (through the instance's one
// notification hub, src/db/notifications.ts); any caller event drops that caller's entries at
// once. The cache is trusted only while the hub is healthy (its own heartbeat comes back within
// `staleAfterMs`); whenever messages may have been lost (a reconnect, heartbeats stopping) it
// drops everything and reads from the database until heartbeats flow again. A JWT's issuer is
// looked up by index on every request, never cached (see findByJwtIssuer).
import { and, eq, isNotNull, sql } from "drizzle-orm";
import type { Database } from "../db/client.ts";
import { type Notifications, openNotifications } from "../db/notifications.ts";
import { type Caller, type Credential, callers, credentials } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { type CallerEvent, callerEvents } from "./caller-events.ts";

export type CredentialMatch = { caller: Caller; credential: Credential };

export type CallerDirectory = {
  /** The caller and credential whose secret hashes to `secretHash`, whatever their state. */
  findByCredentialHash(secretHash: string): Promise<CredentialMatch | undefined>;
  /** The peer callers whose JWT settings name `issuer`. */
  findByJwtIssuer(issuer: string): Promise<Caller[]>;
  /** Called for every caller event, on this instance, after the cache dropped the caller. */
  onCallerEvent(listener: (event: CallerEvent) => void): () => void;
  /** Drops what is cached for one caller (a change committed on this instance). */
  forget(callerId: string): void;
  /** True while cached entries may be used. */
  readonly trusted: boolean;
  readonly size: number;
  close(): Promise<void>;
};

type Entry = { match: CredentialMatch; at: number };

export async function openCallerDirectory(options: {
  database: Database;
  logger: Logger;
  /** The instance's hub. Without one the directory opens (and closes) its own. */
  notifications?: Notifications;
  /** Heartbeat settings of the hub the directory opens when given none. */
  heartbeatMs?: number;
  staleAfterMs?: number;
  ttlMs?: number;
  maxEntries?: number;
  clock?: () => number;
}): Promise<CallerDirectory> {
  const { database, logger } = options;
  const db = database.db;
  const ttlMs = options.ttlMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 100_000;
  const clock = options.clock ?? (() => performance.now());
  const hub =
    options.notifications ??
    (await openNotifications({
      database,
      logger,
      ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
      ...(options.staleAfterMs !== undefined ? { staleAfterMs: options.staleAfterMs } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
    }));
  const ownsHub = options.notifications === undefined;

  const byHash = new Map<string, Entry>();
  const hashesByCaller = new Map<string, Set<string>>();
  const listeners = new Set<(event: CallerEvent) => void>();
  let closed = false;
  // Bumped by every event and every drop. A database read that started in an older epoch may
  // have read a row from before a revocation, so its result is returned but never cached.
  let epoch = 0;

  const dropAll = () => {
    epoch += 1;
    byHash.clear();
    hashesByCaller.clear();
  };
  const dropCaller = (callerId: string) => {
    epoch += 1;
    for (const hash of hashesByCaller.get(callerId) ?? []) byHash.delete(hash);
    hashesByCaller.delete(callerId);
  };
  const isTrusted = () => !closed && hub.healthy;

  // Anything sent while notifications were not arriving is lost: forget everything.
  const offGap = hub.onGap(dropAll);
  const unsubscribe = await hub.subscribe(callerEvents, (notice) => {
    if ("unreadable" in notice) {
      dropAll();
      return;
    }
    dropCaller(notice.callerId);
    for (const listener of listeners) {
      try {
        listener(notice);
      } catch (error) {
        logger.error("caller event listener failed", { error });
      }
    }
  });

  const remember = (hash: string, match: CredentialMatch, readEpoch: number) => {
    if (!isTrusted() || readEpoch !== epoch) return;
    if (byHash.size >= maxEntries) dropAll();
    byHash.set(hash, { match, at: clock() });
    if (match) {
      const set = hashesByCaller.get(match.caller.id) ?? new Set();
      set.add(hash);
      hashesByCaller.set(match.caller.id, set);
    }
  };

  return {
    async findByCredentialHash(secretHash) {
      if (isTrusted()) {
        const hit = byHash.get(secretHash);
        if (hit && clock() - hit.at < ttlMs) return hit.match;
      }
      const readEpoch = epoch;
      const [row] = await db
        .select({ caller: callers, credential: credentials })
        .from(credentials)
        .innerJoin(callers, eq(callers.id, credentials.callerId))
        .where(eq(credentials.secretHash, secretHash))
        .limit(1);
      // Misses are not cached: an unknown hash would let a token spray fill the cache.
      if (row) remember(secretHash, row, readEpoch);
      return row;
    },
    async findByJwtIssuer(issuer) {
      // Always one indexed read (callers_jwt_issuer_idx), never a cache: the issuer is not a
      // secret, so an answer that came faster for an issuer in use than for one nobody trusts
      // would tell a stranger which issuers peergate trusts (test/security/jwt.security.test.ts
      // times exactly that). The read names only the peers of this issuer, not every JWT peer.
      const rows = await db
        .select()
        .from(callers)
        .where(
          and(
            eq(callers.kind, "peer"),
            isNotNull(callers.jwt),
            sql`${callers.jwt}->>'issuer' = ${issuer}`,
          ),
        );
      return rows.filter((c) => c.jwt?.issuer === issuer);
    },
    forget(callerId) {
      dropCaller(callerId);
    },
    onCallerEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get trusted() {
      return isTrusted();
    },
    get size() {
      return byHash.size;
    },
    async close() {
      if (closed) return;
      closed = true;
      offGap();
      dropAll();
      await unsubscribe();
      if (ownsHub) await hub.close();
    },
  };
}
