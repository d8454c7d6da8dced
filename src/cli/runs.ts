// `peergate runs …`: what callers' runs did, and the operator's answers to parked ones.
import { type AdminRequestBody, type AdminResponse, callAdmin } from "./admin-client.ts";
import {
  type CliContext,
  type Command,
  exitCodes,
  type ParsedArgs,
  UsageError,
} from "./command.ts";
import { formatTable, printListing, queryFromOptions } from "./format-table.ts";
import { readOperatorToken } from "./operator-token.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

/** A run as the admin API shows it, and one line of the list. */
type RunDetail = AdminResponse<"getRun">["run"];
type RunSummary = AdminResponse<"listRuns">["runs"][number];

/** The path parameters naming the run the verb is about. */
function runIdOf(args: ParsedArgs): { id: string } {
  const id = args.positionals[0];
  if (!id) throw new UsageError("expected a run id (see `peergate runs list`)");
  return { id };
}

/** One line of untrusted text, escaped for the terminal and cut at `max` characters. */
function line(text: unknown, max = 300): string {
  const safe = escapeForTerminal(text);
  return safe.length > max ? `${safe.slice(0, max)}…` : safe;
}

function describeRun(run: RunDetail): string {
  const lines = [
    `run ${line(run.id)}  (${line(run.origin)}, caller ${line(run.callerName)})`,
    `  status:    ${line(run.status)}${run.error ? ` — ${line(run.error.code)}: ${line(run.error.message)}` : ""}`,
    `  policy:    ${line(run.approvalPolicy)}; tools: ${line(run.toolSet.join(", ") || "(none)")}`,
    `  used:      ${toTerminalJson(run.budgetUsed)} of ${toTerminalJson(run.budgetLimits)}`,
    `  created:   ${line(run.createdAt)}${run.finishedAt ? `, finished ${line(run.finishedAt)}` : ""}`,
  ];
  if (run.pending) {
    const call = line(run.pending.callId);
    const digest = line(run.pending.argsDigest);
    lines.push(
      "  waiting for an operator:",
      `    call ${call}: ${line(run.pending.tool)}`,
      `    arguments digest ${digest}`,
      ...(run.pending.reason ? [`    why it asks: ${line(run.pending.reason, 2000)}`] : []),
      // JSON with every control and invisible character escaped: what the call would run, exactly.
      `    arguments ${line(toTerminalJson(run.pending.args), 4000)}`,
      ...(run.pending.previewDiff
        ? [
            "    preview:",
            ...run.pending.previewDiff.split("\n").map((l) => `      ${line(l, 2000)}`),
          ]
        : []),
      `    expires ${line(run.parkedUntil ?? "?")}`,
      `  approve: peergate runs approve ${line(run.id)} --call ${call} --digest ${digest}`,
    );
  }
  if (run.toolCalls.length) {
    lines.push(
      "  tool calls:",
      formatTable(
        ["CALL", "TOOL", "STATUS", "CODE", "DECIDED BY"],
        run.toolCalls.map((t) => [
          t.callId,
          t.tool,
          t.status,
          t.code ?? "-",
          t.decision
            ? `${t.decision.rule}${t.decision.classifier ? ` (classifier: ${t.decision.classifier.verdict})` : ""}`
            : "-",
        ]),
      ).replace(/^/gm, "    "),
    );
    // Why each decided call went as it did: the floor's reasons, coverage, the classifier.
    for (const t of run.toolCalls) {
      if (!t.decision) continue;
      lines.push(`    ${line(t.callId)}: ${line(t.decision.reason, 2000)}`);
      if (t.decision.floorReasons?.length) {
        lines.push(`      floor: ${line(t.decision.floorReasons.join("; "), 2000)}`);
      }
      if (t.decision.classifier) {
        const c = t.decision.classifier;
        lines.push(
          `      classifier ${line(c.model)}: ${line(c.reason, 500)} (${c.inputTokens ?? "?"}+${c.outputTokens ?? "?"} tokens, ${c.latencyMs} ms)`,
        );
      }
    }
  }
  if (run.text) {
    const text = run.text.length > 4000 ? `${run.text.slice(0, 4000)}…` : run.text;
    lines.push("  answer:", ...text.split("\n").map((l) => `    ${escapeForTerminal(l)}`));
  }
  return lines.join("\n");
}

export const runsListCommand: Command = {
  words: ["runs", "list"],
  summary: "list recent runs, newest first",
  help: [
    "[--caller NAME] [--status S] [--limit N] [--json]",
    "",
    "Options:",
    "  --caller NAME  only this caller's runs",
    "  --status S     submitted, working, parked, input-required, completed, failed, canceled, rejected, expired, interrupted, revoked",
    "  --limit N      at most N runs (default 50)",
    "  --json         print {runs} as JSON",
  ].join("\n"),
  options: {
    caller: { type: "string" },
    status: { type: "string" },
    limit: { type: "string" },
    json: { type: "boolean" },
  },
  async run(args, cli) {
    const query = queryFromOptions(args.values, ["caller", "status", "limit"]);
    const { runs } = await callAdmin(cli, "listRuns", { query: Object.fromEntries(query) });
    // A webhook run says which kind of webhook: github, ifttt or a plain webhook caller.
    const kinds = runs.some((r) => r.origin === "webhook")
      ? new Map((await callAdmin(cli, "listCallers")).callers.map((c) => [c.name, c.kind]))
      : new Map<string, string>();
    const originOf = (r: RunSummary) => {
      const kind = kinds.get(r.callerName);
      return r.origin === "webhook" && kind && kind !== "webhook" ? `webhook:${kind}` : r.origin;
    };
    printListing(cli.io.out, {
      json: args.values.json === true,
      value: { runs },
      headers: ["RUN", "CALLER", "ORIGIN", "STATUS", "WAITING ON", "CREATED"],
      rows: runs.map((r) => [
        r.id,
        r.callerName,
        originOf(r),
        r.status,
        r.pendingApproval ? `${r.pendingApproval.tool} (${r.pendingApproval.callId})` : "-",
        r.createdAt,
      ]),
      empty: "no runs",
    });
    return exitCodes.ok;
  },
};

