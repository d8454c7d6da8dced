// The list of every `peergate` verb. Add a verb by adding its file and one entry here: its words
// and its summary (what `peergate --help` prints), and how to load it. A verb's file, and
// everything it imports, is loaded only when that verb runs or prints its own help, so a command
// that talks to a running server loads none of the server (test/cli/client-imports.test.ts) and
// `peergate --help` loads no verb at all. test/cli/commands.test.ts keeps each entry's words and
// summary equal to its verb's.
import type { CommandEntry } from "./command.ts";

export const commands: readonly CommandEntry[] = [
  {
    words: ["serve"],
    summary: "run the peergate server (what `npm start` runs)",
    load: async () => (await import("./serve.ts")).serveCommand,
  },
  {
    words: ["migrate"],
    summary: "apply pending database migrations",
    load: async () => (await import("./migrate.ts")).migrateCommand,
  },
  {
    words: ["migrate-data"],
    summary:
      "copy everything (callers, credentials' hashes, runs, tasks, audit) to another database",
    load: async () => (await import("./migrate-data.ts")).migrateDataCommand,
  },
  {
    words: ["doctor"],
    summary: "check the configuration, database, model, tokens, sandbox and public URL",
    load: async () => (await import("./doctor.ts")).doctorCommand,
  },
  {
    words: ["audit"],
    summary: "list audit events (see also: audit verify)",
    load: async () => (await import("./audit-list.ts")).auditListCommand,
  },
  {
    words: ["audit", "verify"],
    summary: "check the audit trail's hash chain for edits and gaps",
    load: async () => (await import("./audit-verify.ts")).auditVerifyCommand,
  },
  {
    words: ["audit", "checkpoints"],
    summary: "list the signed checkpoints over pruned prefixes of the audit chain",
    load: async () => (await import("./audit-checkpoints.ts")).auditCheckpointsCommand,
  },
  {
    words: ["prune"],
    summary: "count (or, with --apply, delete) rows past their retention, per table family",
    load: async () => (await import("./prune.ts")).pruneCommand,
  },
  {
    words: ["callers", "add"],
    summary: "create a caller and print its credential once",
    load: async () => (await import("./callers-add.ts")).callersAddCommand,
  },
  {
    words: ["callers", "list"],
    summary: "list callers",
    load: async () => (await import("./callers-list.ts")).callersListCommand,
  },
  {
    words: ["callers", "show"],
    summary: "show one caller",
    load: async () => (await import("./callers-show.ts")).callersShowCommand,
  },
  {
    words: ["callers", "set"],
    summary: "change a caller's tier, allow list, approval policy, prompt or budgets",
    load: async () => (await import("./callers-set.ts")).callersSetCommand,
  },
  {
    words: ["callers", "revoke"],
    summary: "revoke a caller at once, everywhere",
    load: async () => (await import("./callers-revoke.ts")).callersRevokeCommand,
  },
  {
    words: ["callers", "restore"],
    summary: "bring a revoked caller back with a new credential",
    load: async () => (await import("./callers-restore.ts")).callersRestoreCommand,
  },
  {
    words: ["callers", "rotate"],
    summary: "issue a new credential; the old one dies now or after --grace",
    load: async () => (await import("./callers-rotate.ts")).callersRotateCommand,
  },
  {
    words: ["callers", "apply"],
    summary: "make callers match a YAML file, in one transaction (idempotent)",
    load: async () => (await import("./callers-apply.ts")).callersApplyCommand,
  },
  {
    words: ["callers", "export"],
    summary: "write the callers file that `callers apply` reads (no secrets)",
    load: async () => (await import("./callers-export.ts")).callersExportCommand,
  },
  {
    words: ["runs", "list"],
    summary: "list recent runs, newest first",
    load: async () => (await import("./runs.ts")).runsListCommand,
  },
  {
    words: ["runs", "show"],
    summary: "show a run: status, budgets, tool calls, and what a parked run waits on",
    load: async () => (await import("./runs.ts")).runsShowCommand,
  },
  {
    words: ["runs", "approve"],
    summary: "approve the call a parked run waits on (needs the operator token)",
    load: async () => (await import("./runs.ts")).runsApproveCommand,
  },
  {
    words: ["runs", "reject"],
    summary: "turn down the call a parked run waits on; the run reads the reason",
    load: async () => (await import("./runs.ts")).runsRejectCommand,
  },
  {
    words: ["runs", "cancel"],
    summary: "stop a running run, wherever it runs",
    load: async () => (await import("./runs.ts")).runsCancelCommand,
  },
  {
    words: ["runs", "retry"],
    summary: "start a failed or interrupted webhook run again, with the same prompt",
    load: async () => (await import("./runs.ts")).runsRetryCommand,
  },
  {
    words: ["ceiling"],
    summary: "explain which tools a caller (or a hypothetical one) gets, and why",
    load: async () => (await import("./ceiling.ts")).ceilingCommand,
  },
  {
    words: ["tools"],
    summary: "list the tool inventory with risk, disclosure and egress",
    load: async () => (await import("./tools.ts")).toolsCommand,
  },
  {
    words: ["operator-token", "create"],
    summary:
      "create the operator token (approvals and widening callers need it with the admin token)",
    load: async () => (await import("./operator-token.ts")).operatorTokenCreateCommand,
  },
  {
    words: ["admin-token", "rotate"],
    summary: "issue a new admin token for the cluster; the old one stops now or after --grace",
    load: async () => (await import("./admin-token.ts")).adminTokenRotateCommand,
  },
];
