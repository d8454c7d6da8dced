// URL grants for web_fetch attacked with the URLs that fool string matchers (DESIGN §10): look-alike
// hosts, userinfo, ports, percent-encoding, dot segments, backslashes, scheme changes, and a
// redirect chain that leaves the grants. Every row goes through the same parse the fetch uses.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  checkRedirectChain,
  checkUrlGrant,
  compileUrlGrants,
  emptyUrlGrants,
  type UrlGrantInput,
  type UrlGrants,
} from "../../src/policy/url-grants.ts";

function compile(input: UrlGrantInput): UrlGrants {
  const compiled = compileUrlGrants(input);
  if (!compiled.ok) throw new Error(compiled.problems.map((p) => p.message).join("\n"));
  return compiled.grants;
}

const grants = compile({
  hosts: ["example.com", "Docs.Example.ORG"],
  suffixes: [".cdn.example.net"],
  prefixes: [
    "https://api.example.io/v1",
    "https://files.example.io/pub/",
    "http://legacy.example.io:8080/a",
  ],
});

// [url, granted, what it attacks or shows]
const rows: Array<[string, boolean, string]> = [
  // exact hosts
  ["https://example.com/", true, "a granted host"],
  ["http://example.com/page?q=1#x", true, "http and https on the default port, any path and query"],
  ["https://EXAMPLE.COM/", true, "uppercase: the parser lowercases the host"],
  ["https://docs.example.org/", true, "a grant written in mixed case is normalised"],
  ["https://ex%61mple.com/", true, "a percent-encoded host decodes to the granted host"],
  [
    "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/",
    true,
    "fullwidth letters map to the same host",
  ],
  ["https://example.com:443/", true, "the explicit default port is the default port"],
  ["https://example.com./", false, "trailing dot: not the granted spelling"],
  ["https://www.example.com/", false, "a host grant does not cover subdomains"],
  ["https://example.com.evil.net/", false, "the granted host as a label of another domain"],
  ["https://evilexample.com/", false, "the granted host as a suffix without a label boundary"],
  ["https://example.com%2eevil.net/", false, "an encoded dot that joins another domain"],
  ["https://ex\u0430mple.com/", false, "Cyrillic a: a different (punycode) host"],
  ["https://xn--exmple-4nf.com/", false, "the punycode spelling of that look-alike"],
  ["https://example.co/", false, "a shorter look-alike"],
  ["https://example.com\u200b/", true, "the parser drops a zero-width space: it is example.com"],
  // userinfo
  ["https://example.com@evil.net/", false, "the granted host as a user name"],
  ["https://user:pw@example.com/", false, "credentials on a granted host"],
  ["https://example.com:@evil.net/", false, "an empty password before another host"],
  [
    "https://example.com\\@evil.net/",
    true,
    "a backslash ends the host, so the host is example.com",
  ],
  // ports and schemes
  ["https://example.com:8443/", false, "a host grant covers the default port only"],
  ["http://example.com:443/", false, "the https port over http is not http's default"],
  ["ftp://example.com/", false, "not http or https"],
  ["file://example.com/etc/passwd", false, "a file URL naming the host"],
  ["javascript:alert(1)//example.com", false, "not a fetchable URL"],
  ["data:text/plain,example.com", false, "a data URL"],
  ["https:\\\\evil.net\\example.com", false, "backslashes as slashes: the host is evil.net"],
  ["//example.com/", false, "a scheme-relative URL is not a URL on its own"],
  ["not a url", false, "garbage"],
  // suffixes
  ["https://a.cdn.example.net/x", true, "a subdomain of a granted suffix"],
  ["https://a.b.cdn.example.net/", true, "a deeper subdomain"],
  ["https://cdn.example.net/", false, "a suffix grant does not cover the bare domain"],
  ["https://evilcdn.example.net/", false, "a suffix match without a label boundary"],
  ["https://a.cdn.example.net.evil.org/", false, "the suffix followed by another domain"],
  ["https://a.cdn.example.net./", false, "trailing dot under a suffix"],
  ["https://a.cdn.example.net:8080/", false, "a suffix grant covers the default port only"],
  // prefixes: scheme + host + port + path at a segment boundary
  ["https://api.example.io/v1", true, "the prefix itself"],
  ["https://api.example.io/v1/", true, "the prefix with a slash"],
  ["https://api.example.io/v1/users?id=1", true, "a path under the prefix"],
  ["https://api.example.io/%76%31/users", true, "encoded letters decode to the prefix"],
  ["https://API.EXAMPLE.IO/v1/users", true, "host case does not matter"],
  ["https://api.example.io/v10", false, "not at a segment boundary"],
  ["https://api.example.io/v1x/users", false, "a longer first segment"],
  ["https://api.example.io/V1/users", false, "path case matters (the server may not fold it)"],
  ["https://api.example.io/", false, "above the prefix"],
  ["http://api.example.io/v1/users", false, "the prefix pins https"],
  ["https://api.example.io:8443/v1/users", false, "the prefix pins the default port"],
  ["https://api.example.io/v1/../admin", false, "a dot segment leaves the prefix"],
  ["https://api.example.io/v1/%2e%2e/admin", false, "an encoded dot segment leaves the prefix"],
  ["https://api.example.io/v1/.%2E/admin", false, "a half-encoded dot segment"],
  ["https://api.example.io/v1/..%2fadmin", false, "an encoded slash hides a dot segment"],
  ["https://api.example.io/v1%2f..%2fadmin", false, "an encoded slash in the first segment"],
  ["https://api.example.io/v1/a%2fb", false, "any encoded slash: a server may split it"],
  ["https://api.example.io/v1/a%5cb", false, "an encoded backslash"],
  ["https://api.example.io/v1/..%5cadmin", false, "an encoded backslash hides a dot segment"],
  ["https://api.example.io/v1\\..\\admin", false, "raw backslashes are slashes: a dot segment"],
  ["https://api.example.io/v1/%252e%252e/admin", false, "double encoding"],
  ["https://api.example.io/v1/..;/admin", false, "a dot segment behind a ; parameter"],
  ["https://api.example.io/v1/%00", false, "an encoded NUL"],
  ["https://api.example.io/v1/%zz", false, "a malformed escape: servers disagree on what it means"],
  ["https://api.example.io@evil.net/v1", false, "the prefix host as a user name"],
  ["https://files.example.io/pub/", true, "a prefix ending in a slash covers itself"],
  ["https://files.example.io/pub/a/b.txt", true, "and what is under it"],
  ["https://files.example.io/pub", false, "but not the path without the slash"],
  ["https://files.example.io/public", false, "nor a longer segment"],
  ["http://legacy.example.io:8080/a/b", true, "a prefix with its own port and scheme"],
  ["http://legacy.example.io/a/b", false, "the same prefix on the default port"],
  ["https://legacy.example.io:8080/a/b", false, "the same prefix over https"],
];

