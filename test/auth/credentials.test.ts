import { sign } from "@octokit/webhooks-methods";
import { describe, expect, it } from "vitest";
import { readBearer } from "../../src/auth/bearer.ts";
import { verifyGithubSignature } from "../../src/auth/github-signature.ts";
import {
  displayPrefix,
  generateSecret,
  hashSecret,
  safeEqual,
  secretPattern,
} from "../../src/auth/secrets.ts";

describe("generated secrets", () => {
  it("carry their kind's prefix and at least 192 random bits", () => {
    const token = generateSecret("peerToken");
    expect(token).toMatch(/^pg_[A-Za-z0-9_-]{43}$/);
    expect(token).toMatch(secretPattern);
    // 43 base64url characters = 258 bits of encoding for 256 random bits.
    expect(Buffer.from(token.slice(3), "base64url")).toHaveLength(32);
    expect(generateSecret("iftttSecret").startsWith("pgi_")).toBe(true);
  });

  it("never repeat", () => {
    const seen = new Set(Array.from({ length: 2000 }, () => generateSecret("peerToken")));
    expect(seen.size).toBe(2000);
  });

  it("are stored as SHA-256 hex and displayed only by a short prefix", () => {
    const token = generateSecret("peerToken");
    expect(hashSecret(token)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashSecret(token)).not.toContain(token.slice(3, 12));
    const shown = displayPrefix(token);
    expect(shown).toBe(`${token.slice(0, 7)}…`);
    expect(shown.length).toBeLessThan(10);
  });

  it("display four characters of a secret peergate did not generate, underscores or not", () => {
    // An operator-chosen admin token whose random part has an underscore late in it: the display
    // once showed everything up to that underscore.
    const chosen = "sec-admin-EhHMmifUWrRcPOT-yBaDbH5LipIDh_li0dWq";
    expect(displayPrefix(chosen)).toBe("sec-…");
    expect(displayPrefix("no-underscore-at-all")).toBe("no-u…");
    expect(displayPrefix("pgx_abcdEFGH")).toBe("pgx_abcd…");
  });

  it("compare in constant time, including strings of different length", () => {
    expect(safeEqual("abc", "abc")).toBe(true);
    expect(safeEqual("abc", "abd")).toBe(false);
    expect(safeEqual("abc", "abcd")).toBe(false);
    expect(safeEqual("", "")).toBe(true);
  });
});

describe("readBearer", () => {
  it.each([
    ["Bearer pg_abc", "pg_abc"],
    ["bearer pg_abc", "pg_abc"],
    ["BEARER pg_abc", "pg_abc"],
  ])("accepts %j (the scheme is case-insensitive)", (header, token) => {
    expect(readBearer(header)).toEqual({ ok: true, token });
  });

  it.each([
    [undefined, "missing"],
    [null, "missing"],
    ["", "empty"],
    ["   ", "empty"],
    ["Bearer", "malformed"],
    ["Bearer ", "malformed"],
    ["Bearer  pg_abc", "malformed"],
    ["Bearer pg_abc extra", "malformed"],
    ["Bearer pg_a, Bearer pg_b", "malformed"],
    ["Basic dXNlcjpwYXNz", "not-bearer"],
    ["Token pg_abc", "not-bearer"],
    ["Bearer pg_abc\u0000", "malformed"],
    ["Bearer pg_\u0430bc", "malformed"],
    [`Bearer ${"a".repeat(9000)}`, "malformed"],
  ])("refuses %j as %s", (header, reason) => {
    expect(readBearer(header as string | null | undefined)).toEqual({ ok: false, reason });
  });
});

describe("verifyGithubSignature", () => {
  const encoder = new TextEncoder();

  it("accepts GitHub's documented test vector", () => {
    expect(
      verifyGithubSignature(
        "It's a Secret to Everybody",
        encoder.encode("Hello, World!"),
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
      ),
    ).toEqual({ ok: true });
  });

  it("agrees with @octokit/webhooks-methods sign()", async () => {
    const body = JSON.stringify({ action: "opened", number: 7, title: "ünïcode ✓" });
    const header = await sign("s3cret", body);
    expect(verifyGithubSignature("s3cret", encoder.encode(body), header)).toEqual({ ok: true });
  });

  it("signs the raw bytes, so a body that is not valid UTF-8 still verifies", async () => {
    const raw = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
    const { createHmac } = await import("node:crypto");
    const header = `sha256=${createHmac("sha256", "k").update(raw).digest("hex")}`;
    expect(verifyGithubSignature("k", raw, header)).toEqual({ ok: true });
    // Decoding first (what a string-based verifier does) would sign different bytes.
    const decoded = encoder.encode(new TextDecoder().decode(raw));
    expect(verifyGithubSignature("k", decoded, header).ok).toBe(false);
  });

  it("refuses every malformed or wrong signature without throwing", async () => {
    const body = encoder.encode('{"zen":"x"}');
    const good = await sign("secret", '{"zen":"x"}');
    const hex = good.slice("sha256=".length);
    const cases: [string | undefined, string][] = [
      [undefined, "missing"],
      ["", "missing"],
      [`sha1=${hex.slice(0, 40)}`, "malformed"],
      [`sha256=${hex.toUpperCase()}`, "malformed"],
      [`sha256=${hex.slice(0, 63)}`, "malformed"],
      [`sha256=${hex}0`, "malformed"],
      [`sha256=${"z".repeat(64)}`, "malformed"],
      [`SHA256=${hex}`, "malformed"],
      [` ${good}`, "malformed"],
      [`sha256=${hex.slice(0, 63)}${hex[63] === "0" ? "1" : "0"}`, "mismatch"],
    ];
    for (const [header, reason] of cases) {
      expect(verifyGithubSignature("secret", body, header), String(header)).toEqual({
        ok: false,
        reason,
      });
    }
    expect(verifyGithubSignature("secret", body, good)).toEqual({ ok: true });
    expect(verifyGithubSignature("other", body, good).ok).toBe(false);
    expect(verifyGithubSignature("", body, good)).toEqual({ ok: false, reason: "no-secret" });
    const changed = encoder.encode('{"zen":"y"}');
    expect(verifyGithubSignature("secret", changed, good).ok).toBe(false);
    const bom = encoder.encode('\ufeff{"zen":"x"}');
    expect(verifyGithubSignature("secret", bom, good).ok).toBe(false);
    expect(verifyGithubSignature("secret", new Uint8Array(), good).ok).toBe(false);
  });
});
