// The options the caller verbs share (`callers add` and `callers set`), read into the body of an
// admin API request: only the options given appear, and --budget names only the limits it
// changes. The values are the operator's words as typed; the server validates them with the
// service's own schema and its messages are the ones printed, so nothing is checked twice here.
import { readFile } from "node:fs/promises";
import type { BudgetsChange } from "../services/caller-input.ts";
import { type ParsedArgs, UsageError } from "./command.ts";
import { operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";

export type Json = Record<string, unknown>;

export const list = (value: unknown): string[] | undefined => {
  if (value === undefined) return undefined;
  const values = Array.isArray(value) ? value : [value];
  return values.flatMap((v) => String(v).split(",")).filter((v) => v !== "");
};

const budgetNames = ["tokens", "costUsd", "durationMs", "steps", "concurrentRuns"];
const dailyBudgetNames = ["tokens", "costUsd", "runs"];

/** Where one budget name goes in a change: `tokens` or `daily.costUsd`; refuses unknown names. */
function budgetSlot(
  change: BudgetsChange,
  name: string,
  option: string,
): (v: number | null) => void {
  const daily = name.startsWith("daily.");
  const key = daily ? name.slice("daily.".length) : name;
  if (!(daily ? dailyBudgetNames : budgetNames).includes(key)) {
    throw new UsageError(
      `${option} ${JSON.stringify(name)}: not a budget; one of ${budgetNames.join(", ")}, ${dailyBudgetNames.map((n) => `daily.${n}`).join(", ")}`,
    );
  }
  return (value) => {
    if (!daily) (change as Record<string, number | null>)[key] = value;
    else {
      if (!change.daily) change.daily = {};
      (change.daily as Record<string, number | null>)[key] = value;
    }
  };
}

/**
 * `--budget tokens=1000 --budget daily.costUsd=5 --budget steps= --clear-budget durationMs` →
 * { tokens: 1000, daily: { costUsd: 5 }, steps: null, durationMs: null }: a change merged into
 * the caller's budgets (mergeBudgets), where null removes a limit.
 */
function readBudgets(values: ParsedArgs["values"]): BudgetsChange | undefined {
  const set = list(values.budget);
  const cleared = list(values["clear-budget"]);
  if (!set && !cleared) return undefined;
  const change: BudgetsChange = {};
  for (const entry of set ?? []) {
    const match = /^((?:daily\.)?[A-Za-z]+)=([0-9]+(?:\.[0-9]+)?)?$/.exec(entry);
    if (!match?.[1]) {
      throw new UsageError(
        `--budget ${JSON.stringify(entry)}: expected name=number (or name= to remove it), e.g. tokens=100000 or daily.costUsd=5`,
      );
    }
    budgetSlot(change, match[1], "--budget")(match[2] === undefined ? null : Number(match[2]));
  }
  for (const name of cleared ?? []) budgetSlot(change, name, "--clear-budget")(null);
  return change;
}

async function readPrompt(args: ParsedArgs): Promise<string | undefined> {
  const { prompt, "prompt-file": file } = args.values;
  if (typeof prompt === "string" && typeof file === "string") {
    throw new UsageError("give --prompt or --prompt-file, not both");
  }
  if (typeof file === "string") return readFile(file, "utf8");
  return typeof prompt === "string" ? prompt : undefined;
}

export async function readJwt(args: ParsedArgs): Promise<Json | undefined> {
  const v = args.values;
  const issuer = v["jwt-issuer"];
  if (typeof issuer !== "string") return undefined;
  const jwt: Json = {
    issuer,
    audience: typeof v["jwt-audience"] === "string" ? v["jwt-audience"] : "peergate",
    algorithms: list(v["jwt-alg"]) ?? ["ES256"],
  };
  if (typeof v["jwt-jwks-url"] === "string") jwt.jwksUrl = v["jwt-jwks-url"];
  if (typeof v["jwt-jwk-file"] === "string")
    jwt.jwk = JSON.parse(await readFile(v["jwt-jwk-file"], "utf8"));
  if (typeof v["jwt-pem-file"] === "string") jwt.pem = await readFile(v["jwt-pem-file"], "utf8");
  return jwt;
}

export const callerFields = {
  tier: { type: "string" },
  allow: { type: "string", multiple: true },
  approval: { type: "string" },
  prompt: { type: "string" },
  "prompt-file": { type: "string" },
  events: { type: "string", multiple: true },
  budget: { type: "string", multiple: true },
  command: { type: "string", multiple: true },
  override: { type: "string", multiple: true },
  "grant-host": { type: "string", multiple: true },
  "grant-suffix": { type: "string", multiple: true },
  "grant-prefix": { type: "string", multiple: true },
  "when-nobody": { type: "string" },
  classifier: { type: "string" },
  "clear-budget": { type: "string", multiple: true },
  json: { type: "boolean" },
  ...operatorTokenOption,
} as const;

export const callerFieldsHelp = [
  "  --tier T          public, internal or private",
  "  --allow a,b       tools admitted by name (repeatable); acting and egress tools need this",
  "  --approval P      auto (default), read-only or low-risk: calls above it park for an operator",
  "  --prompt TEXT     webhook callers: the fixed prompt; {{payload}} marks where the body goes",
  "  --prompt-file F   the same, read from a file",
  "  --events e,f      github callers: events that fire a run (issues, issues.opened …)",
  "  --budget k=v      tokens, costUsd, durationMs, steps, concurrentRuns, daily.tokens,",
  "                    daily.costUsd, daily.runs (repeatable); only the limits named change",
  "  --clear-budget k  remove that limit (or --budget k=); removing a limit widens the caller",
  '  --command "git status"  a command allowlist entry (repeatable; replaces the list)',
  "  --override tool=V  a per-tool override, V one of allow, deny, prompt (repeatable)",
  "  --grant-host H, --grant-suffix .S, --grant-prefix URL",
  "                    web_fetch URL grants (repeatable; together they replace the grants)",
  "  --when-nobody M   park or decline a call that needs a person (default: decline for",
  "                    webhook kinds, park for peers)",
  "  --classifier on|off  off: the command risk classifier never rates this caller's",
  "                    commands, so an uncovered one always asks (on again needs the operator)",
  "  --json            print the API's answer as JSON",
  ...operatorTokenHelp,
];

/** Why some changes need the operator token, for the help of every verb that writes. */
export const wideningHelp = [
  "A change that widens what the caller may do (a higher tier, new allow entries, a milder",
  "approval policy, a budget raised or removed) needs the operator token as well as the admin",
  "token: set PEERGATE_OPERATOR_TOKEN or pass --operator-token-file. Narrowing needs neither.",
];

export async function buildFields(args: ParsedArgs): Promise<Json> {
  const v = args.values;
  const body: Json = {};
  if (typeof v.tier === "string") body.tier = v.tier;
  const allow = list(v.allow);
  if (allow) body.allow = allow;
  if (typeof v.approval === "string") body.approvalPolicy = v.approval;
  const prompt = await readPrompt(args);
  if (prompt !== undefined) body.promptTemplate = prompt;
  const events = list(v.events);
  if (events) body.eventFilter = events;
  const budgets = readBudgets(v);
  if (budgets) body.budgets = budgets;
  const texts = (value: unknown): string[] | undefined =>
    Array.isArray(value) ? value.map(String) : typeof value === "string" ? [value] : undefined;
  const commandEntries = texts(v.command);
  if (commandEntries) body.commands = commandEntries;
  const overrides = texts(v.override);
  if (overrides) {
    const map: Record<string, string> = {};
    for (const item of overrides) {
      const eq = item.lastIndexOf("=");
      if (eq <= 0) {
        throw new UsageError(
          `--override ${JSON.stringify(item)}: expected tool=allow, tool=deny or tool=prompt`,
        );
      }
      Object.defineProperty(map, item.slice(0, eq), {
        value: item.slice(eq + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    body.toolOverrides = map;
  }
  const hosts = texts(v["grant-host"]);
  const suffixes = texts(v["grant-suffix"]);
  const prefixes = texts(v["grant-prefix"]);
  if (hosts || suffixes || prefixes) {
    body.urlGrants = {
      ...(hosts ? { hosts } : {}),
      ...(suffixes ? { suffixes } : {}),
      ...(prefixes ? { prefixes } : {}),
    };
  }
  if (typeof v["when-nobody"] === "string") body.whenNobody = v["when-nobody"];
  if (typeof v.classifier === "string") body.classifier = v.classifier;
  return body;
}

export function nameOf(args: ParsedArgs): string {
  const name = args.positionals[0];
  if (!name) throw new UsageError("expected a caller name");
  return name;
}