describe("checkUrlGrant: the attack table", () => {
  it.each(rows)("%s → granted %s (%s)", (url, granted) => {
    const check = checkUrlGrant(url, grants);
    expect(check.granted).toBe(granted);
    expect(check.reason.length).toBeGreaterThan(0);
    // A URL object gives the same answer as its text.
    const parsed = URL.parse(url);
    if (parsed !== null) expect(checkUrlGrant(parsed, grants).granted).toBe(granted);
  });

  it("names the entry that granted and the kind of grant", () => {
    expect(checkUrlGrant("https://a.cdn.example.net/", grants)).toMatchObject({
      granted: true,
      kind: "suffix",
      entry: ".cdn.example.net",
    });
    expect(checkUrlGrant("https://api.example.io/v1/x", grants)).toMatchObject({
      granted: true,
      kind: "prefix",
      entry: "https://api.example.io/v1",
    });
    expect(checkUrlGrant("https://EXAMPLE.com/", grants)).toMatchObject({
      kind: "host",
      entry: "example.com",
    });
  });

  it("says why a path is refused under a prefix host", () => {
    const check = checkUrlGrant("https://api.example.io/v1/a%2fb", grants);
    expect(check.reason).toContain("different path");
  });

  it("grants nothing without grants", () => {
    for (const [url] of rows) expect(checkUrlGrant(url, emptyUrlGrants).granted).toBe(false);
  });

  it("reads a URL object as its current href (the one the fetch uses)", () => {
    const url = new URL("https://example.com/");
    url.host = "evil.net";
    expect(checkUrlGrant(url, grants).granted).toBe(false);
  });
});

