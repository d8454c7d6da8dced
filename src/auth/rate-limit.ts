// Failed-authentication throttling, per source address and per caller name. Counters live in
// process memory on purpose: they are a brake on guessing, not state that must survive a restart
// or be shared, and a database write per failed attempt would hand an attacker a write amplifier.
// Fixed windows keep the hot path a Map lookup; the map is bounded so a spray of addresses cannot
// grow it without limit.

export type RateLimiter = {
  /** Seconds to wait if `key` is over its limit now, else 0. */
  retryAfter(key: string, nowMs: number): number;
  /** Records one failure for `key`. */
  fail(key: string, nowMs: number): void;
};

export function createRateLimiter(options: {
  maxFailures: number;
  windowMs: number;
  maxKeys?: number;
}): RateLimiter {
  const maxKeys = options.maxKeys ?? 50_000;
  const windows = new Map<string, { start: number; count: number }>();
  return {
    retryAfter(key, nowMs) {
      const w = windows.get(key);
      if (!w || nowMs - w.start >= options.windowMs || w.count < options.maxFailures) return 0;
      return Math.max(1, Math.ceil((w.start + options.windowMs - nowMs) / 1000));
    },
    fail(key, nowMs) {
      const w = windows.get(key);
      if (!w || nowMs - w.start >= options.windowMs) {
        if (!w && windows.size >= maxKeys) {
          // Evict the oldest entry (Map keeps insertion order).
          const oldest = windows.keys().next();
          if (!oldest.done) windows.delete(oldest.value);
        }
        windows.set(key, { start: nowMs, count: 1 });
      } else {
        w.count += 1;
      }
    },
  };
}
