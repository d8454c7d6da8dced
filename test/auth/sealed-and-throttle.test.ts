import { describe, expect, it } from "vitest";
import { createRateLimiter, sourceNetwork } from "../../src/auth/rate-limit.ts";
import {
  generateSecretKeyText,
  openSecret,
  parseSecretKey,
  sealSecret,
} from "../../src/auth/sealed-secrets.ts";
import { RateLimitedError, UnauthenticatedError } from "../../src/errors.ts";
import { throttleAuth } from "../../src/http/throttle.ts";

describe("sealed webhook secrets", () => {
  const key = parseSecretKey(generateSecretKeyText());
  const other = parseSecretKey(generateSecretKeyText());
  if (!key || !other) throw new Error("key generation failed");

  it("round-trips under the same key and context, and never contains the secret", () => {
    const sealed = sealSecret(key, "pgh_topsecret", "caller:1");
    expect(sealed).not.toContain("topsecret");
    expect(openSecret(key, sealed, "caller:1")).toBe("pgh_topsecret");
  });

  it("refuses another key, another context, and any altered byte", () => {
    const sealed = sealSecret(key, "pgh_topsecret", "caller:1");
    expect(openSecret(other, sealed, "caller:1")).toBeUndefined();
    expect(openSecret(key, sealed, "caller:2")).toBeUndefined();
    const parts = sealed.split(".");
    const body = parts[3] ?? "";
    parts[3] = (body[0] === "A" ? "B" : "A") + body.slice(1);
    expect(openSecret(key, parts.join("."), "caller:1")).toBeUndefined();
    expect(openSecret(key, "garbage", "caller:1")).toBeUndefined();
  });

  it("accepts 32-byte keys in base64url or hex and nothing else", () => {
    expect(parseSecretKey("a".repeat(64))).toBeDefined();
    expect(parseSecretKey(generateSecretKeyText())).toBeDefined();
    expect(parseSecretKey("short")).toBeUndefined();
    expect(parseSecretKey("g".repeat(64))).toBeUndefined();
  });
});

describe("failure rate limiter", () => {
  it("lets failures through up to the limit, then asks to wait until the window ends", () => {
    const limiter = createRateLimiter({ maxFailures: 3, windowMs: 10_000 });
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfter("1.2.3.4", 1000)).toBe(0);
      limiter.fail("1.2.3.4", 1000);
    }
    expect(limiter.retryAfter("1.2.3.4", 1000)).toBe(10);
    expect(limiter.retryAfter("1.2.3.4", 9500)).toBe(2);
    expect(limiter.retryAfter("5.6.7.8", 1000)).toBe(0);
    expect(limiter.retryAfter("1.2.3.4", 11_000)).toBe(0);
  });

  it("stays bounded under a spray of keys", () => {
    const limiter = createRateLimiter({ maxFailures: 1, windowMs: 60_000, maxKeys: 100 });
    for (let i = 0; i < 10_000; i++) limiter.fail(`k${i}`, 0);
    expect(limiter.retryAfter("k9999", 1)).toBeGreaterThan(0);
    expect(limiter.retryAfter("k0", 1)).toBe(0);
  });
});

describe("source networks", () => {
  it("counts an IPv4 address as itself and an IPv6 address as its /64", () => {
    expect(sourceNetwork("192.0.2.7")).toBe("192.0.2.7");
    expect(sourceNetwork("2001:db8:a:b:1:2:3:4")).toBe("2001:db8:a:b::/64");
    expect(sourceNetwork("2001:db8:a:b::99")).toBe("2001:db8:a:b::/64");
    expect(sourceNetwork("2001:DB8:A:B:ffff:ffff:ffff:ffff")).toBe("2001:db8:a:b::/64");
    expect(sourceNetwork("2001:db8:a:c::1")).not.toBe(sourceNetwork("2001:db8:a:b::1"));
    expect(sourceNetwork("::1")).toBe("0:0:0:0::/64");
    expect(sourceNetwork("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  });

  it("counts an IPv4-mapped IPv6 address as its IPv4 address, in either spelling", () => {
    expect(sourceNetwork("::ffff:192.0.2.7")).toBe("192.0.2.7");
    expect(sourceNetwork("::ffff:c000:207")).toBe("192.0.2.7");
  });

  it("keeps what is not an address as it is", () => {
    expect(sourceNetwork("unknown")).toBe("unknown");
  });
});

describe("throttling failures, not good requests", () => {
  const refuse = () => Promise.reject(new UnauthenticatedError("unknown-secret"));
  const accept = () => Promise.resolve("ok");

  it("answers failures past the limit 429 and still lets a verifying credential in", async () => {
    const limiter = createRateLimiter({ maxFailures: 3, windowMs: 60_000 });
    const keys = ["source:2001:db8::1", "caller:repo"];
    for (let i = 0; i < 3; i++) {
      await expect(throttleAuth(limiter, keys, refuse, () => 0)).rejects.toBeInstanceOf(
        UnauthenticatedError,
      );
    }
    await expect(throttleAuth(limiter, keys, refuse, () => 1)).rejects.toBeInstanceOf(
      RateLimitedError,
    );
    await expect(throttleAuth(limiter, keys, accept, () => 2)).resolves.toBe("ok");
    // Another host of the same /64 shares the count; the caller name does too.
    await expect(
      throttleAuth(limiter, ["source:2001:db8::2"], refuse, () => 3),
    ).rejects.toBeInstanceOf(RateLimitedError);
    await expect(throttleAuth(limiter, ["caller:repo"], refuse, () => 3)).rejects.toBeInstanceOf(
      RateLimitedError,
    );
    // The window ends: failures are 401 again.
    await expect(throttleAuth(limiter, keys, refuse, () => 60_001)).rejects.toBeInstanceOf(
      UnauthenticatedError,
    );
  });

  it("passes other errors through without counting them", async () => {
    const limiter = createRateLimiter({ maxFailures: 1, windowMs: 60_000 });
    const broken = () => Promise.reject(new Error("database down"));
    for (let i = 0; i < 3; i++) {
      await expect(throttleAuth(limiter, ["source:192.0.2.1"], broken)).rejects.toThrow(
        "database down",
      );
    }
    expect(limiter.retryAfter("source:192.0.2.1", Date.now())).toBe(0);
  });
});
