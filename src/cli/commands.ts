// The list of every `peergate` verb. Add a verb by adding its file and one line here.
import { auditVerifyCommand } from "./audit-verify.ts";
import { ceilingCommand } from "./ceiling.ts";
import type { Command } from "./command.ts";
import { migrateCommand } from "./migrate.ts";
import { serveCommand } from "./serve.ts";
import { toolsCommand } from "./tools.ts";

export const commands: readonly Command[] = [
  serveCommand,
  migrateCommand,
  auditVerifyCommand,
  ceilingCommand,
  toolsCommand,
];
