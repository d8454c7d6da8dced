// The list of every `peergate` verb. Add a verb by adding its file and one line here.
import { adminTokenRotateCommand } from "./admin-token.ts";
import { auditCheckpointsCommand } from "./audit-checkpoints.ts";
import { auditListCommand } from "./audit-list.ts";
import { auditVerifyCommand } from "./audit-verify.ts";
import { callersAddCommand } from "./callers-add.ts";
import { callersApplyCommand } from "./callers-apply.ts";
import { callersExportCommand } from "./callers-export.ts";
import { callersListCommand } from "./callers-list.ts";
import { callersRestoreCommand } from "./callers-restore.ts";
import { callersRevokeCommand } from "./callers-revoke.ts";
import { callersRotateCommand } from "./callers-rotate.ts";
import { callersSetCommand } from "./callers-set.ts";
import { callersShowCommand } from "./callers-show.ts";
import { ceilingCommand } from "./ceiling.ts";
import type { Command } from "./command.ts";
import { doctorCommand } from "./doctor.ts";
import { migrateCommand } from "./migrate.ts";
import { operatorTokenCreateCommand } from "./operator-token.ts";
import { pruneCommand } from "./prune.ts";
import {
  runsApproveCommand,
  runsCancelCommand,
  runsListCommand,
  runsRejectCommand,
  runsRetryCommand,
  runsShowCommand,
} from "./runs.ts";
import { serveCommand } from "./serve.ts";
import { toolsCommand } from "./tools.ts";

export const commands: readonly Command[] = [
  serveCommand,
  migrateCommand,
  doctorCommand,
  auditListCommand,
  auditVerifyCommand,
  auditCheckpointsCommand,
  pruneCommand,
  callersAddCommand,
  callersListCommand,
  callersShowCommand,
  callersSetCommand,
  callersRevokeCommand,
  callersRestoreCommand,
  callersRotateCommand,
  callersApplyCommand,
  callersExportCommand,
  runsListCommand,
  runsShowCommand,
  runsApproveCommand,
  runsRejectCommand,
  runsCancelCommand,
  runsRetryCommand,
  ceilingCommand,
  toolsCommand,
  operatorTokenCreateCommand,
  adminTokenRotateCommand,
];
