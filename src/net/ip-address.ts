// Which IP addresses web_fetch may connect to. Everything that reaches this machine, its local
// networks or a cloud metadata service is refused: loopback, private, link-local, CGNAT,
// multicast, unspecified, documentation and reserved ranges. Every IPv6 form that embeds an IPv4
// address (mapped, translated, compatible, NAT64 well-known and local-use, 6to4, Teredo, ISATAP)
// is judged by the address it embeds: a blocked IPv4 address is refused in any wrapping. Input is the
// textual address a resolver returned or a URL host after WHATWG parsing (which has already
// turned decimal, hex and octal IPv4 spellings into dotted quads); anything else is refused.
import { isIPv4, isIPv6 } from "node:net";

export type AddressVerdict =
  | { readonly allowed: true; readonly family: 4 | 6; readonly address: string }
  | {
      readonly allowed: false;
      readonly reason: string;
      /** Cloud metadata endpoints: never exempted, whatever the configuration says. */
      readonly metadata: boolean;
    };

type Range = { readonly base: bigint; readonly bits: number; readonly reason: string };

function parseIPv4(text: string): bigint | undefined {
  if (!isIPv4(text)) return undefined;
  let value = 0n;
  for (const part of text.split(".")) value = (value << 8n) | BigInt(Number(part));
  return value;
}

