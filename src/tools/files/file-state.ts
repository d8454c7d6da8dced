// What the two-phase file tools share: reading a file's current bytes through a verified handle,
// naming its state by hash, and bounding the diff shown for approval. The proposal records the
// hash it was computed against; the execute half refuses if the file no longer has it, so an
// approval always applies to the file the operator saw.
import { cutUtf8, hashText } from "../text.ts";
import { quotePath, ToolCallError } from "../tool-call-error.ts";
import type { ConfinedPath, Workspace } from "../workspace.ts";

/** Largest file write_file or edit_file will replace or change. */
export const maxEditableBytes = 8 * 1024 * 1024;
/** Largest content write_file accepts. */
export const maxWriteBytes = 4 * 1024 * 1024;
export const maxPreviewBytes = 256 * 1024;

export async function readCurrentBytes(
  workspace: Workspace,
  confined: ConfinedPath,
): Promise<Uint8Array> {
  const handle = await workspace.openFile(confined);
  try {
    const { size } = await handle.stat();
    if (size > maxEditableBytes) {
      throw new ToolCallError(
        "too-large",
        `The file ${quotePath(confined.given)} is ${size} bytes, more than the ${maxEditableBytes} this tool changes.`,
      );
    }
    const bytes = await handle.readFile();
    if (bytes.length > maxEditableBytes) {
      throw new ToolCallError(
        "too-large",
        `The file ${quotePath(confined.given)} grew while it was read.`,
      );
    }
    return bytes;
  } finally {
    await handle.close();
  }
}

export function hashBytes(bytes: Uint8Array): string {
  return hashText(bytes);
}

export function boundPreview(diff: string): string {
  const { text, cut } = cutUtf8(diff, maxPreviewBytes);
  return cut ? `${text}\n… (diff cut at ${maxPreviewBytes} bytes)\n` : text;
}

/** The execute half's check that the proposal still describes the file. */
export function checkUnchanged(
  given: string,
  expected: string | null,
  actual: string | null,
): void {
  if (expected === actual) return;
  const what = expected === null ? "was created" : actual === null ? "was removed" : "changed";
  throw new ToolCallError(
    "refused",
    `The file ${quotePath(given)} ${what} after the change was proposed; nothing was written. Propose the change again.`,
  );
}
