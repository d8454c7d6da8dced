// read_file: a window of lines from a UTF-8 text file in the workspace. The file is streamed in
// chunks, so a huge file costs no more memory than the window; binary files are refused with a
// one-line description instead of their bytes.
import { StringDecoder } from "node:string_decoder";
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { describeBinary, isBinary, sniffBytes } from "../text.ts";
import { quotePath, runGuarded, ToolCallError, throwIfAborted } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type Workspace } from "../workspace.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const readFileTool = defineBuiltin(
  {
    name: "read_file",
    category: "files",
    risk: "read-only",
    disclosure: "private",
    egress: false,
    description:
      "Read a UTF-8 text file in the workspace, optionally a window of lines (offset counts from 1). Binary files are refused.",
  },
  ({ workspace }) => createReadFileTool(workspace),
);

export const readFileLimits = {
  defaultLines: 2000,
  maxLines: 10_000,
  /** Total text returned. */
  maxOutputBytes: 256 * 1024,
  /** One line longer than this is cut (and the result flagged truncated). */
  maxLineChars: 8 * 1024,
  /** How far into a file an offset may reach. */
  maxScanBytes: 64 * 1024 * 1024,
  chunkBytes: 64 * 1024,
};

const inputSchema = z.strictObject({
  path: z.string().min(1).max(4096).describe("File path, relative to the workspace."),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("First line to return, counting from 1 (default 1)."),
  limit: z
    .number()
    .int()
    .min(1)
    .max(readFileLimits.maxLines)
    .optional()
    .describe(`How many lines to return at most (default ${readFileLimits.defaultLines}).`),
});

export function createReadFileTool(workspace: Workspace): ToolImplementation {
  return {
    name: "read_file",
    description: readFileTool.descriptor.description,
    inputSchema,
    timeoutMs: 30_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        const offset = input.offset ?? 1;
        const limit = input.limit ?? readFileLimits.defaultLines;
        const confined = await workspace.resolveExisting(input.path);
        if (confined.stats.isDirectory()) {
          throw new ToolCallError(
            "invalid-input",
            `The path ${quotePath(input.path)} is a directory; use ls to list it.`,
          );
        }
        const handle = await workspace.openFile(confined);
        try {
          const size = (await handle.stat()).size;
          const buffer = Buffer.allocUnsafe(readFileLimits.chunkBytes);
          const decoder = new StringDecoder("utf8");
          const lines: string[] = [];
          let outputBytes = 0;
          let lineNumber = 1;
          let current = "";
          let cut = false;
          let truncated = false;
          let done = false;
          let more = false;
          let scanned = 0;
          let first = true;

          const finishLine = () => {
            if (lineNumber >= offset) {
              if (lines.length >= limit) {
                more = true;
                done = true;
                return;
              }
              const bytes = Buffer.byteLength(current) + 1;
              if (outputBytes + bytes > readFileLimits.maxOutputBytes) {
                truncated = true;
                more = true;
                done = true;
                return;
              }
              lines.push(current);
              outputBytes += bytes;
            }
            current = "";
            lineNumber++;
          };

          const appendToLine = (piece: string) => {
            if (lineNumber < offset) return;
            const room = readFileLimits.maxLineChars - current.length;
            if (piece.length > room) {
              current += piece.slice(0, Math.max(0, room));
              cut = true;
            } else current += piece;
          };

          while (!done) {
            throwIfAborted(invocation.signal);
            const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
            if (bytesRead === 0) break;
            const chunk = buffer.subarray(0, bytesRead);
            if (first) {
              first = false;
              const sample = chunk.subarray(0, sniffBytes);
              if (isBinary(sample)) {
                throw new ToolCallError(
                  "refused",
                  `The file ${quotePath(input.path)} is binary (${describeBinary(sample)}, ${size} bytes); read_file only returns text.`,
                );
              }
            } else if (chunk.includes(0)) {
              throw new ToolCallError(
                "refused",
                `The file ${quotePath(input.path)} holds binary data past its first ${scanned} bytes; read_file only returns text.`,
              );
            }
            scanned += bytesRead;
            const pieces = decoder.write(chunk).split("\n");
            for (let i = 0; i < pieces.length && !done; i++) {
              appendToLine(pieces[i] ?? "");
              if (i < pieces.length - 1) finishLine();
            }
            if (!done && scanned >= readFileLimits.maxScanBytes) {
              if (lineNumber <= offset && lines.length === 0) {
                throw new ToolCallError(
                  "too-large",
                  `Line ${offset} of ${quotePath(input.path)} lies beyond the first ${readFileLimits.maxScanBytes} bytes, further than read_file reads.`,
                );
              }
              truncated = true;
              more = true;
              break;
            }
          }
          if (!done && !more) {
            current += decoder.end();
            if (current.length > 0) finishLine();
          }
          if (lines.length === 0 && offset > 1 && !more) {
            throw new ToolCallError(
              "invalid-input",
              `The file ${quotePath(input.path)} has fewer than ${offset} lines.`,
            );
          }
          return {
            ok: true as const,
            content: {
              path: confined.relative,
              fromLine: offset,
              toLine: offset + lines.length - 1,
              text: lines.join("\n"),
              // True when the file goes on after toLine: ask again with a later offset.
              more,
              bytes: size,
            },
            truncated: truncated || cut,
          };
        } finally {
          await handle.close();
        }
      }),
  };
}
