// Every built-in tool, in the order tables list them. Each file exports its own descriptor and
// factory; this list is the only registration. The loader passes `builtinDescriptors` to the
// policy parsers (src/policy/ receives descriptors and imports nothing from here), and the
// runtime builds implementations from the same entries.
import type { ToolDescriptor } from "../policy/tools.ts";
import type { BuiltinTool } from "./builtin.ts";
import { askCallerTool } from "./context/ask-caller.ts";
import { askUserQuestionTool } from "./context/ask-user-question.ts";
import { getTimeTool } from "./context/get-time.ts";
import { manageMemoryTool } from "./context/manage-memory.ts";
import { editFileTool } from "./files/edit-file.ts";
import { findFilesTool } from "./files/find-files.ts";
import { grepTool } from "./files/grep.ts";
import { listDirectoryTool } from "./files/list-directory.ts";
import { makeDirectoryTool } from "./files/make-directory.ts";
import { readFileTool } from "./files/read-file.ts";
import { statTool } from "./files/stat-path.ts";
import { writeFileTool } from "./files/write-file.ts";
import { webFetchTool } from "./net/web-fetch.ts";
import { executeCommandTool } from "./process/execute-command.ts";

export const builtinTools: readonly BuiltinTool[] = Object.freeze([
  readFileTool,
  listDirectoryTool,
  findFilesTool,
  grepTool,
  statTool,
  getTimeTool,
  webFetchTool,
  writeFileTool,
  editFileTool,
  makeDirectoryTool,
  executeCommandTool,
  askUserQuestionTool,
  manageMemoryTool,
]);

/** The 13 built-in descriptors, frozen, for the inventory and the policy parsers. */
export const builtinDescriptors: readonly ToolDescriptor[] = Object.freeze(
  builtinTools.map((tool) => tool.descriptor),
);

/**
 * Built-ins that enter the inventory only when the agent's policy names them in `tools` (a
 * category alone does not bring them): ask_caller changes how a run can end, so an operator opts
 * in to it by name. Listed after the 13 in the inventory when named.
 */
export const optionalBuiltinTools: readonly BuiltinTool[] = Object.freeze([askCallerTool]);

/** The optional built-ins' descriptors the agent's `tools` names, for the inventory. */
export function namedOptionalDescriptors(agentTools: readonly string[]): ToolDescriptor[] {
  return optionalBuiltinTools
    .map((tool) => tool.descriptor)
    .filter((descriptor) => agentTools.includes(descriptor.name));
}
