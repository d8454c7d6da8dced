// Dispatches argv to a verb, prints help for any prefix of verb words, and turns errors into
// exit codes: 2 for usage errors, 1 for everything else. No verb prints a stack trace unless
// PEERGATE_DEBUG is set. Everything a verb prints passes through escapeOutput on its way out
// (newlines kept, JSON lines still JSON), so no verb can print a raw control sequence, whoever chose the text; printers
// escape single-line fields themselves too, so those cannot start lines of their own.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { ConfigError } from "../errors.ts";
import {
  type CliContext,
  type Command,
  type CommandEntry,
  exitCodes,
  UsageError,
} from "./command.ts";
import { nearest } from "./nearest.ts";
import { escapeOutput } from "./terminal-text.ts";

function describeGroup(commands: readonly CommandEntry[], prefix: readonly string[]): string {
  const matching = commands.filter((c) => prefix.every((w, i) => c.words[i] === w));
  const width = Math.max(...matching.map((c) => c.words.join(" ").length));
  const lines = matching.map((c) => `  peergate ${c.words.join(" ").padEnd(width)}  ${c.summary}`);
  const title = prefix.length === 0 ? "peergate — an A2A peer server with caller ceilings" : "";
  return [
    title,
    `Usage: peergate ${prefix.length ? `${prefix.join(" ")} ` : ""}<command> [options]`,
    "",
    "Commands:",
    ...lines,
    "",
    "Every command takes --help; `peergate --version` prints the version.",
  ]
    .filter((l, i) => i > 0 || l !== "")
    .join("\n");
}

function findCommand(
  commands: readonly CommandEntry[],
  argv: readonly string[],
): { entry: CommandEntry; rest: string[] } | undefined {
  let best: CommandEntry | undefined;
  for (const c of commands) {
    if (c.words.every((w, i) => argv[i] === w) && (!best || c.words.length > best.words.length)) {
      best = c;
    }
  }
  return best ? { entry: best, rest: argv.slice(best.words.length) } : undefined;
}

function formatHelp(command: Command): string {
  return `Usage: peergate ${command.words.join(" ")} ${command.help}`.trimEnd();
}

export async function runCli(
  commands: readonly CommandEntry[],
  argv: readonly string[],
  outer: CliContext,
): Promise<number> {
  const safe = escapeOutput;
  const cli: CliContext = {
    ...outer,
    io: { out: (text) => outer.io.out(safe(text)), err: (text) => outer.io.err(safe(text)) },
  };
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
    cli.io.out(`peergate ${await packageVersion()}`);
    return exitCodes.ok;
  }
  const found = findCommand(commands, argv);
  if (!found) {
    const prefix = argv.filter((a) => !a.startsWith("-"));
    // Longest prefix of words that is the start of some command: show that group's help.
    let known: string[] = [];
    for (let n = prefix.length; n >= 0; n--) {
      const candidate = prefix.slice(0, n);
      if (commands.some((c) => candidate.every((w, i) => c.words[i] === w))) {
        known = candidate;
        break;
      }
    }
    const wantsHelp = argv.length === 0 || argv.includes("--help") || argv.includes("-h");
    const unknown = prefix[known.length];
    if (wantsHelp && unknown === undefined) {
      cli.io.out(describeGroup(commands, known));
      return exitCodes.ok;
    }
    cli.io.err(
      unknown === undefined
        ? describeGroup(commands, known)
        : `peergate: unknown command "${[...known, unknown].join(" ")}"\n\n${describeGroup(commands, known)}`,
    );
    return exitCodes.usage;
  }

  const { entry, rest } = found;
  // Only the verb that runs is loaded, with what it imports.
  const command = "load" in entry ? await entry.load() : entry;
  if (rest.includes("--help") || rest.includes("-h")) {
    cli.io.out(formatHelp(command));
    return exitCodes.ok;
  }
  try {
    const parsed = parseArgs({
      args: [...rest],
      options: command.options ?? {},
      allowPositionals: true,
      strict: true,
    });
    const limits = command.positionals ?? { min: 0, max: 0, names: "" };
    if (parsed.positionals.length < limits.min || parsed.positionals.length > limits.max) {
      throw new UsageError(
        limits.max === 0
          ? `"peergate ${command.words.join(" ")}" takes no arguments, got "${parsed.positionals.join(" ")}"`
          : `"peergate ${command.words.join(" ")}" expects ${limits.names}`,
      );
    }
    return await command.run(
      { values: parsed.values as ParsedValues, positionals: parsed.positionals },
      cli,
    );
  } catch (error) {
    if (error instanceof UsageError || isParseArgsError(error)) {
      // The problem, the usage line and where the rest is: a page of help after every typo
      // buries the one line that matters.
      const words = command.words.join(" ");
      const message =
        error instanceof UsageError ? error.message : describeParseError(error as Error, command);
      cli.io.err(
        `peergate ${words}: ${message}\n${usageLine(command)}\nRun \`peergate ${words} --help\` for every option.`,
      );
      return exitCodes.usage;
    }
    if (error instanceof ConfigError) {
      cli.io.err(error.message);
      return exitCodes.failed;
    }
    const message = error instanceof Error ? error.message : String(error);
    cli.io.err(`peergate ${command.words.join(" ")}: ${message}`);
    if (cli.env.PEERGATE_DEBUG && error instanceof Error && error.stack) cli.io.err(error.stack);
    return exitCodes.failed;
  }
}

/** The first line of a verb's help: how it is called. */
function usageLine(command: Command): string {
  return `Usage: peergate ${command.words.join(" ")} ${command.help.split("\n")[0] ?? ""}`.trimEnd();
}

/**
 * node:util's parseArgs errors in the CLI's own words: the option, what is wrong with it, and the
 * nearest option the verb has when one is close (a typo).
 */
function describeParseError(error: Error, command: Command): string {
  const code = (error as { code?: string }).code;
  const option = /'(-[^' <]+)/.exec(error.message)?.[1] ?? "";
  const options = Object.keys(command.options ?? {}).map((name) => `--${name}`);
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const near = nearest(option, options);
    const known = options.length ? `its options are ${options.join(", ")}` : "it takes no options";
    return `unknown option ${option}${near ? ` (did you mean ${near}?)` : ""}; ${known}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    return /does not take an argument/.test(error.message)
      ? `option ${option} takes no value (write ${option} alone)`
      : `option ${option} needs a value (e.g. ${option} VALUE)`;
  }
  return error.message;
}

type ParsedValues = Record<string, string | boolean | string[] | boolean[] | undefined>;

function isParseArgsError(error: unknown): boolean {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
}

/** The version in package.json, the one place it is kept. */
async function packageVersion(): Promise<string> {
  const text = await readFile(new URL("../../package.json", import.meta.url), "utf8");
  return String((JSON.parse(text) as { version?: unknown }).version ?? "unknown");
}
