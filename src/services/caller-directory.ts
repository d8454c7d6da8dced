// Where authentication finds callers: by credential hash, through a per-instance cache that can
// never outlive a revocation. Every instance LISTENs on the caller channel; any caller event drops
// that caller's entries at once. The cache is trusted only while the notification connection is
// provably alive: the directory NOTIFYs itself a heartbeat and, when one has not come back within
// `staleAfterMs` (or the connection was re-established, losing whatever was sent meanwhile), it
// drops everything and reads from the database until heartbeats flow again.
import { randomUUID } from "node:crypto";
import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client.ts";
import { type Caller, type Credential, callers, credentials } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { type CallerEvent, callerChannel, parseCallerEvent } from "./caller-events.ts";

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
  heartbeatMs?: number;
  staleAfterMs?: number;
  ttlMs?: number;
  maxEntries?: number;
  clock?: () => number;
}): Promise<CallerDirectory> {
  const { database, logger } = options;
  const db = database.db;
  const heartbeatMs = options.heartbeatMs ?? 250;
  const staleAfterMs = options.staleAfterMs ?? 1_000;
  const ttlMs = options.ttlMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 100_000;
  const clock = options.clock ?? (() => performance.now());
  const nonce = randomUUID();
  const heartbeatPayload = JSON.stringify({ heartbeat: nonce });

  const byHash = new Map<string, Entry>();
  const byIssuer = new Map<string, { callers: Caller[]; at: number }>();
  const hashesByCaller = new Map<string, Set<string>>();
  const listeners = new Set<(event: CallerEvent) => void>();
  let lastHeartbeat = Number.NEGATIVE_INFINITY;
  let listening = false;
  let closed = false;
  // Bumped by every event and every drop. A database read that started in an older epoch may
  // have read a row from before a revocation, so its result is returned but never cached.
  let epoch = 0;

  const dropAll = () => {
    epoch += 1;
    byHash.clear();
    byIssuer.clear();
    hashesByCaller.clear();
  };
  const dropCaller = (callerId: string) => {
    epoch += 1;
    // Issuer entries are few and caller changes rare: forget them all rather than index them.
    byIssuer.clear();
    for (const hash of hashesByCaller.get(callerId) ?? []) byHash.delete(hash);
    hashesByCaller.delete(callerId);
  };
  const isTrusted = () => listening && !closed && clock() - lastHeartbeat <= staleAfterMs;

  const unlisten = await database.listen(
    callerChannel,
    (payload) => {
      if (payload === heartbeatPayload) {
        lastHeartbeat = clock();
        return;
      }
      if (payload.startsWith('{"heartbeat"')) return; // another instance's heartbeat
      const event = parseCallerEvent(payload);
      if (!event) {
        dropAll();
        return;
      }
      dropCaller(event.callerId);
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (error) {
          logger.error("caller event listener failed", { error });
        }
      }
    },
    () => {
      // (Re)connected: anything sent while we were away is lost, so forget everything.
      listening = true;
      dropAll();
    },
  );
  listening = true;

  const beat = async () => {
    if (closed) return;
    if (!isTrusted() && byHash.size > 0) dropAll();
    try {
      await database.notify(callerChannel, heartbeatPayload);
    } catch (error) {
      if (!closed) logger.warn("caller directory heartbeat failed; cache disabled", { error });
    }
  };
  await beat();
  const timer = setInterval(() => void beat(), heartbeatMs);
  timer.unref();

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
      const rows = await db
        .select()
        .from(callers)
        .where(and(eq(callers.kind, "peer")));
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
      clearInterval(timer);
      dropAll();
      await unlisten();
    },
  };
}
