// How the database's pollers (the audit chainer, the push worker) slow down when they find
// nothing: the pause doubles a few times, so work that lands just after a look is still found
// soon, and once it would pass `rampEndMs` it is the idle pause at once, so an idle instance
// reaches its quiet rate seconds after its last work, not minutes.

/** Doubling pauses end here: past it, the next pause is the idle one. */
export const rampEndMs = 2_000;

/** The pause after one more look that found nothing, from the pause before it. */
export function backOff(pauseMs: number, idleMs: number): number {
  const next = pauseMs * 2;
  return next > rampEndMs ? Math.max(idleMs, pauseMs) : Math.min(next, idleMs);
}
