// `peergate callers …`: the admin API's caller verbs from a terminal. Human output is a short
// summary; `--json` prints exactly what the API returned. A created, rotated or restored
// credential is printed once, here, and never again.
import { readFile } from "node:fs/promises";
import type { CallerBudgets } from "../domain/caller.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import { type BudgetsChange, mergeBudgets } from "../services/caller-input.ts";
import { requestAdmin } from "./admin-client.ts";
import {
  type CliContext,
  type Command,
  exitCodes,
  type ParsedArgs,
  UsageError,
} from "./command.ts";
import { printListing } from "./format-table.ts";
import { operatorHeaders, operatorTokenHelp, operatorTokenOption } from "./operator-token.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

type Json = Record<string, unknown>;
type CallerView = {
  name: string;
  kind: string;
  tier: string;
  revoked: boolean;
  allow: string[];
  approvalPolicy: string;
  version: number;
  budgets: Json;
  promptTemplate: string | null;
  eventFilter: string[] | null;
  commands?: string[];
  toolOverrides?: Record<string, string>;
  urlGrants?: { hosts?: string[]; suffixes?: string[]; prefixes?: string[] } | null;
  whenNobody?: string;
  classifier?: string;
  credentials: {
    id: string;
    kind: string;
    prefix: string;
    active: boolean;
    expiresAt: string | null;
  }[];
};
type IssuedCredential = { secret: string; prefix: string; usage: string; url?: string };

