// The dependency rules of docs/architecture.md ("Dependency direction"), kept by the machine:
// every import between rooms of src/ (a folder, or a file at the top of src/) must be an arrow
// the rules allow, or a listed exception. `npm run check` runs this; a violation fails it.
//
// The exceptions below are known breaks of the written rules, each with the room the code belongs
// in; there are none now. The list may only shrink: an exception that no longer occurs fails the
// check too, so fixing one means deleting its line, and a new break cannot hide behind an old one
// (each names the exact file and room).
//
// Usage: node test/architecture/check-imports.ts [src dir]
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

/** A room's allowed targets; `type:` means type-only imports (`import type`). */
export type Rules = Record<string, readonly string[]>;

/** Imported from anywhere: pure words and helpers with no imports of their own rooms. */
const everywhere = ["domain", "errors.ts", "json-text.ts", "plain-issue.ts", "shell"];
/** Imported from anywhere but `domain` and `policy` (which are pure). */
const plumbing = [...everywhere, "log.ts", "trace.ts", "type:config.ts"];

// In the order of docs/architecture.md; nothing points back up (checked: the rules are acyclic).
export const rules: Rules = {
  "errors.ts": [],
  "json-text.ts": [],
  "plain-issue.ts": [],
  // The one reader of shell text (tree-sitter-bash) and its pure rules: a leaf every room reads.
  shell: [],
  "path-identity.ts": [],
  "secret-files.ts": ["errors.ts"],
  "config.ts": ["errors.ts", "plain-issue.ts", "path-identity.ts", "secret-files.ts"],
  // Spans through the OpenTelemetry API only (no SDK): a leaf every room above policy reads.
  "trace.ts": [],
  "log.ts": ["type:config.ts", "trace.ts"],
  domain: [],
  policy: ["domain", "errors.ts", "plain-issue.ts", "shell"],
  auth: [...plumbing, "secret-files.ts"],
  db: [...plumbing],
  sandbox: [...plumbing, "policy"],
  // The egress guard: the one way to connect to a URL someone else chose.
  net: [...plumbing, "policy"],
  tools: [...plumbing, "policy", "sandbox", "net", "path-identity.ts"],
  "load-policies.ts": [...plumbing, "policy", "tools"],
  gate: [...plumbing, "policy", "type:db", "type:sandbox", "tools"],
  runs: [...plumbing, "policy", "db", "type:sandbox", "tools", "gate", "load-policies.ts"],
  "metrics-model.ts": [...plumbing, "type:runs"],
  "metrics-events.ts": [...plumbing, "type:runs"],
  "metrics.ts": [...plumbing, "auth", "db", "metrics-model.ts", "metrics-events.ts"],
  notify: [...plumbing, "db", "net"],
  services: [
    ...plumbing,
    "config.ts",
    "policy",
    "auth",
    "db",
    "runs",
    "gate",
    "sandbox",
    "secret-files.ts",
    "load-policies.ts",
  ],
  // Push delivery reads the caller's push grants (policy, pure) and seals the tokens it keeps
  // (auth's sealed secrets, keyed by the server's secret key).
  a2a: [
    ...plumbing,
    "type:runs",
    "services",
    "db",
    "net",
    "policy",
    "auth",
    "type:load-policies.ts",
  ],
  control: [...plumbing, "services"],
  http: [...plumbing, "auth", "type:runs", "services", "a2a", "type:metrics.ts"],
  "policy-reload.ts": [...plumbing, "load-policies.ts", "runs", "sandbox", "tools"],
  // The OpenTelemetry SDK and exporter, loaded by server.ts only when an endpoint is set.
  "trace-export.ts": [...plumbing],
  "server.ts": ["*"],
  cli: [
    ...plumbing,
    "config.ts",
    "services",
    "control",
    "db",
    "policy",
    "load-policies.ts",
    "secret-files.ts",
    "server.ts",
    // The contract's types, and its methods and paths as plain data (nothing of hono or zod).
    "type:http/routes/admin-api.ts",
    "http/routes/admin-api-paths.ts",
  ],
  "reactions.ts": [...plumbing, "services", "type:a2a", "type:tools"],
  "core.ts": ["*"],
  // The second SIGINT/SIGTERM kills every live command group at once (tools/run-process.ts).
  "main.ts": ["cli", "tools"],
};

/** Known breaks of the rules: `file → room`, each with where the code belongs. Only shrinks. */
export const exceptions: Record<string, string> = {};

export type Import = { file: string; specifier: string; typeOnly: boolean };