export const runsShowCommand: Command = {
  words: ["runs", "show"],
  summary: "show a run: status, budgets, tool calls, and what a parked run waits on",
  help: "<run-id or A2A task id> [--json]\n\nThe A2A task id a peer was given names its run too.",
  positionals: { min: 1, max: 1, names: "a run id or A2A task id" },
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const { run } = await callAdmin(cli, "getRun", { params: runIdOf(args) });
    cli.io.out(args.values.json ? toTerminalJson({ run }) : describeRun(run));
    return exitCodes.ok;
  },
};

async function requireOperatorToken(args: ParsedArgs, cli: CliContext): Promise<string> {
  const token = await readOperatorToken(args, cli);
  if (!token) {
    throw new UsageError(
      "approving needs the operator token: set PEERGATE_OPERATOR_TOKEN or pass --operator-token-file (create one with `peergate operator-token create`)",
    );
  }
  return token;
}

export const runsApproveCommand: Command = {
  words: ["runs", "approve"],
  summary: "approve the call a parked run waits on (needs the operator token)",
  help: [
    "<run-id> --call CALL-ID --digest ARGS-DIGEST [--operator-token-file F] [--json]",
    "",
    "Names the pending call and the digest of its arguments exactly as `peergate runs show`",
    "prints them, so an approval can never apply to a different call. The first valid answer",
    "wins. The operator token comes from PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a run id" },
  options: {
    call: { type: "string" },
    digest: { type: "string" },
    "operator-token-file": { type: "string" },
    json: { type: "boolean" },
  },
  async run(args, cli) {
    const { call, digest } = args.values;
    if (typeof call !== "string" || typeof digest !== "string") {
      throw new UsageError(
        "--call and --digest are required (both are printed by `peergate runs show`)",
      );
    }
    const token = await requireOperatorToken(args, cli);
    const result = await callAdmin(cli, "approveRun", {
      params: runIdOf(args),
      body: { callId: call, argsDigest: digest },
      headers: { "x-peergate-operator-token": token },
    });
    cli.io.out(
      args.values.json ? toTerminalJson(result) : `approved; run ${args.positionals[0]} resumes`,
    );
    return exitCodes.ok;
  },
};

export const runsRejectCommand: Command = {
  words: ["runs", "reject"],
  summary: "turn down the call a parked run waits on; the run reads the reason",
  help: "<run-id> [--reason TEXT] [--call CALL-ID] [--json]",
  positionals: { min: 1, max: 1, names: "a run id" },
  options: { reason: { type: "string" }, call: { type: "string" }, json: { type: "boolean" } },
  async run(args, cli) {
    const body: AdminRequestBody<"rejectRun"> = {};
    if (typeof args.values.reason === "string") body.reason = args.values.reason;
    if (typeof args.values.call === "string") body.callId = args.values.call;
    const result = await callAdmin(cli, "rejectRun", { params: runIdOf(args), body });
    cli.io.out(
      args.values.json
        ? toTerminalJson(result)
        : `rejected; run ${args.positionals[0]} resumes without that call`,
    );
    return exitCodes.ok;
  },
};

export const runsCancelCommand: Command = {
  words: ["runs", "cancel"],
  summary: "stop a running run, wherever it runs",
  help: "<run-id or A2A task id> [--json]\n\nThe A2A task id a peer was given names its run too.",
  positionals: { min: 1, max: 1, names: "a run id or A2A task id" },
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const result = await callAdmin(cli, "cancelRun", { params: runIdOf(args) });
    cli.io.out(
      args.values.json
        ? toTerminalJson(result)
        : result.stopped
          ? "stopped"
          : "not running on any instance",
    );
    return result.stopped ? exitCodes.ok : exitCodes.failed;
  },
};

export const runsRetryCommand: Command = {
  words: ["runs", "retry"],
  summary: "start a failed or interrupted webhook run again, with the same prompt",
  help: [
    "<run-id> [--json]",
    "",
    "Starts a new run of the same caller with the same prompt, for a webhook run that failed or",
    "was interrupted (a model error, a crash, a shutdown), as GitHub's Redeliver of its delivery",
    "would. The delivery moves to the new run, so a later Redeliver is a duplicate once it",
    "succeeds. Audited as webhook.accepted with retryOf. A run that completed, one still running",
    "or waiting, one canceled, rejected or revoked, and an A2A run (its caller sends its message",
    "again) are refused, naming why.",
    "",
    "Options:",
    '  --json  print {"runId": "<the new run>", "retryOf": "<this run>"}',
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a run id" },
  options: { json: { type: "boolean" } },
  async run(args, cli) {
    const result = await callAdmin(cli, "retryRun", { params: runIdOf(args) });
    cli.io.out(
      args.values.json
        ? toTerminalJson(result)
        : `started run ${line(result.runId)} (a retry of ${line(result.retryOf)}); follow it with \`peergate runs show ${line(result.runId)}\``,
    );
    return exitCodes.ok;
  },
};
