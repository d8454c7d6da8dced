import { describe, expect, it } from "vitest";
import { createRateLimiter } from "../../src/auth/rate-limit.ts";
import {
  generateSecretKeyText,
  openSecret,
  parseSecretKey,
  sealSecret,
} from "../../src/auth/sealed-secrets.ts";

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
