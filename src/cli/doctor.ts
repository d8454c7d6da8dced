// `peergate doctor`: checks what the first hour of an operator trips on, and says what to do.
import { loadConfig } from "../config.ts";
import { type DoctorCheck, diagnose } from "../services/doctor.ts";
import { type Command, exitCodes } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const doctorCommand: Command = {
  words: ["doctor"],
  summary: "check the configuration, database, model, tokens, sandbox and public URL",
  help: [
    "[--no-model-call] [--json]",
    "",
    "Checks, changing nothing: the policy files are valid; the database is reachable and",
    "migrated; a model is configured, priced (an unpriced model fails every run of a caller with",
    "a cost budget, and the default budgets have one) and answers one tiny call; where the admin",
    "token comes from and whether the database knows it; the operator token exists; the secret",
    "key opens the sealed GitHub secrets; the sandbox works; the public URL GitHub and IFTTT need.",
    "With the embedded database and the server running, the database checks are in its log.",
    "Exits 1 when a check fails.",
    "",
    "Options:",
    "  --no-model-call  skip the model call (it costs a few tokens)",
    "  --json           print {checks: [{check, status, detail, fix}]} as JSON",
  ].join("\n"),
  options: { "no-model-call": { type: "boolean" }, json: { type: "boolean" } },
  async run(args, ctx) {
    const config = loadConfig(ctx.env, ctx.cwd);
    const checks = await diagnose({ config, modelCall: args.values["no-model-call"] !== true });
    const failed = checks.some((c) => c.status === "fail");
    if (args.values.json) ctx.io.out(toTerminalJson({ ok: !failed, checks }));
    else ctx.io.out(describeChecks(checks));
    return failed ? exitCodes.failed : exitCodes.ok;
  },
};

function describeChecks(checks: readonly DoctorCheck[]): string {
  const table = formatTable(
    ["STATUS", "CHECK", "DETAIL"],
    checks.map((c) => [c.status.toUpperCase(), c.check, c.detail]),
  );
  const fixes = checks
    .filter((c) => c.fix && (c.status === "warn" || c.status === "fail"))
    .map((c) => `  ${c.check}: ${c.fix}`);
  return fixes.length ? `${table}\n\nWhat to do:\n${fixes.join("\n")}` : table;
}
