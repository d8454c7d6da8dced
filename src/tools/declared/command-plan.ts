// How one call of a declared command tool becomes stages, mode by mode: `fixed` runs its program
// with the declared arguments and the model's appended; `structured` runs the declared program the
// model names; `script` runs the hashed script (through its interpreter when one is declared);
// `chain` reads the command with the bash parser and resolves every stage on its own (a declared
// program, or, when the tool lists none, a name on PATH, hashed at first use). Nothing here runs a
// program; `verify` and `verifyScript` re-check pins and the script just before a start. What
// runs is never the operator's file: a pinned program or script runs from the copy made at load
// (verified-files.ts), named in `files` by its argv position. A file found changed is recorded in
// the runtime's change log and stays refused, even once restored, until a reload builds anew.
import { realpath } from "node:fs/promises";
import path from "node:path";
import { quoteUntrusted } from "../../policy/quote.ts";
import { type ChainItem, parseChain } from "./chain.ts";
import type { CallInput } from "./command-input.ts";
import {
  type CreateCommandToolsOptions,
  DeclaredToolError,
  hashExecutable,
  type Prepared,
  type ResolvedProgram,
  readScript,
  resolveExecutable,
} from "./command-prepare.ts";

export type PlannedStage = {
  name: string;
  argv: [string, ...string[]];
  resolved: ResolvedProgram;
  /** What the model sees of the argv (declared secrets masked). */
  shown: string[];
  /** argv positions naming a verified file (a pinned program, the script) and its staged copy. */
  files: readonly VerifiedArg[];
};

export type VerifiedArg = {
  readonly index: number;
  readonly path: string;
  readonly staged: string;
};

/** Files found changed since load, by the operator's path, with what was seen: refused until reload. */
export type ChangeLog = Map<string, string>;

/** A refusal because a verified file changed: audited as a refused stage. */
export class ChangedFileError extends DeclaredToolError {}

/** One item of a chain (a pipeline), or the single item of the other modes. */
export type PlannedItem = { op: ChainItem["op"]; stages: PlannedStage[] };

export type CommandPlanner = {
  /** The stages of the call, resolved and checked, in chain order (one item for other modes). */
  plan(input: CallInput): Promise<PlannedItem[]>;
  /** Refuses a stage whose pinned program changed since start. */
  verify(stage: PlannedStage): Promise<void>;
  /** Refuses a script that changed since it was loaded. */
  verifyScript(): Promise<void>;
};

