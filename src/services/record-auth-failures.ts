// Failed authentications, audited as one summary event per window and source network, not one
// event per failure: the audit chain is appended under one global lock, so an event per guess
// let a flood of guesses slow every writer. Failures are counted in memory; a source's summary
// is written when its window closes (a timer looks every few seconds), when the number of open
// windows reaches its bound (the oldest is written early), or at shutdown (`close`). Nothing is
// dropped: every failure is in exactly one written summary, unless the process dies.
import { sourceNetwork } from "../auth/rate-limit.ts";
import { appendAuditEvent } from "../db/audit.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../log.ts";

export type AuthFailure = {
  surface: string;
  /** The source address as seen on the connection; counted as its network. */
  source: string;
  reason: string;
  /** What kind of credential was presented (peer-token, jwt, github-signature …). */
  credentialKind: string;
  /** The claimed name, already reduced to what the trail may keep (see recordableName). */
  claimedName?: string | undefined;
  /** `caller:<id>` when the credential matched a caller. */
  subject?: string | null | undefined;
};

export type AuthFailureLog = {
  record(failure: AuthFailure): void;
  /** Writes the summaries of the windows that have closed by now. */
  flushClosed(): Promise<void>;
  /** Writes every summary, open windows included (shutdown, or a reader that needs them now). */
  flushAll(): Promise<void>;
  /** Stops the timer and writes everything. */
  close(): Promise<void>;
};

/** How many distinct claimed names one summary lists (the rest are counted). */
const maxNamesPerSummary = 50;

type Window = {
  network: string;
  first: number;
  last: number;
  count: number;
  // Maps, not objects: a claimed name comes from the request (`constructor`, `__proto__`).
  surfaces: Map<string, number>;
  reasons: Map<string, number>;
  credentialKinds: Map<string, number>;
  claimedNames: Map<string, number>;
  otherNames: number;
  subjects: Set<string>;
};

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

export function createAuthFailureLog(options: {
  db: Db;
  logger: Logger;
  windowMs?: number;
  /** Open windows kept at most; default 10 000. */
  maxOpen?: number;
  /** How often closed windows are looked for; 0 disables the timer (tests call flushClosed). */
  checkEveryMs?: number;
  nowMs?: () => number;
}): AuthFailureLog {
  const windowMs = options.windowMs ?? 60_000;
  const maxOpen = options.maxOpen ?? 10_000;
  const nowMs = options.nowMs ?? Date.now;
  const open = new Map<string, Window>();
  // Writes are chained: summaries go to the trail one at a time, in the order they closed.
  let writing: Promise<void> = Promise.resolve();

  const write = (w: Window): Promise<void> => {
    writing = writing.then(async () => {
      const subjects = [...w.subjects];
      try {
        await appendAuditEvent(options.db, {
          actor: "system",
          kind: "auth.failed",
          subject: subjects.length === 1 ? (subjects[0] ?? null) : null,
          data: {
            source: w.network,
            count: w.count,
            first: new Date(w.first).toISOString(),
            last: new Date(w.last).toISOString(),
            surfaces: Object.fromEntries(w.surfaces),
            reasons: Object.fromEntries(w.reasons),
            credentialKinds: Object.fromEntries(w.credentialKinds),
            claimedNames: Object.fromEntries(w.claimedNames),
            ...(w.otherNames > 0 ? { otherClaimedNames: w.otherNames } : {}),
            ...(subjects.length > 1 ? { subjects } : {}),
          },
        });
      } catch (error) {
        // Losing the audit of refusals must not turn them into acceptances or a crash.
        options.logger.error("could not audit a summary of failed authentications", {
          error,
          source: w.network,
          count: w.count,
        });
      }
    });
    return writing;
  };

  const take = (network: string): Window | undefined => {
    const w = open.get(network);
    if (w) open.delete(network);
    return w;
  };

  const flushClosed = (): Promise<void> => {
    const now = nowMs();
    for (const [network, w] of open) {
      if (now - w.first >= windowMs) void write(take(network) as Window);
    }
    return writing;
  };

  const flushAll = (): Promise<void> => {
    for (const network of [...open.keys()]) void write(take(network) as Window);
    return writing;
  };

  const timer =
    (options.checkEveryMs ?? Math.min(5_000, windowMs)) > 0
      ? setInterval(() => void flushClosed(), options.checkEveryMs ?? Math.min(5_000, windowMs))
      : undefined;
  timer?.unref();

  return {
    record(failure) {
      const now = nowMs();
      const network = sourceNetwork(failure.source);
      let w = open.get(network);
      if (w && now - w.first >= windowMs) {
        void write(take(network) as Window);
        w = undefined;
      }
      if (!w) {
        if (open.size >= maxOpen) {
          const oldest = open.keys().next();
          if (!oldest.done) void write(take(oldest.value) as Window);
        }
        w = {
          network,
          first: now,
          last: now,
          count: 0,
          surfaces: new Map(),
          reasons: new Map(),
          credentialKinds: new Map(),
          claimedNames: new Map(),
          otherNames: 0,
          subjects: new Set(),
        };
        open.set(network, w);
      }
      w.count += 1;
      w.last = now;
      increment(w.surfaces, failure.surface);
      increment(w.reasons, failure.reason);
      increment(w.credentialKinds, failure.credentialKind);
      if (failure.claimedName !== undefined) {
        if (w.claimedNames.has(failure.claimedName) || w.claimedNames.size < maxNamesPerSummary) {
          increment(w.claimedNames, failure.claimedName);
        } else {
          w.otherNames += 1;
        }
      }
      if (failure.subject) w.subjects.add(failure.subject);
    },
    flushClosed,
    flushAll,
    async close() {
      if (timer) clearInterval(timer);
      await flushAll();
    },
  };
}