/** The relative imports of a TypeScript (or .mjs) source: static, re-exports and dynamic. */
export function readImports(file: string, text: string): Import[] {
  const found: Import[] = [];
  const statement =
    /^\s*(?:import|export)\s+(type\s+)?(?:([^;]*?)\s+from\s+)?["'](\.[^"']+)["']/gms;
  for (const m of text.matchAll(statement)) {
    const clause = m[2] ?? "";
    // `import { type A, type B }` is type-only too.
    const inline = /^\{[\s\S]*\}$/.test(clause.trim())
      ? clause
          .trim()
          .slice(1, -1)
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "")
          .every((s) => s.startsWith("type "))
      : false;
    found.push({ file, specifier: m[3] as string, typeOnly: m[1] !== undefined || inline });
  }
  for (const m of text.matchAll(/\bimport\(\s*["'](\.[^"']+)["']\s*\)/g)) {
    found.push({ file, specifier: m[1] as string, typeOnly: false });
  }
  return found;
}

/** The room of a path under `src`: its first folder, or the file itself at the top. */
export function roomOf(src: string, file: string): string {
  const parts = path.relative(src, file).split(path.sep);
  return parts[0] as string;
}

function listSources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...listSources(full));
    else if (/\.(ts|mts|mjs)$/.test(name) && !name.endsWith(".d.mts")) out.push(full);
  }
  return out;
}

function allows(allowed: readonly string[], target: string, targetPath: string, typeOnly: boolean) {
  return allowed.some(
    (a) =>
      a === "*" ||
      a === target ||
      a === targetPath ||
      (typeOnly && (a === `type:${target}` || a === `type:${targetPath}`)),
  );
}

export type Report = { violations: string[]; stale: string[] };

/** Checks every import under `src` against `rules`, minus `known` exceptions. */
export function checkImports(src: string, known: Record<string, string> = exceptions): Report {
  const violations: string[] = [];
  const seen = new Set<string>();
  const root = path.dirname(src);
  for (const file of listSources(src)) {
    const from = roomOf(src, file);
    const allowed = rules[from];
    const rel = path.relative(root, file);
    if (!allowed) {
      violations.push(`${rel}: its room "${from}" has no rule in docs/architecture.md`);
      continue;
    }
    for (const imp of readImports(file, readFileSync(file, "utf8"))) {
      const target = path.resolve(path.dirname(file), imp.specifier);
      if (path.relative(src, target).startsWith("..")) continue; // outside src: not ours to rule
      const to = roomOf(src, target);
      if (to === from) continue;
      const targetPath = path.relative(src, target).split(path.sep).join("/");
      if (allows(allowed, to, targetPath, imp.typeOnly)) continue;
      const key = `${rel.split(path.sep).join("/")} → ${to}`;
      if (key in known) {
        seen.add(key);
        continue;
      }
      const kind = imp.typeOnly ? "a type import" : "an import";
      violations.push(
        `${rel}: ${kind} of ${imp.specifier} (${from} → ${to}) breaks docs/architecture.md's rules`,
      );
    }
  }
  const stale = Object.keys(known)
    .filter((k) => !seen.has(k))
    .map((k) => `${k}: listed as an exception but no longer imported: delete its line`);
  return { violations, stale };
}

/** The rooms in an order where every allowed arrow points back (throws on a circle). */
export function orderRooms(all: Rules = rules): string[] {
  const order: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (room: string, trail: string[]) => {
    if (state.get(room) === "done") return;
    if (state.get(room) === "visiting") {
      throw new Error(`the rules have a circle: ${[...trail, room].join(" → ")}`);
    }
    state.set(room, "visiting");
    for (const target of all[room] ?? []) {
      const name = target.replace(/^type:/, "").split("/")[0] as string;
      if (name !== "*" && name !== room) visit(name, [...trail, room]);
    }
    state.set(room, "done");
    order.push(room);
  };
  for (const room of Object.keys(all)) visit(room, []);
  return order;
}

if (import.meta.main) {
  const src = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, "../../src"));
  orderRooms();
  const { violations, stale } = checkImports(src);
  for (const line of [...violations, ...stale]) console.error(line);
  if (violations.length + stale.length > 0) {
    console.error(
      `${violations.length + stale.length} import rule problem(s): see docs/architecture.md, "Dependency direction"`,
    );
    process.exit(1);
  }
  console.log(
    `imports: every arrow between the rooms of src/ keeps the rules (${Object.keys(exceptions).length} listed exceptions)`,
  );
}