export function createCommandPlanner(
  prepared: Prepared,
  options: CreateCommandToolsOptions,
  optionsAllowed: boolean,
  changes: ChangeLog,
): CommandPlanner {
  const { tool, programs } = prepared;
  const onPath = new Map<string, ResolvedProgram>();

  const resolveStageProgram = async (name: string): Promise<ResolvedProgram> => {
    const declared = programs.get(name);
    if (declared !== undefined) return declared;
    if (tool.mode !== "chain" || tool.programs !== undefined) {
      throw new DeclaredToolError(
        "not-declared",
        `${quoteUntrusted(name)} is not one of this tool's programs${tool.mode === "chain" && tool.programs ? ` (${tool.programs.join(", ")})` : ""}. Nothing was run.`,
      );
    }
    const found = await resolveExecutable(name, options.pathVariable);
    if ("problem" in found) {
      throw new DeclaredToolError(
        "not-found",
        `${quoteUntrusted(name)} was not found on PATH. Nothing was run.`,
      );
    }
    const cached = onPath.get(found.path);
    const sha256 = cached?.sha256 ?? (await hashExecutable(found.path));
    const resolved = { path: found.path, sha256, pinned: undefined };
    onPath.set(found.path, resolved);
    return resolved;
  };

  const untilReload =
    "it stays refused, even if the file is restored, until peergate's policies are reloaded (SIGHUP) or it restarts";

  const verify = async (stage: PlannedStage) => {
    const { pinned, path: file } = stage.resolved;
    if (pinned === undefined) return;
    const seen = changes.get(file) ?? (await hashExecutable(file).catch(() => "gone"));
    if (seen !== pinned) {
      changes.set(file, seen);
      throw new ChangedFileError(
        "refused",
        `The program ${quoteUntrusted(stage.name)} of ${tool.name} changed since peergate loaded it (its SHA-256 no longer matches the pin); nothing was run, and ${untilReload}.`,
      );
    }
  };

  const verifiedProgram = (index: number, resolved: ResolvedProgram): VerifiedArg[] =>
    resolved.staged === undefined ? [] : [{ index, path: resolved.path, staged: resolved.staged }];

  const declaredArgv = async (): Promise<{ argv: string[]; shown: string[] }> => {
    const argv: string[] = [];
    const shown: string[] = [];
    for (const arg of prepared.args) {
      if (arg.kind === "literal") {
        argv.push(arg.value);
        shown.push(arg.value);
      } else if (arg.kind === "secret") {
        argv.push(arg.value);
        shown.push("[secret]");
      } else {
        const real = await realpath(arg.absolute).catch(() => {
          throw new DeclaredToolError(
            "not-found",
            `The declared path ${quoteUntrusted(arg.given)} does not exist. Nothing was run.`,
          );
        });
        const rel = path.relative(options.workspace.root, real);
        if (rel.startsWith("..") || path.isAbsolute(rel)) {
          throw new DeclaredToolError(
            "refused",
            `The declared path ${quoteUntrusted(arg.given)} leads outside the workspace. Nothing was run.`,
          );
        }
        argv.push(real);
        shown.push(rel === "" ? "." : rel);
      }
    }
    return { argv, shown };
  };

  const plan = async (input: CallInput): Promise<PlannedItem[]> => {
    const modelArgs = input.arguments ?? [];
    if (!optionsAllowed) {
      const option = modelArgs.find((a) => a.startsWith("-"));
      if (option !== undefined) {
        throw new DeclaredToolError(
          "refused",
          `The argument ${quoteUntrusted(option)} starts with "-": ${tool.name} does not take options from the model. Nothing was run.`,
        );
      }
    }
    if (tool.mode === "chain") {
      const items = parseChain(input.command ?? "");
      const out: PlannedItem[] = [];
      for (const item of items) {
        const stages: PlannedStage[] = [];
        for (const [name, ...rest] of item.stages) {
          const resolved = await resolveStageProgram(name);
          stages.push({
            name,
            argv: [resolved.path, ...rest],
            resolved,
            shown: rest,
            files: verifiedProgram(0, resolved),
          });
        }
        out.push({ op: item.op, stages });
      }
      return out;
    }
    const fixed = await declaredArgv();
    if (tool.mode === "script") {
      const script = prepared.script as NonNullable<Prepared["script"]>;
      const interpreter =
        tool.interpreter === undefined ? undefined : programs.get(tool.interpreter);
      const resolved = interpreter ?? {
        path: script.path,
        sha256: script.sha256,
        pinned: undefined,
      };
      const argv: [string, ...string[]] =
        interpreter === undefined
          ? [script.path, ...fixed.argv, ...modelArgs]
          : [interpreter.path, script.path, ...fixed.argv, ...modelArgs];
      const scriptArg = { path: script.path, staged: script.staged };
      const files =
        interpreter === undefined
          ? [{ index: 0, ...scriptArg }]
          : [...verifiedProgram(0, interpreter), { index: 1, ...scriptArg }];
      return [
        {
          op: undefined,
          stages: [
            { name: tool.script, argv, resolved, shown: [...fixed.shown, ...modelArgs], files },
          ],
        },
      ];
    }
    const name = tool.mode === "fixed" ? tool.program : (input.program ?? "");
    const resolved = await resolveStageProgram(name);
    return [
      {
        op: undefined,
        stages: [
          {
            name,
            argv: [resolved.path, ...fixed.argv, ...modelArgs],
            resolved,
            shown: [...fixed.shown, ...modelArgs],
            files: verifiedProgram(0, resolved),
          },
        ],
      },
    ];
  };

  const verifyScript = async () => {
    const script = prepared.script;
    if (script === undefined) return;
    let read = changes.get(script.path);
    if (read === undefined) {
      const now = await readScript(script.path, script.maxBytes);
      read = typeof now === "string" ? "gone" : now.sha256;
    }
    if (read !== script.sha256) {
      changes.set(script.path, read);
      throw new ChangedFileError(
        "script-changed",
        `The script of ${tool.name} changed since peergate loaded it (its SHA-256 differs, or it is gone or too large); nothing was run, and ${untilReload}. Review it first.`,
      );
    }
  };

  return { plan, verify, verifyScript };
}
