// Failed-authentication throttling, per network prefix and per caller name. Counters live in
// process memory on purpose: they are a brake on guessing, not state that must survive a restart
// or be shared, and a database write per failed attempt would hand an attacker a write amplifier.
// Fixed windows keep the hot path a Map lookup; the map is bounded so a spray of addresses cannot
// grow it without limit.
import { isIPv4, isIPv6 } from "node:net";

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

/** The eight 16-bit groups of an IPv6 address, or undefined if it is not one. */
function expandIpv6(address: string): number[] | undefined {
  if (!isIPv6(address)) return undefined;
  let text = address.split("%")[0] ?? "";
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split(".").map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/**
 * The network a source address is throttled as: an IPv4 address is one host; an IPv6 host owns
 * a whole /64 (SLAAC and privacy addresses hand every host one), so its failures count for the
 * /64. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a dual-stack socket reports) is
 * its IPv4 address. Anything else (a Unix socket, "unknown") is kept as it is.
 */
export function sourceNetwork(address: string): string {
  if (isIPv4(address)) return address;
  const groups = expandIpv6(address);
  if (!groups) return address;
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (mapped) {
    const [hi = 0, lo = 0] = groups.slice(6);
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join(".");
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`;
}
