// `peergate callers apply -f callers.yaml`: declarative callers. Creates what is missing, changes
// what differs, and reports drift it will not touch (callers on the server that the file does not
// name, revoked callers). Running it twice changes nothing the second time. The file describes
// callers, never credentials: a field that looks like a secret is refused, and new credentials
// are printed once (never written back to the file).
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { createAdminClient } from "./admin-client.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

type Json = Record<string, unknown>;
const managedFields = [
  "tier",
  "allow",
  "approvalPolicy",
  "budgets",
  "promptTemplate",
  "eventFilter",
  "jwt",
  "commands",
  "toolOverrides",
  "urlGrants",
  "whenNobody",
  "classifier",
] as const;
const secretLooking = /token|secret|password|credential|^key$/i;

type Action =
  | { name: string; action: "create"; fields: Json }
  | { name: string; action: "update"; changes: Record<string, { from: unknown; to: unknown }> }
  | { name: string; action: "unchanged" }
  | { name: string; action: "drift"; note: string };

function same(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => same(v, b[i]));
  if (a && b && typeof a === "object" && typeof b === "object") {
    // Only what the file says is compared: fields the file leaves out are not drift.
    return Object.entries(b as Json).every(([k, v]) => same((a as Json)[k], v));
  }
  return a === b;
}

function readDesired(text: string, file: string): Json[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    throw new UsageError(`${file}: not valid YAML: ${(error as Error).message}`);
  }
  const callers = (doc as { callers?: unknown } | null)?.callers;
  if (!Array.isArray(callers))
    throw new UsageError(`${file}: expected a top-level "callers:" list`);
  const seen = new Set<string>();
  return callers.map((entry, i) => {
    if (!entry || typeof entry !== "object" || Array.isArray(entry)) {
      throw new UsageError(`${file}: callers[${i}] is not a mapping`);
    }
    const caller = entry as Json;
    for (const key of Object.keys(caller)) {
      if (secretLooking.test(key)) {
        throw new UsageError(
          `${file}: callers[${i}].${key}: callers.yaml must not hold secrets; credentials are issued by the server and shown once`,
        );
      }
    }
    if (typeof caller.name !== "string")
      throw new UsageError(`${file}: callers[${i}].name is required`);
    if (seen.has(caller.name)) throw new UsageError(`${file}: caller ${caller.name} appears twice`);
    seen.add(caller.name);
    return caller;
  });
}

export const callersApplyCommand: Command = {
  words: ["callers", "apply"],
  summary: "create and update callers to match a YAML file (idempotent)",
  help: [
    "-f callers.yaml [--dry-run] [--json]",
    "",
    "The file holds `callers:`, a list of {name, kind, tier, allow, approvalPolicy, budgets,",
    "promptTemplate, eventFilter, jwt}. Missing callers are created (their credentials printed",
    "once), differing fields are changed, and drift that apply leaves alone is reported: callers",
    "the file does not name, and revoked callers (restore them explicitly).",
    "",
    "Creating a caller above the floor, and changes that widen one (a higher tier, new allow",
    "entries, a milder approval policy, a budget raised or removed), need the operator token as",
    "well as the admin token: set PEERGATE_OPERATOR_TOKEN or pass --operator-token-file.",
    "",
    "Options:",
    "  -f, --file F  the callers file (required)",
    "  --dry-run     say what would change, change nothing",
    "  --json        print {actions, credentials} as JSON",
    ...operatorTokenHelp.map((line) => line.replace(/^ {2}/, "  ")),
  ].join("\n"),
  options: {
    file: { type: "string", short: "f" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    ...operatorTokenOption,
  },
  async run(args, ctx) {
    const file = args.values.file;
    if (typeof file !== "string") throw new UsageError("-f callers.yaml is required");
    const desired = readDesired(await readFile(file, "utf8"), file);
    const client = await createAdminClient(ctx);
    const asOperator = await operatorHeaders(args, ctx);
    const { callers: current } = await client.request<{ callers: Json[] }>("GET", "/callers");
    const byName = new Map(current.map((c) => [c.name as string, c]));
    const dryRun = args.values["dry-run"] === true;
    const actions: Action[] = [];
    const credentials: { name: string; secret: string; usage: string; url?: string }[] = [];

    for (const want of desired) {
      const name = want.name as string;
      const have = byName.get(name);
      if (!have) {
        actions.push({ name, action: "create", fields: want });
        if (!dryRun) {
          const created = await client.request<{
            credential: { secret: string; usage: string; url?: string };
          }>("POST", "/callers", want, asOperator);
          credentials.push({ name, ...created.credential });
        }
        continue;
      }
      if (want.kind !== undefined && want.kind !== have.kind) {
        actions.push({
          name,
          action: "drift",
          note: `is a ${String(have.kind)} caller on the server, ${String(want.kind)} in the file; kind cannot change`,
        });
        continue;
      }
      if (have.revoked === true) {
        actions.push({
          name,
          action: "drift",
          note: "is revoked on the server; restore it explicitly (`peergate callers restore`)",
        });
        continue;
      }
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const field of managedFields) {
        if (want[field] !== undefined && !same(have[field], want[field]))
          changes[field] = { from: have[field], to: want[field] };
      }
      if (Object.keys(changes).length === 0) {
        actions.push({ name, action: "unchanged" });
        continue;
      }
      actions.push({ name, action: "update", changes });
      if (!dryRun) {
        const patch = Object.fromEntries(Object.entries(changes).map(([k, v]) => [k, v.to]));
        await client.request(
          "PATCH",
          `/callers/${encodeURIComponent(name)}`,
          { ...patch, expectedVersion: have.version },
          asOperator,
        );
      }
    }
    const named = new Set(desired.map((d) => d.name as string));
    for (const c of current) {
      if (!named.has(c.name as string))
        actions.push({
          name: c.name as string,
          action: "drift",
          note: "is on the server but not in the file (left alone)",
        });
    }

    if (args.values.json) {
      ctx.io.out(toTerminalJson({ dryRun, actions, credentials }));
      return exitCodes.ok;
    }
    for (const a of actions) {
      const verb =
        dryRun && (a.action === "create" || a.action === "update") ? `would ${a.action}` : a.action;
      if (a.action === "update")
        ctx.io.out(`${verb} ${a.name}: ${Object.keys(a.changes).join(", ")}`);
      else if (a.action === "drift") ctx.io.out(`drift   ${a.name} ${a.note}`);
      else ctx.io.out(`${verb} ${a.name}`);
    }
    for (const c of credentials) {
      ctx.io.out(
        `\nCredential for ${c.name} (shown once; peergate keeps only its hash):\n  ${c.url ?? c.secret}\n  ${c.usage}`,
      );
    }
    return exitCodes.ok;
  },
};
