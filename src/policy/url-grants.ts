// URL grants for web_fetch (DESIGN §10): the hosts, host suffixes and URL prefixes a caller may
// fetch without asking. Outside them a fetch follows "nobody there" (parks or is declined). A
// grant only answers "may this run without a person"; the SSRF guard in web_fetch still applies
// to every granted URL, and a grant never reaches an address that guard refuses.
//
// Everything is decided on the URL as the WHATWG parser reads it, because that is the URL the
// fetch will use: userinfo, backslashes, percent-encoded hosts, IDN and `..` segments are already
// resolved the way the fetch resolves them, so a look-alike string cannot mean one host here and
// another there. The fetcher must check the same parsed URL it connects to, and every redirect hop
// (`checkRedirectChain`).
//
// What is matched, and why it is strict:
// - hosts are exact after parsing (lowercase, punycode); a trailing-dot host never matches, so
//   `example.com.` parks instead of being argued about;
// - a suffix `.example.com` matches `a.example.com` at a label boundary, never `example.com`
//   itself, `evilexample.com` or `example.com.evil.net`;
// - host and suffix grants cover http and https on the scheme's default port only; any other
//   port, or a fixed scheme, needs a URL prefix;
// - a prefix pins scheme, host, port and a path prefix ending at a segment boundary (`/docs`
//   covers `/docs` and `/docs/a`, never `/docsx`). Paths are compared after one percent-decoding,
//   and a path a server could read as a different path is never granted: an encoded `/` or `\`,
//   an encoded `%` (double encoding), a malformed escape, a control character, or a dot segment
//   hiding behind encoding or a `;` parameter (`..;`).
// - a URL with a user name or password is never granted.
import type { Problem } from "../errors.ts";
import { quoteUntrusted } from "./quote.ts";

export type UrlGrantKind = "host" | "suffix" | "prefix";

/** What an operator writes; each list may be absent. */
export type UrlGrantInput = {
  readonly hosts?: readonly string[] | undefined;
  readonly suffixes?: readonly string[] | undefined;
  readonly prefixes?: readonly string[] | undefined;
};

type CompiledPrefix = {
  readonly entry: string;
  readonly protocol: string;
  readonly hostname: string;
  readonly port: string;
  /** The decoded path prefix. */
  readonly path: string;
};

/** Grants checked and normalised once; build with `compileUrlGrants`. */
export type UrlGrants = {
  readonly hosts: ReadonlySet<string>;
  /** Each with its leading dot, normalised: `.example.com`. */
  readonly suffixes: readonly string[];
  readonly prefixes: readonly CompiledPrefix[];
};

export type UrlGrantCheck =
  | {
      readonly granted: true;
      readonly kind: UrlGrantKind;
      /** The grant entry that matched, normalised. */
      readonly entry: string;
      readonly reason: string;
    }
  | { readonly granted: false; readonly reason: string };

export type RedirectChainCheck =
  | { readonly granted: true; readonly reason: string }
  | {
      readonly granted: false;
      /** Index of the first hop outside the grants (0 is the URL first asked for). */
      readonly hop: number;
      readonly reason: string;
    };

export const emptyUrlGrants: UrlGrants = { hosts: new Set(), suffixes: [], prefixes: [] };

const webSchemes = new Set(["http:", "https:"]);

const expected = {
  host: "a host name such as example.com (no scheme, port, path, wildcard or trailing dot)",
  suffix:
    "a host suffix starting with a dot, such as .example.com (at least two labels, no trailing dot)",
  prefix:
    "an http or https URL prefix such as https://example.com/docs (no user name, query, fragment or encoded path separators)",
} as const;

/** A host as the URL parser normalises it, or undefined when `text` is not just a host. */
function parseHostEntry(text: string): string | undefined {
  if (text === "" || text !== text.trim() || /[/\\?#@*%:\s]/u.test(text)) {
    // A colon is only allowed inside an IPv6 literal.
    if (!/^\[[0-9A-Fa-f:.]+\]$/u.test(text)) return undefined;
  }
  const url = URL.parse(`http://${text}/`);
  if (url === null || url.hostname === "" || url.port !== "" || url.pathname !== "/") {
    return undefined;
  }
  // An empty label (a leading, trailing or doubled dot) is never a host an operator meant.
  if (!url.hostname.startsWith("[") && url.hostname.split(".").includes("")) return undefined;
  return url.hostname;
}

/** The path decoded once, or undefined when a server could read it as a different path. */
function decodePath(pathname: string): string | undefined {
  const out: string[] = [];
  for (const raw of pathname.split("/")) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (/[/\\%]/u.test(segment) || /\p{Cc}/u.test(segment)) return undefined;
    const beforeParameters = segment.split(";")[0] ?? segment;
    if (beforeParameters === "." || beforeParameters === "..") return undefined;
    out.push(segment);
  }
  return out.join("/");
}

/** An IP literal, or a name the URL parser would read as an IPv4 address: never a suffix. */
function isAddressLike(host: string): boolean {
  const last = host.split(".").at(-1) ?? "";
  return host.startsWith("[") || /^(?:0x[0-9a-f]*|[0-9]+)$/iu.test(last);
}

