// `peergate callers apply -f callers.yaml`: declarative callers. The file is read and checked for
// shape here (YAML, a list, no secret-looking field); the server then makes it true in ONE
// transaction (src/services/apply-callers.ts): every create, change, push-grant replacement and
// prune commits together with its audit events, or nothing does. `--dry-run` runs the same
// apply and rolls it back, printing each change as old → new. Running it twice changes nothing
// the second time. New credentials are printed once (never written back to the file).
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { type AdminResponse, callAdmin } from "./admin-client.ts";
import { type CliContext, type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

type Json = Record<string, unknown>;

const secretLooking = /token|secret|password|credential|^key$/i;

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

function printCredentials(cli: CliContext, credentials: readonly Credential[]): void {
  for (const c of credentials) {
    cli.io.out(
      `\nCredential for ${escapeForTerminal(c.name)} (shown once; peergate keeps only its hash):\n  ${c.url ?? c.secret}\n  ${c.usage}`,
    );
  }
}

type Credential = { name: string; secret: string; usage: string; url?: string | undefined };
type Report = AdminResponse<"applyCallers">;

/** A stored or wanted value, short, on one line. */
function shown(value: unknown): string {
  const text = value === undefined || value === null ? "(none)" : JSON.stringify(value);
  return escapeForTerminal(text.length > 120 ? `${text.slice(0, 117)}...` : text);
}

function printReport(cli: CliContext, report: Report): void {
  for (const a of report.actions) {
    const name = escapeForTerminal(a.name);
    const verb =
      report.dryRun && a.action !== "unchanged" && a.action !== "drift"
        ? `would ${a.action}`
        : a.action;
    const operator = a.needsOperator?.length
      ? ` (widens: ${a.needsOperator.join(", ")}; needs the operator token)`
      : "";
    if (a.action === "update") {
      cli.io.out(`${verb} ${name}: ${Object.keys(a.changes ?? {}).join(", ")}${operator}`);
      for (const [field, change] of Object.entries(a.changes ?? {}))
        cli.io.out(`    ${field}: ${shown(change.from)} → ${shown(change.to)}`);
    } else if (a.action === "drift") cli.io.out(`drift   ${name} ${a.note ?? ""}`);
    else if (a.action === "revoke" || a.action === "delete")
      cli.io.out(`${verb} ${name}: ${a.note ?? ""}`);
    else cli.io.out(`${verb} ${name}${operator}`);
  }
}

export const callersApplyCommand: Command = {
  words: ["callers", "apply"],
  summary: "make callers match a YAML file, in one transaction (idempotent)",
  help: [
    "-f callers.yaml [--dry-run] [--prune] [--json]",
    "",
    "The file holds `callers:`, a list of {name, kind, tier, allow, approvalPolicy, budgets,",
    "promptTemplate, eventFilter, jwt, commands, toolOverrides, urlGrants, whenNobody,",
    "classifier, pushHosts} (what `callers export` writes). Missing callers are created (their",
    "credentials printed once), differing fields are changed, and drift apply leaves alone is",
    "reported: revoked callers (restore them explicitly) and, without --prune, callers the file",
    "does not name. All of it is one transaction on the server: it applies whole or not at all.",
    "",
    "Creating a caller above the floor, and changes that widen one (a higher tier, new allow",
    "entries, a milder approval policy, a budget raised or removed, a push host added), need the",
    "operator token as well as the admin token: set PEERGATE_OPERATOR_TOKEN or pass",
    "--operator-token-file. Every caller that widens is named at once.",
    "",
    "Options:",
    "  -f, --file F  the callers file (required)",
    "  --dry-run     do the apply and roll it back: print each change as old → new",
    "  --prune       revoke callers the file does not name, then delete those nothing refers",
    "                to (a caller with runs or tasks stays, revoked, so no history is lost)",
    "  --json        print {dryRun, actions, credentials} as JSON",
    ...operatorTokenHelp.map((line) => line.replace(/^ {2}/, "  ")),
  ].join("\n"),
  options: {
    file: { type: "string", short: "f" },
    "dry-run": { type: "boolean" },
    prune: { type: "boolean" },
    json: { type: "boolean" },
    ...operatorTokenOption,
  },
  async run(args, cli) {
    const file = args.values.file;
    if (typeof file !== "string") throw new UsageError("-f callers.yaml is required");
    const desired = readDesired(await readFile(file, "utf8"), file);
    const dryRun = args.values["dry-run"] === true;
    let report: Report;
    try {
      report = await callAdmin(cli, "applyCallers", {
        body: { callers: desired, dryRun, prune: args.values.prune === true },
        headers: await operatorHeaders(args, cli),
      });
    } catch (error) {
      throw new Error(`${file}: nothing was applied:\n${(error as Error).message}`);
    }
    if (args.values.json) {
      cli.io.out(toTerminalJson(report));
      return exitCodes.ok;
    }
    printReport(cli, report);
    printCredentials(cli, report.credentials);
    return exitCodes.ok;
  },
};