describe("checkRedirectChain", () => {
  it("grants a chain only when every hop is granted", () => {
    expect(
      checkRedirectChain(
        ["https://example.com/a", "https://a.cdn.example.net/b", "https://api.example.io/v1/c"],
        grants,
      ),
    ).toMatchObject({ granted: true });
  });

  it("stops at the first hop out of the grants and names it", () => {
    const check = checkRedirectChain(
      [
        "https://example.com/a",
        "https://example.com/b",
        "https://evil.net/",
        "https://example.com/",
      ],
      grants,
    );
    expect(check).toMatchObject({ granted: false, hop: 2 });
    expect(check.reason).toContain("Redirect 2 leaves the grants");
    expect(check.reason).toContain("evil.net");
  });

  it("catches a redirect from a granted prefix to a sibling path, port or scheme", () => {
    for (const next of [
      "https://api.example.io/v2/",
      "https://api.example.io:444/v1/",
      "http://api.example.io/v1/",
      "https://api.example.io/v1/../admin",
    ]) {
      expect(checkRedirectChain(["https://api.example.io/v1/", next], grants)).toMatchObject({
        granted: false,
        hop: 1,
      });
    }
  });

  it("refuses the first URL like any other hop, and an empty chain", () => {
    expect(checkRedirectChain(["https://evil.net/"], grants)).toMatchObject({
      granted: false,
      hop: 0,
    });
    expect(checkRedirectChain([], grants).granted).toBe(false);
  });
});

describe("compileUrlGrants", () => {
  it("normalises entries: case, IDN to punycode, the default port", () => {
    const g = compile({
      hosts: ["B\u00fccher.example"],
      suffixes: [".Example.COM"],
      prefixes: ["HTTPS://Example.com:443/Docs"],
    });
    expect([...g.hosts]).toEqual(["xn--bcher-kva.example"]);
    expect(g.suffixes).toEqual([".example.com"]);
    expect(g.prefixes.map((p) => p.entry)).toEqual(["https://example.com/Docs"]);
    expect(checkUrlGrant("https://b\u00fccher.example/", g).granted).toBe(true);
  });

  // [field, value]
  const bad: Array<[keyof UrlGrantInput, string]> = [
    ["hosts", ""],
    ["hosts", " example.com"],
    ["hosts", "example.com."],
    ["hosts", "https://example.com"],
    ["hosts", "example.com/docs"],
    ["hosts", "example.com:8080"],
    ["hosts", "*.example.com"],
    ["hosts", "user@example.com"],
    ["hosts", "a..b"],
    ["hosts", ".example.com"],
    ["suffixes", "example.com"],
    ["suffixes", "*.example.com"],
    ["suffixes", ".com"],
    ["suffixes", "..example.com"],
    ["suffixes", ".example.com."],
    ["suffixes", ".0.0.1"],
    ["suffixes", ".[::1]"],
    ["prefixes", "example.com/docs"],
    ["prefixes", "ftp://example.com/"],
    ["prefixes", "https://user@example.com/"],
    ["prefixes", "https://example.com/docs?x=1"],
    ["prefixes", "https://example.com/docs#top"],
    ["prefixes", "https://example.com./docs"],
    ["prefixes", "https://example.com/a%2fb"],
    ["prefixes", "https://example.com/%252e"],
    ["prefixes", "https://example.com/a/..;/b"],
  ];

  it.each(bad)("refuses %s entry %j, naming the field and the fix", (field, value) => {
    const compiled = compileUrlGrants({ [field]: [value] });
    expect(compiled.ok).toBe(false);
    if (compiled.ok) return;
    expect(compiled.problems).toHaveLength(1);
    const [p] = compiled.problems;
    expect(p?.field).toBe(`${field}[0]`);
    expect(p?.value).toBe(value);
    expect(p?.message).toContain(`${field}[0]`);
    expect(p?.expected).toMatch(/such as/);
  });

  it("lists every bad entry at once", () => {
    const compiled = compileUrlGrants({
      hosts: ["ok.example", "bad/host"],
      suffixes: ["nodot.example"],
      prefixes: ["https://ok.example/", "mailto:x@example.com"],
    });
    expect(compiled.ok).toBe(false);
    if (compiled.ok) return;
    expect(compiled.problems.map((p) => p.field)).toEqual([
      "hosts[1]",
      "suffixes[0]",
      "prefixes[1]",
    ]);
  });

  it("refuses values that are not strings", () => {
    const compiled = compileUrlGrants({ hosts: [42 as unknown as string] });
    expect(compiled.ok).toBe(false);
  });
});