function parsePrefixEntry(text: string): CompiledPrefix | undefined {
  if (text !== text.trim() || /[?#\s]/u.test(text)) return undefined;
  const url = URL.parse(text);
  if (url === null || !webSchemes.has(url.protocol)) return undefined;
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") {
    return undefined;
  }
  if (url.hostname === "" || url.hostname.endsWith(".")) return undefined;
  const path = decodePath(url.pathname);
  if (path === undefined) return undefined;
  return {
    entry: `${url.protocol}//${url.host}${url.pathname}`,
    protocol: url.protocol,
    hostname: url.hostname,
    port: url.port,
    path,
  };
}

function problem(field: string, value: unknown, kind: UrlGrantKind): Problem {
  return {
    field,
    value,
    expected: expected[kind],
    message: `${field} = ${quoteUntrusted(value, 80)}: expected ${expected[kind]}`,
  };
}

/** Checks and normalises grant entries; every bad entry is a problem naming its field and fix. */
export function compileUrlGrants(
  input: UrlGrantInput,
):
  | { readonly ok: true; readonly grants: UrlGrants }
  | { readonly ok: false; readonly problems: readonly Problem[] } {
  const problems: Problem[] = [];
  const hosts = new Set<string>();
  const suffixes: string[] = [];
  const prefixes: CompiledPrefix[] = [];
  (input.hosts ?? []).forEach((value, i) => {
    const host = typeof value === "string" ? parseHostEntry(value) : undefined;
    if (host === undefined) problems.push(problem(`hosts[${i}]`, value, "host"));
    else hosts.add(host);
  });
  (input.suffixes ?? []).forEach((value, i) => {
    const rest = typeof value === "string" && value.startsWith(".") ? value.slice(1) : undefined;
    const host = rest === undefined ? undefined : parseHostEntry(rest);
    if (host === undefined || !host.includes(".") || isAddressLike(host)) {
      problems.push(problem(`suffixes[${i}]`, value, "suffix"));
    } else suffixes.push(`.${host}`);
  });
  (input.prefixes ?? []).forEach((value, i) => {
    const prefix = typeof value === "string" ? parsePrefixEntry(value) : undefined;
    if (prefix === undefined) problems.push(problem(`prefixes[${i}]`, value, "prefix"));
    else prefixes.push(prefix);
  });
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, grants: { hosts, suffixes, prefixes } };
}

function underPrefix(path: string, prefix: string): boolean {
  if (prefix.endsWith("/")) return path.startsWith(prefix);
  return path === prefix || path.startsWith(`${prefix}/`);
}

function refuse(reason: string): UrlGrantCheck {
  return { granted: false, reason };
}

/** Whether the grants let `target` be fetched without asking; never throws. */
export function checkUrlGrant(target: URL | string, grants: UrlGrants): UrlGrantCheck {
  const url = typeof target === "string" ? URL.parse(target) : URL.parse(target.href);
  if (url === null) return refuse(`${quoteUntrusted(String(target))} is not a URL.`);
  const shown = quoteUntrusted(url.href);
  if (!webSchemes.has(url.protocol)) {
    return refuse(`${shown} is not an http or https URL; no grant covers it.`);
  }
  if (url.username !== "" || url.password !== "") {
    return refuse(`${shown} carries a user name or password; no grant covers such a URL.`);
  }
  const host = url.hostname;
  if (url.port === "") {
    if (grants.hosts.has(host)) {
      return {
        granted: true,
        kind: "host",
        entry: host,
        reason: `The host ${quoteUntrusted(host)} is granted.`,
      };
    }
    // A suffix always starts with a dot, so a match ends at a label boundary and is never the
    // bare domain.
    const suffix = grants.suffixes.find((s) => host.endsWith(s) && host.length > s.length);
    if (suffix !== undefined && !host.endsWith(".")) {
      return {
        granted: true,
        kind: "suffix",
        entry: suffix,
        reason: `The host ${quoteUntrusted(host)} is under the granted suffix ${quoteUntrusted(suffix)}.`,
      };
    }
  }
  const candidates = grants.prefixes.filter(
    (p) => p.protocol === url.protocol && p.hostname === host && p.port === url.port,
  );
  if (candidates.length > 0) {
    const path = decodePath(url.pathname);
    if (path === undefined) {
      return refuse(
        `The path of ${shown} could be read by a server as a different path (encoded separator, double encoding or a dot segment); no prefix grant covers it.`,
      );
    }
    const prefix = candidates.find((p) => underPrefix(path, p.path));
    if (prefix !== undefined) {
      return {
        granted: true,
        kind: "prefix",
        entry: prefix.entry,
        reason: `${shown} is under the granted prefix ${quoteUntrusted(prefix.entry)}.`,
      };
    }
  }
  return refuse(`${shown} is outside this caller's URL grants.`);
}

/**
 * Checks every hop of a fetch: the URL asked for, then each redirect target (already resolved
 * against the hop before it). The chain is granted only if every hop is; one hop outside the
 * grants stops it there, so a granted page cannot redirect the fetch somewhere ungranted.
 */
export function checkRedirectChain(
  chain: readonly (URL | string)[],
  grants: UrlGrants,
): RedirectChainCheck {
  if (chain.length === 0) return { granted: false, hop: 0, reason: "No URL was given." };
  for (const [hop, url] of chain.entries()) {
    const check = checkUrlGrant(url, grants);
    if (!check.granted) {
      return {
        granted: false,
        hop,
        reason: hop === 0 ? check.reason : `Redirect ${hop} leaves the grants: ${check.reason}`,
      };
    }
  }
  return {
    granted: true,
    reason:
      chain.length === 1
        ? "The URL is granted."
        : `All ${chain.length} hops are within the grants.`,
  };
}
