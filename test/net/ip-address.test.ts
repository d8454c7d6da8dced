// The SSRF guard's reading of IPv6 forms that carry an IPv4 address: each is judged by the
// address it embeds, so a blocked IPv4 address is refused however it is wrapped.
import { describe, expect, it } from "vitest";
import { judgeAddress } from "../../src/net/ip-address.ts";

type Row = [address: string, form: string, verdict: "allowed" | RegExp, metadata?: boolean];

const rows: Row[] = [
  // IPv4-mapped ::ffff:a.b.c.d, dotted and hex.
  ["::ffff:8.8.8.8", "mapped, public", "allowed"],
  ["::ffff:127.0.0.1", "mapped, loopback", /loopback .*IPv4-mapped/],
  ["::ffff:7f00:1", "mapped in hex, loopback", /loopback .*IPv4-mapped/],
  ["::ffff:a9fe:a9fe", "mapped, metadata", /metadata .*IPv4-mapped/, true],
  // IPv4-translated ::ffff:0:a.b.c.d (SIIT).
  ["::ffff:0:8.8.8.8", "translated, public", "allowed"],
  ["::ffff:0:10.0.0.1", "translated, private", /private .*IPv4-translated/],
  // IPv4-compatible ::a.b.c.d: deprecated, never routed; refused whatever it embeds.
  ["::127.0.0.1", "compatible, loopback", /loopback .*IPv4-compatible/],
  ["::192.168.1.1", "compatible, private", /private .*IPv4-compatible/],
  ["::8.8.8.8", "compatible, public", /IPv4-compatible/],
  // NAT64, well-known prefix 64:ff9b::/96.
  ["64:ff9b::8.8.8.8", "NAT64, public", "allowed"],
  ["64:ff9b::127.0.0.1", "NAT64, loopback", /loopback .*NAT64/],
  ["64:ff9b::a9fe:a9fe", "NAT64, metadata", /metadata .*NAT64/, true],
  // NAT64, local-use 64:ff9b:1::/48, at every RFC 6052 placement.
  ["64:ff9b:1::10.0.0.1", "local NAT64 /96, private", /local-use NAT64/],
  ["64:ff9b:1:a00:0:100::", "local NAT64 /48, private", /local-use NAT64/],
  ["64:ff9b:1:a:0:1::", "local NAT64 /56, private", /local-use NAT64/],
  ["64:ff9b:1:0:a:1::", "local NAT64 /64, loopback", /local-use NAT64/],
  ["64:ff9b:1::8.8.8.8", "local NAT64, public at /96 only", /local-use NAT64/],
  // 6to4 2002:AABB:CCDD::/48.
  ["2002:808:808::1", "6to4, public", "allowed"],
  ["2002:7f00:1::", "6to4, loopback", /loopback .*6to4/],
  ["2002:a9fe:a9fe::1", "6to4, metadata", /metadata .*6to4/, true],
  // Teredo 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client's address inverted.
  ["2001:0:808:808::80ff:fffe", "Teredo, client 127.0.0.1", /loopback .*Teredo/],
  ["2001:0:808:808::f5ff:fffe", "Teredo, client 10.0.0.1", /private .*Teredo/],
  ["2001:0:a00:1::f7f7:f7f7", "Teredo, server 10.0.0.1", /private .*Teredo/],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo, RFC 4380 example", /documentation .*Teredo/],
  ["2001:0:808:808::fefe:fefe", "Teredo, both public", /IETF protocol/],
  // ISATAP interface identifiers ::0:5efe:a.b.c.d and ::200:5efe:a.b.c.d under any prefix.
  ["2606:4700::5efe:7f00:1", "ISATAP, loopback", /loopback .*ISATAP/],
  ["2606:4700::200:5efe:a9fe:a9fe", "ISATAP (global bit), metadata", /metadata .*ISATAP/, true],
  ["2606:4700::100:5efe:c0a8:101", "ISATAP (group bit), private", /private .*ISATAP/],
  ["2606:4700::5efe:808:808", "ISATAP, public, global prefix", "allowed"],
  ["fe80::5efe:808:808", "ISATAP, public, link-local prefix", /link-local/],
];

describe("IPv6 forms that embed an IPv4 address", () => {
  it.each(rows)("%s (%s)", (address, _form, verdict, metadata = false) => {
    const judged = judgeAddress(address);
    if (verdict === "allowed") {
      expect(judged).toMatchObject({ allowed: true, family: 6 });
      return;
    }
    expect(judged.allowed).toBe(false);
    if (judged.allowed) return;
    expect(judged.reason).toMatch(verdict);
    expect(judged.metadata).toBe(metadata);
  });
});
