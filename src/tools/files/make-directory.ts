// mkdir: create a directory in the workspace (and, by default, its missing parents). Single-phase
// as its descriptor says (high-risk, no hidden half): the run engine gates it like any plain
// tool. Each level is created and opened through its parent's verified descriptor, so a parent
// swapped for a symlink mid-way cannot redirect the creation outside the workspace.
import { lstat, mkdir } from "node:fs/promises";
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { quotePath, runGuarded, ToolCallError, throwIfAborted } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import { checkCallWorkspace, type OpenDirectory, type Workspace } from "../workspace.ts";
import { giveToWorkspaceOwner } from "./file-owner.ts";

/** The built-in: its descriptor (the one description anyone reads) and its factory. */
export const makeDirectoryTool = defineBuiltin(
  {
    name: "mkdir",
    category: "files",
    risk: "high-risk",
    disclosure: "public",
    egress: false,
    description:
      "Create a directory in the workspace, with its missing parents unless parents is false. An existing directory is not an error.",
  },
  ({ workspace }) => createMakeDirectoryTool(workspace),
);

const inputSchema = z.strictObject({
  path: z.string().min(1).max(4096).describe("Directory to create, relative to the workspace."),
  parents: z.boolean().optional().describe("Create missing parent directories too (default true)."),
});

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

export function createMakeDirectoryTool(workspace: Workspace): ToolImplementation {
  return {
    name: "mkdir",
    description: makeDirectoryTool.descriptor.description,
    inputSchema,
    timeoutMs: 30_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        checkCallWorkspace(invocation.workspace, workspace);
        const input = inputSchema.parse(args);
        const parents = input.parents !== false;
        const components = workspace.resolveComponents(input.path);
        if (components.length === 0) {
          throw new ToolCallError("invalid-input", "The workspace itself already exists.");
        }
        const created: string[] = [];
        let dir: OpenDirectory = await workspace.openDirectory(workspace.rootPath);
        try {
          let relative = ".";
          for (const [index, name] of components.entries()) {
            throwIfAborted(invocation.signal);
            const isLast = index === components.length - 1;
            relative = relative === "." ? name : `${relative}/${name}`;
            const exists = await lstat(dir.at(name)).then(
              () => true,
              () => false,
            );
            let made = false;
            if (!exists) {
              if (!isLast && !parents) {
                throw new ToolCallError(
                  "not-found",
                  `The parent directory ${quotePath(relative)} does not exist (set parents to create it).`,
                );
              }
              try {
                await mkdir(dir.at(name), { mode: 0o755 });
                made = true;
                created.push(relative);
              } catch (error) {
                if (errnoOf(error) !== "EEXIST") throw error;
              }
            }
            let next: OpenDirectory;
            if (made) {
              next = await workspace.openDirectoryAt(dir, name, relative);
            } else {
              // It exists: follow it only if it resolves inside the workspace (a symlink to a
              // directory inside is fine; one pointing out is refused by resolveExisting).
              const existing = await workspace.resolveExisting(relative).catch((error: unknown) => {
                if (!(error instanceof ToolCallError) || relative === input.path) throw error;
                throw new ToolCallError(
                  error.code,
                  `Cannot create ${quotePath(input.path)}: ${error.message}`,
                );
              });
              if (!existing.stats.isDirectory()) {
                throw new ToolCallError(
                  "invalid-input",
                  `${quotePath(relative)} exists and is not a directory.`,
                );
              }
              next = await workspace.openDirectory(existing);
            }
            await dir.close();
            dir = next;
            if (made) await giveToWorkspaceOwner(workspace, dir.handle);
          }
        } finally {
          await dir.close();
        }
        return {
          ok: true as const,
          content: { path: components.join("/"), created, existed: created.length === 0 },
        };
      }),
  };
}
