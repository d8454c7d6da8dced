// `peergate callers set <name>`: change a caller; only the options given change, and budgets are
// merged into what is stored under the version read (a change made meanwhile is refused).
import type { CallerBudgets } from "../domain/caller.ts";
import { quoteUntrusted } from "../policy/quote.ts";
import { type BudgetsChange, mergeBudgets } from "../services/caller-input.ts";
import { type AdminRequestBody, callAdmin } from "./admin-client.ts";
import {
  buildFields,
  callerFields,
  callerFieldsHelp,
  nameOf,
  wideningHelp,
} from "./callers-options.ts";
import { describeCaller } from "./callers-output.ts";
import { type CliContext, type Command, exitCodes, UsageError } from "./command.ts";
import { nearest } from "./nearest.ts";
import { operatorHeaders } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const callersSetCommand: Command = {
  words: ["callers", "set"],
  summary: "change a caller's tier, allow list, approval policy, prompt or budgets",
  help: [
    "<name> [options]",
    "",
    "Only the options given change, and --budget changes only the limits it names: the others",
    "stay. Remove a limit with --clear-budget k (or --budget k=). --allow replaces the whole allow",
    "list (the answer shows it before and after); --add-allow and --remove-allow change single",
    "entries. An allow entry that names no tool of the inventory is refused (a typo would admit",
    "nothing) unless --allow-unknown-tools is given. A revoked caller gets a tier back only",
    "through `callers restore`.",
    "",
    ...wideningHelp,
    "",
    "Options:",
    ...callerFieldsHelp,
    "  --add-allow a,b   add these allow entries to the caller's list (repeatable)",
    "  --remove-allow a,b  remove these allow entries from the caller's list (repeatable)",
    "  --allow-unknown-tools  admit allow entries that name no tool yet (a tool a policy adds later)",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: {
    ...callerFields,
    "add-allow": { type: "string", multiple: true },
    "remove-allow": { type: "string", multiple: true },
    "allow-unknown-tools": { type: "boolean" },
  },
  async run(args, cli) {
    const body = await buildFields(args);
    const add = listOption(args.values["add-allow"]);
    const remove = listOption(args.values["remove-allow"]);
    if ((add.length || remove.length) && body.allow !== undefined) {
      throw new UsageError(
        "--allow replaces the whole list: give it, or --add-allow/--remove-allow, not both",
      );
    }
    let before: readonly string[] | undefined;
    if (add.length || remove.length || body.allow !== undefined) {
      const { caller } = await callAdmin(cli, "getCaller", { params: { name: nameOf(args) } });
      before = caller.allow;
      if (add.length || remove.length) {
        body.allow = [...new Set([...caller.allow, ...add])].filter((a) => !remove.includes(a));
        body.expectedVersion = caller.version;
      }
    }
    if (Object.keys(body).length === 0)
      throw new UsageError("nothing to change: give at least one option");
    if (Array.isArray(body.allow) && args.values["allow-unknown-tools"] !== true) {
      await refuseUnknownTools(cli, body.allow as string[], before ?? []);
    }
    if (body.budgets) {
      // The API replaces the budgets object; the CLI merges into what is stored and sends the
      // version it read, so a change made meanwhile is refused rather than overwritten.
      const { caller } = await callAdmin(cli, "getCaller", { params: { name: nameOf(args) } });
      body.budgets = mergeBudgets(caller.budgets as CallerBudgets, body.budgets as BudgetsChange);
      body.expectedVersion = caller.version;
    }
    const result = await callAdmin(cli, "updateCaller", {
      params: { name: nameOf(args) },
      body: body as AdminRequestBody<"updateCaller">,
      headers: await operatorHeaders(args, cli),
    });
    if (args.values.json) cli.io.out(toTerminalJson(result));
    else {
      cli.io.out(
        result.changed.length ? `changed ${result.changed.join(", ")}` : "nothing changed",
      );
      if (before !== undefined && result.changed.includes("allow")) {
        const shown = (list: readonly string[]) =>
          list.length ? list.map((a) => quoteUntrusted(a)).join(", ") : "(none)";
        cli.io.out(`allow: ${shown(before)} → ${shown(result.caller.allow)}`);
      }
      cli.io.out(describeCaller(result.caller));
      if (result.unknownAllowEntries.length)
        cli.io.out(
          `note: allow entries that name no tool: ${result.unknownAllowEntries.map((a) => quoteUntrusted(a)).join(", ")}`,
        );
    }
    return exitCodes.ok;
  },
};

/** `a,b` options, repeated or comma-separated, as one list. */
function listOption(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value
    .flatMap((v) => String(v).split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

/**
 * A new allow entry that names no tool admits nothing: almost always a typo. Refused before any
 * change is sent, naming the nearest tool; entries the caller already had are left alone.
 */
async function refuseUnknownTools(
  cli: CliContext,
  allow: readonly string[],
  before: readonly string[],
): Promise<void> {
  const { tools } = await callAdmin(cli, "listTools");
  const names = tools.map((t) => t.name);
  const unknown = allow.filter((a) => !before.includes(a) && !names.includes(a));
  if (unknown.length === 0) return;
  const each = unknown.map((a) => {
    const near = nearest(a, names);
    return `${quoteUntrusted(a)}${near ? ` (did you mean ${near}?)` : ""}`;
  });
  throw new UsageError(
    `no tool is named ${each.join(", ")}; the tools are ${names.join(", ")}. Pass --allow-unknown-tools to admit a name a policy will add later`,
  );
}
