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
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

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
      const { caller } = await callAdmin(ctx, "getCaller", { params: { name: nameOf(args) } });
      body.budgets = mergeBudgets(caller.budgets as CallerBudgets, body.budgets as BudgetsChange);
      body.expectedVersion = caller.version;
    }
    const result = await callAdmin(ctx, "updateCaller", {
      params: { name: nameOf(args) },
      body: body as AdminRequestBody<"updateCaller">,
      headers: await operatorHeaders(args, ctx),
    });
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
