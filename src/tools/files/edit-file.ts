// edit_file, two-phase: replace an exact string in a text file. The string must occur exactly
// once unless `replaceAll` is set, so an edit never lands somewhere the model did not look. The
// proposal returns the real diff; the hidden half re-reads the file, refuses if it changed since
// (by hash), and writes the result atomically. Replacement is by slicing, never
// String.prototype.replace, whose `$&`-style patterns would rewrite the model's text.
import { z } from "zod";
import { defineBuiltin, requireHalf } from "../builtin.ts";
import { describeBinary, isBinary, sniffBytes } from "../text.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ApprovalRequest, ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";
import { writeFileAtomically } from "./atomic-write.ts";
import {
  boundPreview,
  checkUnchanged,
  hashBytes,
  maxEditableBytes,
  readCurrentBytes,
} from "./file-state.ts";
import { createUnifiedDiff } from "./unified-diff.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const editFileTool = defineBuiltin(
  {
    name: "edit_file",
    category: "files",
    risk: "high-risk",
    disclosure: "private",
    egress: false,
    twoPhase: true,
    description:
      "Replace exact text in a file in the workspace. oldString must occur exactly once unless replaceAll is set. Shows the diff for approval first.",
  },
  ({ workspace }, d) => createEditFileTool(workspace, requireHalf(d)),
);

const pathField = z.string().min(1).max(4096);
const textField = z.string().max(maxEditableBytes);

const inputSchema = z.strictObject({
  path: pathField.describe("File to change, relative to the workspace."),
  oldString: textField.min(1).describe("Exact text to replace, including whitespace."),
  newString: textField.describe("Text to put in its place."),
  replaceAll: z
    .boolean()
    .optional()
    .describe("Replace every occurrence (default: oldString must occur exactly once)."),
});

const executeSchema = z.strictObject({
  path: pathField,
  resolved: z.string(),
  oldString: textField.min(1),
  newString: textField,
  replaceAll: z.boolean(),
  expectedSha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** Every start index of `needle` in `haystack`, not overlapping. */
function findOccurrences(haystack: string, needle: string): number[] {
  const found: number[] = [];
  let from = 0;
  for (;;) {
    const at = haystack.indexOf(needle, from);
    if (at === -1) return found;
    found.push(at);
    from = at + needle.length;
  }
}

type Plan = {
  readonly relative: string;
  readonly oldText: string;
  readonly newText: string;
  readonly count: number;
  readonly sha256: string;
  readonly mode: number;
};

async function planEdit(
  workspace: Workspace,
  input: { path: string; oldString: string; newString: string; replaceAll: boolean },
) {
  const confined = await workspace.resolveExisting(input.path);
  if (!confined.stats.isFile()) {
    throw new ToolCallError("invalid-input", `The path ${quotePath(input.path)} is not a file.`);
  }
  const bytes = await readCurrentBytes(workspace, confined);
  const sample = bytes.subarray(0, sniffBytes);
  if (isBinary(sample) || bytes.includes(0)) {
    throw new ToolCallError(
      "refused",
      `The file ${quotePath(input.path)} is binary (${describeBinary(sample)}); edit_file only changes text.`,
    );
  }
  if (input.oldString === input.newString) {
    throw new ToolCallError(
      "invalid-input",
      "oldString and newString are the same: nothing to change.",
    );
  }
  const oldText = Buffer.from(bytes).toString("utf8");
  const at = findOccurrences(oldText, input.oldString);
  if (at.length === 0) {
    throw new ToolCallError(
      "invalid-input",
      `oldString was not found in ${quotePath(input.path)}; it must match exactly, including whitespace and line breaks.`,
    );
  }
  if (at.length > 1 && !input.replaceAll) {
    throw new ToolCallError(
      "invalid-input",
      `oldString occurs ${at.length} times in ${quotePath(input.path)}; include more surrounding text to pick one, or set replaceAll.`,
    );
  }
  const parts: string[] = [];
  let last = 0;
  for (const start of at) {
    parts.push(oldText.slice(last, start), input.newString);
    last = start + input.oldString.length;
  }
  parts.push(oldText.slice(last));
  const plan: Plan = {
    relative: confined.relative,
    oldText,
    newText: parts.join(""),
    count: at.length,
    sha256: hashBytes(bytes),
    mode: confined.stats.mode,
  };
  return plan;
}

function diffOf(plan: Plan): string {
  return createUnifiedDiff(plan.oldText, plan.newText, {
    old: `a/${plan.relative}`,
    new: `b/${plan.relative}`,
  });
}

export function createEditFileTool(
  workspace: Workspace,
  executeHalfName: string,
): ToolImplementation {
  return {
    name: "edit_file",
    description: editFileTool.descriptor.description,
    inputSchema,
    timeoutMs: 60_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async (): Promise<ApprovalRequest> => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        const replaceAll = input.replaceAll === true;
        const plan = await planEdit(workspace, { ...input, replaceAll });
        return {
          kind: "approval-request",
          executeToolName: executeHalfName,
          executeArgs: {
            path: input.path,
            resolved: plan.relative,
            oldString: input.oldString,
            newString: input.newString,
            replaceAll,
            expectedSha256: plan.sha256,
          },
          summary: `Edit ${quotePath(plan.relative)}: replace ${plan.count} occurrence${plan.count === 1 ? "" : "s"}.`,
          previewDiff: boundPreview(diffOf(plan)),
        };
      }),
    executeHalf: {
      name: executeHalfName,
      inputSchema: executeSchema,
      timeoutMs: 60_000,
      execute: (args, invocation) =>
        runGuarded(invocation, async () => {
          checkCallWorkspace(invocation.workspace, workspace);
          const input = executeSchema.parse(args);
          const plan = await planEdit(workspace, input).catch((error: unknown) => {
            // Whatever no longer matches, the file is not the one the diff was made against.
            if (error instanceof ToolCallError && error.code === "invalid-input") {
              throw new ToolCallError(
                "refused",
                `The file ${quotePath(input.path)} changed after the edit was proposed; nothing was written. Propose the edit again.`,
              );
            }
            throw error;
          });
          if (plan.relative !== input.resolved) {
            throw new ToolCallError(
              "refused",
              `The path ${quotePath(input.path)} now leads to ${quotePath(plan.relative)}, not the file the edit was proposed for; nothing was written.`,
            );
          }
          checkUnchanged(input.path, input.expectedSha256, plan.sha256);
          const target = await workspace.resolveTarget(input.path);
          if (target.relative !== input.resolved) {
            throw new ToolCallError(
              "refused",
              `The path ${quotePath(input.path)} changed; nothing was written.`,
            );
          }
          await writeFileAtomically(workspace, target, Buffer.from(plan.newText, "utf8"), {
            mode: plan.mode,
            signal: invocation.signal,
          });
          return {
            ok: true as const,
            content: {
              path: plan.relative,
              replacements: plan.count,
              diff: boundPreview(diffOf(plan)),
            },
          };
        }),
    },
  };
}
