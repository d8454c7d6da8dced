// A caller's push grants (DESIGN §10): where its push notifications may be sent. Each entry is a
// URL grant of src/policy/url-grants.ts, its kind read from its form: a URL prefix has a scheme
// (`https://hooks.example.com:8443/a2a`, which pins the port), a suffix a leading dot
// (`.example.com`), anything else is a host (`hooks.example.com`, default ports only).
import type { Problem } from "../errors.ts";
import { compileUrlGrants, type UrlGrantInput, type UrlGrants } from "./url-grants.ts";

export function readPushGrantEntry(entry: string): UrlGrantInput {
  if (entry.includes("://")) return { prefixes: [entry] };
  if (entry.startsWith(".")) return { suffixes: [entry] };
  return { hosts: [entry] };
}

/** Problems of entries an operator writes, each naming its index; empty when all are good. */
export function checkPushGrantEntries(entries: readonly string[]): Problem[] {
  return entries.flatMap((entry, index) => {
    const compiled = compileUrlGrants(readPushGrantEntry(entry));
    return compiled.ok
      ? []
      : compiled.problems.map((p) => ({ ...p, field: `hosts[${index}]`, message: p.message }));
  });
}

/** The grants of stored entries, each compiled alone so one bad entry voids only itself. */
export function compilePushGrants(entries: readonly string[]): UrlGrants {
  const each = entries.flatMap((entry) => {
    const compiled = compileUrlGrants(readPushGrantEntry(entry));
    return compiled.ok ? [compiled.grants] : [];
  });
  return {
    hosts: new Set(each.flatMap((g) => [...g.hosts])),
    suffixes: each.flatMap((g) => g.suffixes),
    prefixes: each.flatMap((g) => g.prefixes),
  };
}
