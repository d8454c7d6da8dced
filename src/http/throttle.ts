// Failed authentication is throttled per source address and per claimed caller name: past the
// limit a client gets 429 with Retry-After before any credential is checked (and before anything
// is written to the audit trail, so a flood of guesses cannot flood the chain).
import type { RateLimiter } from "../auth/rate-limit.ts";
import { RateLimitedError, UnauthenticatedError } from "../errors.ts";

export async function throttleAuth<T>(
  limiter: RateLimiter,
  keys: readonly string[],
  authenticate: () => Promise<T>,
  nowMs: () => number = Date.now,
): Promise<T> {
  const now = nowMs();
  const wait = Math.max(0, ...keys.map((k) => limiter.retryAfter(k, now)));
  if (wait > 0) {
    throw new RateLimitedError("too many failed authentication attempts; retry later", wait);
  }
  try {
    return await authenticate();
  } catch (error) {
    if (error instanceof UnauthenticatedError) for (const k of keys) limiter.fail(k, nowMs());
    throw error;
  }
}