function parseIPv6(text: string): bigint | undefined {
  if (!isIPv6(text) || text.includes("%")) return undefined;
  let body = text;
  // A dotted IPv4 tail (::ffff:127.0.0.1) is two 16-bit words.
  const lastColon = body.lastIndexOf(":");
  const tail = body.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIPv4(tail);
    if (v4 === undefined) return undefined;
    body = `${body.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return undefined;
  const left = halves[0] ? halves[0].split(":") : [];
  const right = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const fill = halves.length === 2 ? 8 - left.length - right.length : 0;
  if (fill < 0) return undefined;
  const words = [...left, ...Array<string>(fill).fill("0"), ...right];
  if (words.length !== 8) return undefined;
  let value = 0n;
  for (const word of words) value = (value << 16n) | BigInt(Number.parseInt(word, 16));
  return value;
}

function range4(cidr: string, reason: string): Range {
  const [address = "", bits = "32"] = cidr.split("/");
  return { base: parseIPv4(address) ?? 0n, bits: Number(bits), reason };
}

function range6(cidr: string, reason: string): Range {
  const [address = "", bits = "128"] = cidr.split("/");
  return { base: parseIPv6(address) ?? 0n, bits: Number(bits), reason };
}

function inRange(value: bigint, range: Range, width: number): boolean {
  const shift = BigInt(width - range.bits);
  return value >> shift === range.base >> shift;
}

const metadata4 = new Set([
  "169.254.169.254",
  "169.254.170.2",
  "169.254.169.123",
  "100.100.100.200",
]);
const metadata6 = new Set([parseIPv6("fd00:ec2::254"), parseIPv6("fd00:ec2::23")]);

const blocked4: readonly Range[] = [
  range4("0.0.0.0/8", "an unspecified address (this host)"),
  range4("10.0.0.0/8", "a private address"),
  range4("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
  range4("127.0.0.0/8", "a loopback address"),
  range4("169.254.0.0/16", "a link-local address"),
  range4("172.16.0.0/12", "a private address"),
  range4("192.0.0.0/24", "an IETF protocol address"),
  range4("192.0.2.0/24", "a documentation address"),
  range4("192.88.99.0/24", "a 6to4 relay address"),
  range4("192.168.0.0/16", "a private address"),
  range4("198.18.0.0/15", "a benchmarking address"),
  range4("198.51.100.0/24", "a documentation address"),
  range4("203.0.113.0/24", "a documentation address"),
  range4("224.0.0.0/4", "a multicast address"),
  range4("240.0.0.0/4", "a reserved or broadcast address"),
];

const blocked6: readonly Range[] = [
  range6("::/128", "an unspecified address"),
  range6("::1/128", "a loopback address"),
  range6("::/96", "an IPv4-compatible address"),
  range6("100::/64", "a discard address"),
  range6("2001::/23", "an IETF protocol address (Teredo and others)"),
  range6("2001:db8::/32", "a documentation address"),
  range6("3fff::/20", "a documentation address"),
  range6("5f00::/16", "a segment-routing address"),
  range6("fc00::/7", "a unique-local (private) address"),
  range6("fe80::/10", "a link-local address"),
  range6("fec0::/10", "a site-local address"),
  range6("ff00::/8", "a multicast address"),
];

const mapped = range6("::ffff:0:0/96", "");
const translated = range6("::ffff:0:0:0/96", "");
const compatible = range6("::/96", "");
const nat64 = range6("64:ff9b::/96", "");
const nat64Local = range6("64:ff9b:1::/48", "");
const sixToFour = range6("2002::/16", "");
const teredo = range6("2001::/32", "");

const low32 = (v6: bigint): bigint => v6 & 0xffffffffn;

/**
 * Where a local-use NAT64 prefix (64:ff9b:1::/48) may carry its IPv4 address: RFC 6052 places it
 * by the prefix length the operator chose (/48, /56, /64 or /96), skipping bits 64-71. The
 * length is not visible in the address, so every placement is judged.
 */
function nat64LocalCandidates(v6: bigint): bigint[] {
  const byte = (i: number) => (v6 >> BigInt(8 * (15 - i))) & 0xffn;
  const join = (...indexes: number[]) => indexes.reduce((acc, i) => (acc << 8n) | byte(i), 0n);
  return [join(6, 7, 9, 10), join(7, 9, 10, 11), join(9, 10, 11, 12), low32(v6)];
}

/** ISATAP interface identifiers: [0-3]00:5efe followed by the IPv4 address. */
function isIsatap(v6: bigint): boolean {
  return ((v6 >> 32n) & 0xfcffffffn) === 0x00005efen;
}

type Embedding = {
  readonly form: string;
  readonly addresses: readonly bigint[];
  /** Whether a public embedded address makes the IPv6 address acceptable on its own. */
  readonly decides: boolean;
};

/** The IPv4 addresses an IPv6 address carries, and in which form; undefined for none. */
function findEmbedded(v6: bigint): Embedding | undefined {
  if (inRange(v6, mapped, 128))
    return { form: "IPv4-mapped", addresses: [low32(v6)], decides: true };
  if (inRange(v6, translated, 128)) {
    return { form: "IPv4-translated", addresses: [low32(v6)], decides: true };
  }
  // :: and ::1 are judged as themselves below.
  if (inRange(v6, compatible, 128) && v6 > 1n) {
    // Deprecated and never routed: a public address inside is still refused (by ::/96 below).
    return { form: "IPv4-compatible", addresses: [low32(v6)], decides: false };
  }
  if (inRange(v6, nat64, 128)) return { form: "NAT64", addresses: [low32(v6)], decides: true };
  if (inRange(v6, nat64Local, 128)) {
    return { form: "local-use NAT64", addresses: nat64LocalCandidates(v6), decides: true };
  }
  if (inRange(v6, sixToFour, 128)) {
    return { form: "6to4", addresses: [(v6 >> 80n) & 0xffffffffn], decides: true };
  }
  if (inRange(v6, teredo, 128)) {
    // The server's address in bits 32-63; the client's in the last 32 bits, inverted.
    const server = (v6 >> 64n) & 0xffffffffn;
    const client = low32(v6) ^ 0xffffffffn;
    return { form: "Teredo", addresses: [server, client], decides: false };
  }
  if (isIsatap(v6)) return { form: "ISATAP", addresses: [low32(v6)], decides: false };
  return undefined;
}

function judge4(value: bigint, address: string): AddressVerdict {
  if (metadata4.has(address)) {
    return { allowed: false, reason: "a cloud metadata address", metadata: true };
  }
  for (const range of blocked4) {
    if (inRange(value, range, 32)) return { allowed: false, reason: range.reason, metadata: false };
  }
  return { allowed: true, family: 4, address };
}

function formatIPv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join(".");
}

/** Judges one textual IP address (no brackets). */
export function judgeAddress(text: string): AddressVerdict {
  const v4 = parseIPv4(text);
  if (v4 !== undefined) return judge4(v4, text);
  const v6 = parseIPv6(text);
  if (v6 === undefined) {
    return { allowed: false, reason: "not a plain IP address", metadata: false };
  }
  if (metadata6.has(v6))
    return { allowed: false, reason: "a cloud metadata address", metadata: true };
  // Forms that carry an IPv4 address are judged by it: refused if any address inside is.
  const embedded = findEmbedded(v6);
  if (embedded !== undefined) {
    for (const address of embedded.addresses) {
      const inner = judge4(address, formatIPv4(address));
      if (!inner.allowed) {
        return {
          ...inner,
          reason: `${inner.reason} inside an IPv6 address (${embedded.form})`,
        };
      }
    }
    if (embedded.decides) return { allowed: true, family: 6, address: text };
  }
  for (const range of blocked6) {
    if (inRange(v6, range, 128)) return { allowed: false, reason: range.reason, metadata: false };
  }
  return { allowed: true, family: 6, address: text };
}

/** The canonical comparable form of an address, for exemption lists and connect-time checks. */
export function normalizeAddress(text: string): string | undefined {
  const v4 = parseIPv4(text);
  if (v4 !== undefined) return formatIPv4(v4);
  const v6 = parseIPv6(text);
  if (v6 === undefined) return undefined;
  // An IPv4-mapped address is the IPv4 address (sockets report ::ffff:a.b.c.d for IPv4 peers).
  if (inRange(v6, mapped, 128)) return formatIPv4(v6 & 0xffffffffn);
  return v6.toString(16).padStart(32, "0");
}
