// write_file, two-phase. The proposal resolves the path, reads what is there, and returns the
// real diff without changing anything; the hidden half re-resolves the path, checks the file is
// still what the diff was computed against, and replaces it atomically.
import { z } from "zod";
import { defineBuiltin, requireHalf } from "../builtin.ts";
import { describeBinary, isBinary, sniffBytes } from "../text.ts";
import { quotePath, runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ApprovalRequest, ToolImplementation } from "../types.ts";
import { type ConfinedTarget, checkCallWorkspace, type Workspace } from "../workspace.ts";
import { writeFileAtomically } from "./atomic-write.ts";
import {
  boundPreview,
  checkUnchanged,
  hashBytes,
  maxWriteBytes,
  readCurrentBytes,
} from "./file-state.ts";
import { createUnifiedDiff } from "./unified-diff.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const writeFileTool = defineBuiltin(
  {
    name: "write_file",
    category: "files",
    risk: "high-risk",
    disclosure: "public",
    egress: false,
    twoPhase: true,
    description:
      "Create or overwrite a text file in the workspace with the given content. Shows the diff for approval first; the directory must exist.",
  },
  ({ workspace }, d) => createWriteFileTool(workspace, requireHalf(d)),
);

const pathField = z.string().min(1).max(4096);

const inputSchema = z.strictObject({
  path: pathField.describe("File to create or overwrite, relative to the workspace."),
  content: z.string().max(maxWriteBytes).describe("The complete new content of the file."),
});

const executeSchema = z.strictObject({
  path: pathField,
  /** Where the proposal resolved to; the half refuses if the path now leads elsewhere. */
  resolved: z.string(),
  content: z.string().max(maxWriteBytes),
  /** SHA-256 of the file the proposal saw, or null when it did not exist. */
  expectedSha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .nullable(),
});

async function readState(
  workspace: Workspace,
  target: ConfinedTarget,
): Promise<{ bytes: Uint8Array | undefined; sha256: string | null }> {
  if (target.existing === undefined) return { bytes: undefined, sha256: null };
  if (target.existing.isDirectory()) {
    throw new ToolCallError("invalid-input", `The path ${quotePath(target.given)} is a directory.`);
  }
  const bytes = await readCurrentBytes(workspace, target);
  return { bytes, sha256: hashBytes(bytes) };
}

function checkContentSize(content: string): Uint8Array {
  const data = Buffer.from(content, "utf8");
  if (data.length > maxWriteBytes) {
    throw new ToolCallError(
      "too-large",
      `The content is ${data.length} bytes; write_file takes at most ${maxWriteBytes}.`,
    );
  }
  return data;
}

export function createWriteFileTool(
  workspace: Workspace,
  executeHalfName: string,
): ToolImplementation {
  return {
    name: "write_file",
    description: writeFileTool.descriptor.description,
    inputSchema,
    timeoutMs: 60_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async (): Promise<ApprovalRequest> => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        const data = checkContentSize(input.content);
        const target = await workspace.resolveTarget(input.path);
        const state = await readState(workspace, target);
        let oldText = "";
        if (state.bytes !== undefined) {
          const sample = state.bytes.subarray(0, sniffBytes);
          oldText = isBinary(sample)
            ? `(binary file: ${describeBinary(sample)}, ${state.bytes.length} bytes)\n`
            : Buffer.from(state.bytes).toString("utf8");
        }
        const diff = createUnifiedDiff(oldText, input.content, {
          old: state.bytes === undefined ? "/dev/null" : `a/${target.relative}`,
          new: `b/${target.relative}`,
        });
        const verb = state.bytes === undefined ? "Create" : "Overwrite";
        return {
          kind: "approval-request",
          executeToolName: executeHalfName,
          executeArgs: {
            path: input.path,
            resolved: target.relative,
            content: input.content,
            expectedSha256: state.sha256,
          },
          summary: `${verb} ${quotePath(target.relative)} (${data.length} bytes).`,
          previewDiff: boundPreview(diff),
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
          const data = checkContentSize(input.content);
          const target = await workspace.resolveTarget(input.path);
          if (target.relative !== input.resolved) {
            throw new ToolCallError(
              "refused",
              `The path ${quotePath(input.path)} now leads to ${quotePath(target.relative)}, not the file the change was proposed for; nothing was written.`,
            );
          }
          const state = await readState(workspace, target);
          checkUnchanged(input.path, input.expectedSha256, state.sha256);
          const mode = target.existing === undefined ? 0o644 : target.existing.mode;
          await writeFileAtomically(workspace, target, data, { mode, signal: invocation.signal });
          return {
            ok: true as const,
            content: {
              path: target.relative,
              bytes: data.length,
              created: state.sha256 === null,
            },
          };
        }),
    },
  };
}