const list = (value: unknown): string[] | undefined => {
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

async function readJwt(args: ParsedArgs): Promise<Json | undefined> {
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

function describeCaller(c: CallerView): string {
  const active = c.credentials.filter((k) => k.active);
  const e = (text: unknown) => escapeForTerminal(text);
  return [
    `${e(c.name)}  (${e(c.kind)}, version ${e(c.version)})${c.revoked ? "  REVOKED" : ""}`,
    `  tier:      ${e(c.tier)}`,
    `  allow:     ${c.allow.length ? c.allow.map((a) => quoteUntrusted(a)).join(", ") : "(none)"}`,
    `  approval:  ${e(c.approvalPolicy)}`,
    `  budgets:   ${toTerminalJson(c.budgets)}`,
    `  commands:  ${c.commands?.length ? c.commands.map((a) => quoteUntrusted(a)).join(", ") : "(none)"}`,
    `  overrides: ${
      Object.keys(c.toolOverrides ?? {}).length
        ? Object.entries(c.toolOverrides ?? {})
            .map(([t, o]) => `${quoteUntrusted(t)}=${e(o)}`)
            .join(", ")
        : "(none)"
    }`,
    `  grants:    ${
      c.urlGrants
        ? [
            ...(c.urlGrants.hosts ?? []),
            ...(c.urlGrants.suffixes ?? []),
            ...(c.urlGrants.prefixes ?? []),
          ]
            .map((g) => quoteUntrusted(g))
            .join(", ") || "(nothing granted: every fetch asks)"
        : "(none: web_fetch follows the approval policy)"
    }`,
    ...(c.whenNobody ? [`  nobody:    ${e(c.whenNobody)} (a call that needs a person)`] : []),
    ...(c.classifier === "off" ? ["  classifier: off (an uncovered command always asks)"] : []),
    ...(c.promptTemplate !== null ? [`  prompt:    ${quoteUntrusted(c.promptTemplate, 200)}`] : []),
    ...(c.eventFilter ? [`  events:    ${e(c.eventFilter.join(", "))}`] : []),
    `  credentials: ${active.length ? active.map((k) => `${e(k.prefix)}${k.expiresAt ? ` (until ${e(k.expiresAt)})` : ""}`).join(", ") : "none active"}`,
  ].join("\n");
}

function printCredential(ctx: CliContext, credential: IssuedCredential): void {
  ctx.io.out("");
  ctx.io.out("Credential (shown once; peergate keeps only its hash):");
  ctx.io.out(`  ${credential.url ?? credential.secret}`);
  ctx.io.out(`  ${credential.usage}`);
}

const callerFields = {
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

const callerFieldsHelp = [
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
const wideningHelp = [
  "A change that widens what the caller may do (a higher tier, new allow entries, a milder",
  "approval policy, a budget raised or removed) needs the operator token as well as the admin",
  "token: set PEERGATE_OPERATOR_TOKEN or pass --operator-token-file. Narrowing needs neither.",
];

async function buildFields(args: ParsedArgs): Promise<Json> {
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

function nameOf(args: ParsedArgs): string {
  const name = args.positionals[0];
  if (!name) throw new UsageError("expected a caller name");
  return name;
}

export const callersAddCommand: Command = {
  words: ["callers", "add"],
  summary: "create a caller and print its credential once",
  help: [
    "<name> --kind peer|github|ifttt|webhook [options]",
    "",
    "Creates a caller and prints its credential: a bearer token (peer, webhook), the secret to",
    "paste into GitHub's webhook settings (github), or the full URL for the IFTTT applet (ifttt).",
    "A caller created with a tier above public, allow entries or budgets above the defaults needs",
    "the operator token too (PEERGATE_OPERATOR_TOKEN or --operator-token-file).",
    "",
    "Options:",
    "  --kind K          peer, github, ifttt or webhook (required)",
    ...callerFieldsHelp,
    "  --jwt-issuer I    peer: accept JWTs from this issuer (with --jwt-alg, --jwt-audience and",
    "                    one of --jwt-jwks-url URL, --jwt-jwk-file F, --jwt-pem-file F). The",
    "                    audience defaults to peergate; exp, iat and jti are required, and each",
    "                    token is accepted once (docs/operating.md)",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: {
    kind: { type: "string" },
    ...callerFields,
    "jwt-issuer": { type: "string" },
    "jwt-audience": { type: "string" },
    "jwt-alg": { type: "string", multiple: true },
    "jwt-jwks-url": { type: "string" },
    "jwt-jwk-file": { type: "string" },
    "jwt-pem-file": { type: "string" },
  },
  async run(args, ctx) {
    if (typeof args.values.kind !== "string")
      throw new UsageError("--kind is required: peer, github, ifttt or webhook");
    const body: Json = { name: nameOf(args), kind: args.values.kind, ...(await buildFields(args)) };
    const jwt = await readJwt(args);
    if (jwt) body.jwt = jwt;
    const result = await requestAdmin<{
      caller: CallerView;
      credential: IssuedCredential;
      unknownAllowEntries: string[];
    }>(ctx, "POST", "/callers", body, await operatorHeaders(args, ctx));
    if (args.values.json) {
      ctx.io.out(toTerminalJson(result));
      return exitCodes.ok;
    }
    ctx.io.out(`created ${describeCaller(result.caller)}`);
    if (result.unknownAllowEntries.length) {
      ctx.io.out(
        `note: allow entries that name no tool: ${result.unknownAllowEntries.map((e) => quoteUntrusted(e)).join(", ")}`,
      );
    }
    printCredential(ctx, result.credential);
    return exitCodes.ok;
  },
};

export const callersListCommand: Command = {
  words: ["callers", "list"],
  summary: "list callers",
  help: "[--json]\n\nOne line per caller: name, kind, tier, state, allow list, active credentials.",
  options: { json: { type: "boolean" } },
  async run(args, ctx) {
    const { callers } = await requestAdmin<{ callers: CallerView[] }>(ctx, "GET", "/callers");
    printListing(ctx.io.out, {
      json: args.values.json === true,
      value: { callers },
      headers: ["NAME", "KIND", "TIER", "STATE", "ALLOW", "CREDENTIALS"],
      rows: callers.map((c) => [
        c.name,
        c.kind,
        c.tier,
        c.revoked ? "revoked" : "active",
        c.allow.length ? c.allow.map((a) => quoteUntrusted(a)).join(",") : "-",
        c.credentials
          .filter((k) => k.active)
          .map((k) => k.prefix)
          .join(",") || "-",
      ]),
      empty: "no callers yet; add one with `peergate callers add <name> --kind peer`",
    });
    return exitCodes.ok;
  },
};

export const callersShowCommand: Command = {
  words: ["callers", "show"],
  summary: "show one caller",
  help: "<name> [--json]",
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { json: { type: "boolean" } },
  async run(args, ctx) {
    const result = await requestAdmin<{ caller: CallerView }>(
      ctx,
      "GET",
      `/callers/${encodeURIComponent(nameOf(args))}`,
    );
    ctx.io.out(args.values.json ? toTerminalJson(result) : describeCaller(result.caller));
    return exitCodes.ok;
  },
};

export const callersSetCommand: Command = {
  words: ["callers", "set"],
  summary: "change a caller's tier, allow list, approval policy, prompt or budgets",
  help: [
    "<name> [options]",
    "",
    "Only the options given change, and --budget changes only the limits it names: the others",
    "stay. Remove a limit with --clear-budget k (or --budget k=). A revoked caller gets a tier",
    "back only through `callers restore`.",
    "",
    ...wideningHelp,
    "",
    "Options:",
    ...callerFieldsHelp,
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: callerFields,
  async run(args, ctx) {
    const body = await buildFields(args);
    if (Object.keys(body).length === 0)
      throw new UsageError("nothing to change: give at least one option");
    if (body.budgets) {
      // The API replaces the budgets object; the CLI merges into what is stored and sends the
      // version it read, so a change made meanwhile is refused rather than overwritten.
      const { caller } = await requestAdmin<{ caller: CallerView }>(
        ctx,
        "GET",
        `/callers/${encodeURIComponent(nameOf(args))}`,
      );
      body.budgets = mergeBudgets(caller.budgets as CallerBudgets, body.budgets as BudgetsChange);
      body.expectedVersion = caller.version;
    }
    const result = await requestAdmin<{
      caller: CallerView;
      changed: string[];
      unknownAllowEntries: string[];
    }>(
      ctx,
      "PATCH",
      `/callers/${encodeURIComponent(nameOf(args))}`,
      body,
      await operatorHeaders(args, ctx),
    );
    if (args.values.json) ctx.io.out(toTerminalJson(result));
    else {
      ctx.io.out(
        result.changed.length ? `changed ${result.changed.join(", ")}` : "nothing changed",
      );
      ctx.io.out(describeCaller(result.caller));
      if (result.unknownAllowEntries.length)
        ctx.io.out(
          `note: allow entries that name no tool: ${result.unknownAllowEntries.map((a) => quoteUntrusted(a)).join(", ")}`,
        );
    }
    return exitCodes.ok;
  },
};

export const callersRevokeCommand: Command = {
  words: ["callers", "revoke"],
  summary: "revoke a caller at once, everywhere",
  help: [
    "<name> [--reason TEXT] [--json]",
    "",
    "Sets the tier to none, kills every credential, stops the caller's runs in flight and",
    "rejects its parked runs, on every instance sharing the database.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { reason: { type: "string" }, json: { type: "boolean" } },
  async run(args, ctx) {
    const result = await requestAdmin<{
      caller: CallerView;
      credentialsRevoked: number;
      parkedRunsRejected: number;
    }>(
      ctx,
      "POST",
      `/callers/${encodeURIComponent(nameOf(args))}/revoke`,
      typeof args.values.reason === "string" ? { reason: args.values.reason } : {},
    );
    if (args.values.json) ctx.io.out(toTerminalJson(result));
    else
      ctx.io.out(
        `revoked ${escapeForTerminal(result.caller.name)}: ${result.credentialsRevoked} credential(s) killed, ${result.parkedRunsRejected} parked run(s) rejected`,
      );
    return exitCodes.ok;
  },
};

export const callersRestoreCommand: Command = {
  words: ["callers", "restore"],
  summary: "bring a revoked caller back with a new credential",
  help: [
    "<name> --tier T [--operator-token-file F] [--json]",
    "",
    "Sets the tier and issues a new credential (old ones stay dead). A restore always widens,",
    "so it needs the operator token as well as the admin token: PEERGATE_OPERATOR_TOKEN or",
    "--operator-token-file.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { tier: { type: "string" }, json: { type: "boolean" }, ...operatorTokenOption },
  async run(args, ctx) {
    if (typeof args.values.tier !== "string")
      throw new UsageError("--tier is required: public, internal or private");
    const result = await requestAdmin<{
      caller: CallerView;
      credential: IssuedCredential;
    }>(
      ctx,
      "POST",
      `/callers/${encodeURIComponent(nameOf(args))}/restore`,
      { tier: args.values.tier },
      await operatorHeaders(args, ctx),
    );
    if (args.values.json) ctx.io.out(toTerminalJson(result));
    else {
      ctx.io.out(`restored ${describeCaller(result.caller)}`);
      printCredential(ctx, result.credential);
    }
    return exitCodes.ok;
  },
};

export const callersRotateCommand: Command = {
  words: ["callers", "rotate"],
  summary: "issue a new credential; the old one dies now or after --grace",
  help: [
    "<name> [--grace SECONDS] [--operator-token-file F] [--json]",
    "",
    "Issues a new credential; the old ones die now, or after --grace seconds. The new credential",
    "carries the caller's authority, so for a caller above the floor (a tier above public, allow",
    "entries or budgets above the defaults) it needs the operator token as well as the admin",
    "token: PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: { grace: { type: "string" }, json: { type: "boolean" }, ...operatorTokenOption },
  async run(args, ctx) {
    const grace = args.values.grace === undefined ? 0 : Number(args.values.grace);
    if (!Number.isInteger(grace) || grace < 0)
      throw new UsageError(
        `--grace ${JSON.stringify(args.values.grace)}: expected whole seconds ≥ 0`,
      );
    const result = await requestAdmin<{
      caller: CallerView;
      credential: IssuedCredential;
      oldCredentialsExpireAt: string;
    }>(
      ctx,
      "POST",
      `/callers/${encodeURIComponent(nameOf(args))}/rotate`,
      { graceSeconds: grace },
      await operatorHeaders(args, ctx),
    );
    if (args.values.json) ctx.io.out(toTerminalJson(result));
    else {
      ctx.io.out(
        grace === 0
          ? "old credentials revoked now"
          : `old credentials work until ${result.oldCredentialsExpireAt}`,
      );
      printCredential(ctx, result.credential);
    }
    return exitCodes.ok;
  },
};
