// `peergate doctor`: checks what the first hour of an operator trips on, and says what to do.
// When a server answers (the admin API, as every other verb finds it), its checks are the ones
// printed: the model, database, policies and sandbox it runs with, not this shell's environment.
// Only when none answers does doctor check locally, and it says which view it prints.
import { loadConfig } from "../config.ts";
import { requestControl } from "../control/request-control.ts";
import { type DoctorCheck, diagnose } from "../services/doctor.ts";
import { ApiError, callAdmin, createAdminClient } from "./admin-client.ts";
import { type CliContext, type Command, exitCodes } from "./command.ts";
import { formatTable } from "./format-table.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const doctorCommand: Command = {
  words: ["doctor"],
  summary: "check the configuration, database, model, tokens, sandbox and public URL",
  help: [
    "[--no-model-call] [--local] [--json]",
    "",
    "Asks the running server for its own checks when one answers (PEERGATE_URL, else where a",
    "local `peergate serve` listens; the admin token): they describe the environment the server",
    "was started with, not this shell's. When no server answers, checks locally and says so.",
    "Checks, changing nothing: the policy files are valid; the database is reachable and",
    "migrated; a model is configured, priced (an unpriced model fails every run of a caller with",
    "a cost budget, and the default budgets have one) and answers one tiny call; where the admin",
    "token comes from and whether the database knows it; the operator token exists; the secret",
    "key opens the sealed GitHub secrets; the sandbox works; the public URL GitHub and IFTTT need.",
    "Exits 1 when a check fails.",
    "",
    "Options:",
    "  --no-model-call  skip the model call (it costs a few tokens)",
    "  --local          check this shell's environment even when a server answers",
    '  --json           print {ok, view: "server"|"local", server?, note?, checks: [{check,',
    "                   status, detail, fix}]} as JSON",
  ].join("\n"),
  options: {
    "no-model-call": { type: "boolean" },
    local: { type: "boolean" },
    json: { type: "boolean" },
  },
  async run(args, cli) {
    const modelCall = args.values["no-model-call"] !== true;
    const asked = args.values.local === true ? undefined : await askServer(cli, modelCall);
    let report: { view: "server" | "local"; server?: string; note: string; checks: DoctorCheck[] };
    if (asked && "checks" in asked) {
      report = {
        view: "server",
        server: asked.server,
        note: `asked the server at ${asked.server}: these are its checks, with its configuration`,
        checks: asked.checks,
      };
    } else {
      const config = loadConfig(cli.env, cli.cwd);
      const checks = await diagnose({ config, modelCall, serverHoldsDatabase });
      const why = asked?.reason ?? "--local";
      report = {
        view: "local",
        note: `checked locally, with this shell's environment (${why})`,
        checks,
      };
    }
    const failed = report.checks.some((c) => c.status === "fail");
    if (args.values.json) cli.io.out(toTerminalJson({ ok: !failed, ...report }));
    else cli.io.out(`${report.note}\n\n${describeChecks(report.checks)}`);
    return failed ? exitCodes.failed : exitCodes.ok;
  },
};

/**
 * The running server's checks, or why there are none: no server answered, no admin token here,
 * or a server too old to have the route.
 */
async function askServer(
  cli: CliContext,
  modelCall: boolean,
): Promise<{ server: string; checks: DoctorCheck[] } | { reason: string }> {
  let client: Awaited<ReturnType<typeof createAdminClient>>;
  try {
    client = await createAdminClient(cli);
  } catch (error) {
    return { reason: (error as Error).message };
  }
  try {
    const answer = await callAdmin(
      cli,
      "getDoctor",
      { query: { modelCall: modelCall ? "true" : "false" } },
      client,
    );
    return { server: client.baseUrl, checks: answer.checks };
  } catch (error) {
    if (error instanceof ApiError) {
      const why =
        error.status === 404
          ? "has no doctor route (an older peergate)"
          : error.status === 401
            ? "refused the admin token"
            : `answered ${error.status}`;
      return { reason: `the server at ${client.baseUrl} ${why}` };
    }
    return { reason: `no server answered at ${client.baseUrl}` };
  }
}

/** Whether a server answers on the control socket, and so holds the embedded database. */
async function serverHoldsDatabase(dataDir: string): Promise<boolean> {
  try {
    return (await requestControl(dataDir, { verb: "ping" }, 3_000)) !== undefined;
  } catch {
    return false;
  }
}

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
