// Failed authentication is throttled per source network (an IPv4 address, an IPv6 /64) and per
// claimed caller name, and only the failures are: every request still has its credential
// checked, one that verifies is let in however many failures its address or name has behind it,
// and past the limit a failure is answered 429 with Retry-After instead of 401. So an attacker
// cannot lock a caller out by failing in its name or from behind the same NAT, and a flood of
// guesses gains nothing (every credential peergate guards has 256 bits; docs/throttling.md).
import { type RateLimiter, sourceNetwork } from "../auth/rate-limit.ts";
import { RateLimitedError, UnauthenticatedError } from "../errors.ts";

/** A throttle key as counted: `source:<address>` becomes `source:<network>`. */
export function throttleKey(key: string): string {
  return key.startsWith("source:") ? `source:${sourceNetwork(key.slice("source:".length))}` : key;
}

/** Seconds until every one of `keys` is below its failure limit again (0: none is over it). */
export function throttledFor(
  limiter: RateLimiter,
  keys: readonly string[],
  nowMs: number = Date.now(),
): number {
  return Math.max(0, ...keys.map((k) => limiter.retryAfter(throttleKey(k), nowMs)));
}

/**
 * Runs `authenticate`; a failure (UnauthenticatedError) counts against every key and, when a
 * key was already over its limit, becomes RateLimitedError. A success is never refused.
 */
export async function throttleAuth<T>(
  limiter: RateLimiter,
  keys: readonly string[],
  authenticate: () => Promise<T>,
  nowMs: () => number = Date.now,
): Promise<T> {
  try {
    return await authenticate();
  } catch (error) {
    if (!(error instanceof UnauthenticatedError)) throw error;
    throw failAuth(limiter, keys, error, nowMs());
  }
}

/** Counts one failure against `keys`; returns the error to answer it with (401 or 429). */
export function failAuth(
  limiter: RateLimiter,
  keys: readonly string[],
  error: UnauthenticatedError,
  nowMs: number = Date.now(),
): UnauthenticatedError | RateLimitedError {
  const wait = throttledFor(limiter, keys, nowMs);
  for (const k of keys) limiter.fail(throttleKey(k), nowMs);
  return wait > 0
    ? new RateLimitedError("too many failed authentication attempts; retry later", wait)
    : error;
}
