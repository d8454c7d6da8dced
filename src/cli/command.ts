// The shape every `peergate` verb has. A verb is a plain object: its words, a one-line summary,
// its usage text and options, and a run function that gets parsed values and a context with the
// environment passed in (only src/main.ts reads process.env).
import type { ParseArgsOptionsConfig } from "node:util";

export type Env = Readonly<Record<string, string | undefined>>;

export type CliIo = {
  out(text: string): void;
  err(text: string): void;
};

export type CliContext = {
  env: Env;
  cwd: string;
  io: CliIo;
  /** Aborted on SIGINT/SIGTERM for long-running verbs such as `serve`. */
  signal: AbortSignal;
};

export type ParsedArgs = {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
};

export type Command = {
  /** The words that select it, e.g. ["audit", "verify"]. */
  words: readonly string[];
  summary: string;
  /** Usage lines and option descriptions, printed by `--help`. */
  help: string;
  options?: ParseArgsOptionsConfig;
  /** How many positionals it takes; omitted means none. */
  positionals?: { min: number; max: number; names: string };
  run(args: ParsedArgs, cli: CliContext): Promise<number>;
};

/**
 * A verb as src/cli/commands.ts lists it: what `peergate --help` prints, and the verb itself,
 * loaded only when it runs (or prints its own help) so that one command loads one verb's imports.
 */
export type LazyCommand = Pick<Command, "words" | "summary"> & { load(): Promise<Command> };

/** What runCli dispatches to: a verb, or an entry that loads it. */
export type CommandEntry = Command | LazyCommand;

/** Exit codes shared by every verb. */
export const exitCodes = { ok: 0, failed: 1, usage: 2 } as const;

/** Thrown by a verb for bad input; printed with the usage hint and exit code 2. */
export class UsageError extends Error {
  readonly code = "usage";
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}
