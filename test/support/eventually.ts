// Waiting for something to become true: the one way the suite does it (docs/testing.md). A test
// never sleeps a fixed time and never asserts how long something took; it looks again until the
// condition holds, under one generous deadline, because a loaded machine is slow, not wrong.
//
// The pauses and the deadline run on Node's own timers (node:timers/promises and
// AbortSignal.timeout), which vi.useFakeTimers leaves alone, so a test with a fake clock can
// still wait for real work (a database, a child process) to finish.
import { setTimeout as pause } from "node:timers/promises";
import { inspect } from "node:util";

export type EventuallyOptions = {
  /**
   * The overall deadline (default 25 s: generous, yet inside the suite's 30 s test timeout so the
   * failure names what was awaited). A test that waits longer sets its own test timeout too.
   */
  withinMs?: number;
  /** The pause between looks (default 25 ms). */
  everyMs?: number;
};

/** Thrown from a look: stop waiting now and fail with this (a process that exited, say). */
export class GiveUpError extends Error {}

type Done<T> = Exclude<T, undefined | null | false>;

/**
 * Looks until `look` returns something other than `undefined`, `null` or `false`, and returns
 * that. A look that throws counts as "not yet" (a server not listening yet), unless it throws a
 * `GiveUpError`. On the deadline it fails naming `what` and the last value or error seen.
 */
export function eventually<T>(
  what: string,
  look: () => T | Promise<T>,
  options: EventuallyOptions = {},
): Promise<Done<T>> {
  return waitUntil(
    what,
    look,
    (value): value is Done<T> => value !== undefined && value !== null && value !== false,
    options,
  );
}

/**
 * Reads `read` until `accept` holds for what it returned, and returns that; on the deadline the
 * failure shows the last value read (a run's status, a row count), not just "false".
 */
export function eventuallyValue<T>(
  what: string,
  read: () => T | Promise<T>,
  accept: (value: T) => boolean,
  options: EventuallyOptions = {},
): Promise<T> {
  return waitUntil(what, read, (value): value is T => accept(value), options);
}

async function waitUntil<T, D extends T>(
  what: string,
  read: () => T | Promise<T>,
  done: (value: T) => value is D,
  options: EventuallyOptions,
): Promise<D> {
  const withinMs = options.withinMs ?? 25_000;
  const deadline = AbortSignal.timeout(withinMs);
  let seen = "nothing";
  for (;;) {
    try {
      const value = await read();
      if (done(value)) return value;
      seen = describe(value);
    } catch (error) {
      if (error instanceof GiveUpError) throw error;
      seen = `the error ${describe(error)}`;
    }
    if (deadline.aborted) throw new Error(`waited ${withinMs} ms for ${what}; last seen: ${seen}`);
    await pause(options.everyMs ?? 25);
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) return value.message;
  return inspect(value, { depth: 4, breakLength: Infinity, maxStringLength: 500 });
}