describe("checkUrlGrant: invariants", () => {
  const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}[a-z0-9]$/);
  const host = fc.tuple(label, label).map(([a, b]) => `${a}.${b}`);

  it("a host grant never covers a host that merely contains it", () => {
    fc.assert(
      fc.property(host, label, label, (granted, left, right) => {
        const g = compile({ hosts: [granted] });
        for (const url of [
          `https://${left}${granted}/`,
          `https://${left}.${granted}/`,
          `https://${granted}.${right}/`,
          `https://${granted}${right}/`,
          `https://${granted}@${left}.${right}/`,
        ]) {
          if (URL.parse(url)?.hostname === granted) continue;
          expect(checkUrlGrant(url, g).granted).toBe(false);
        }
        expect(checkUrlGrant(`https://${granted}/`, g).granted).toBe(true);
      }),
    );
  });

  it("whatever the path, a granted prefix URL's parsed path is under the prefix", () => {
    const g = compile({ prefixes: ["https://api.example.io/v1"] });
    const piece = fc.constantFrom(
      "a",
      "..",
      ".",
      "%2e",
      "%2E%2e",
      "%2f",
      "%5c",
      "\\",
      ";",
      "..;",
      "%25",
      "v1",
      "",
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 6 }), (pieces) => {
        const url = `https://api.example.io/v1/${pieces.join("/")}`;
        const check = checkUrlGrant(url, g);
        if (!check.granted) return;
        const parsed = new URL(url);
        const decoded = decodeURIComponent(parsed.pathname);
        expect(decoded === "/v1" || decoded.startsWith("/v1/")).toBe(true);
        expect(decoded.split("/")).not.toContain("..");
        expect(decoded).not.toContain("\\");
        expect(decoded.split("/").filter((s) => s.split(";")[0] === "..")).toEqual([]);
      }),
    );
  });

  it("grants only URLs whose parsed host, port and user name agree with a grant", () => {
    const g = compile({
      hosts: ["example.com"],
      suffixes: [".example.net"],
      prefixes: ["https://example.org/docs"],
    });
    const schemes = ["https://", "http://", "https:\\\\", "https://user@", "ftp://", "https:/"];
    const hostsNear = [
      "example.com",
      "EXAMPLE.com",
      "example.com.",
      "a.example.net",
      "example.net",
      "example.org",
      "xexample.com",
      "example.com.evil",
    ];
    const afterHost = ["", ":443", ":8080", "@evil.net", "%2e", "\\"];
    const paths = ["/", "/docs", "/docs/a", "/docs/../x", "/docs%2fx", "/docsx", ""];
    const granted = new Set<string>();
    const expectAgrees = (candidate: string) => {
      const check = checkUrlGrant(candidate, g);
      if (!check.granted) return;
      granted.add(check.kind);
      const url = new URL(candidate);
      expect(url.username + url.password).toBe("");
      expect(["http:", "https:"]).toContain(url.protocol);
      if (check.kind === "host") expect([url.hostname, url.port]).toEqual(["example.com", ""]);
      if (check.kind === "suffix") {
        expect(url.hostname.endsWith(".example.net")).toBe(true);
        expect(url.port).toBe("");
      }
      if (check.kind === "prefix") {
        expect(url.origin).toBe("https://example.org");
        expect(url.pathname === "/docs" || url.pathname.startsWith("/docs/")).toBe(true);
      }
    };
    // Every combination of the near misses, then random URLs.
    for (const scheme of schemes) {
      for (const host of hostsNear) {
        for (const tail of afterHost) {
          for (const path of paths) expectAgrees(`${scheme}${host}${tail}${path}`);
        }
      }
    }
    fc.assert(
      fc.property(fc.webUrl({ withQueryParameters: true, withFragments: true }), expectAgrees),
      { numRuns: 500 },
    );
    // The property was exercised on every kind of grant, not only on refusals.
    expect([...granted].sort()).toEqual(["host", "prefix", "suffix"]);
  });
});
