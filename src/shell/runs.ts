// What one command runs besides itself: the one place that knows where a program takes code from
// its arguments. A shell's `-c` script (every option form, values included), the command a wrapper
// runs (`env`, `nice`, `timeout`, `xargs`, `sudo`, `find -exec` …), the shell text a program runs
// through a shell (`watch`, `flock -c`, `script -c`, `su -c`, `ssh host cmd`, `git -c
// core.pager=…`, `eval`, `trap`), and code the reader cannot read: an interpreter's inline code, a
// shell language that is not bash, a value bash only knows when it runs. The floor, the denylist
// and the chain check all walk this (walk.ts); each program's decision is documented in
// docs/shell.md. Pure.

import { readCommandOptions, readGit, readSsh } from "./command-options.ts";
import { readInterpreter } from "./interpreters.ts";
import { bashShells, isShellOrInterpreter, otherShells, programName } from "./programs.ts";
import { command, literal, opaque, type Run, script, type Word } from "./run-parts.ts";

export { literal, type Run, type Word } from "./run-parts.ts";

/**
 * Environment variables whose value is code, or makes a program load code: set through `env`, a
 * leading `NAME=value`, or `export`. Shell text is read; anything else cannot be.
 */
const codeInValue =
  /^(PS[0124]|PROMPT_COMMAND|PAGER|MANPAGER|GIT_PAGER|EDITOR|VISUAL|GIT_EDITOR|GIT_SEQUENCE_EDITOR|GIT_SSH_COMMAND|LESSOPEN|LESSCLOSE|BROWSER)$/;
const codeLoader =
  /^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|BASH_FUNC_.*|LD_[A-Z_]+|DYLD_[A-Z_]+|PATH|PYTHON(STARTUP|PATH|HOME|INSPECT)|NODE_OPTIONS|NODE_PATH|PERL5?(OPT|LIB|DB)|PERLLIB|RUBY(OPT|LIB)|GIT_(SSH|EXTERNAL_DIFF|ASKPASS|EXEC_PATH|CONFIG.*|PROXY_COMMAND|TEMPLATE_DIR)|SSH_ASKPASS|SUDO_ASKPASS|GCONV_PATH|MAKEFLAGS|MFLAGS)$/;

/** What an assignment `NAME=value` (env, a prefix, `export`) runs; nothing for most names. */
export function readAssignment(assignment: Word, via: string): Run[] {
  const eq = assignment.text.indexOf("=");
  if (eq <= 0) return [];
  const name = assignment.text.slice(0, eq).replace(/\[.*$/, "");
  const value = assignment.text.slice(eq + 1);
  if (codeInValue.test(name)) {
    const text = name.startsWith("LESS") ? value.replace(/^\|+/, "") : value;
    return [script([{ text, expansions: assignment.expansions }], `${via} ${name}=`)];
  }
  if (codeLoader.test(name)) {
    return [opaque(`${via} ${name}=`, `${name} makes programs load code from elsewhere`, true)];
  }
  return [];
}

/** Options of each wrapper that take a value (the next word, or `--opt=value`). */
type WrapperSpec = {
  readonly values: ReadonlySet<string>;
  /** Positional words before the command (`timeout 5 cmd`, `chroot /root cmd`). */
  readonly positional?: number;
  /** What an argv with no command runs (`chroot /x` starts a shell reading the terminal). */
  readonly bare?: string;
};

const spec = (values: string[], positional = 0, bare?: string): WrapperSpec => ({
  values: new Set(values),
  positional,
  ...(bare === undefined ? {} : { bare }),
});

const startsShell = "starts a shell that reads commands from its input";

export const wrappers: Readonly<Record<string, WrapperSpec>> = {
  env: spec(["-u", "--unset", "-C", "--chdir", "-P", "-a", "--argv0"]),
  nice: spec(["-n", "--adjustment"]),
  nohup: spec([]),
  setsid: spec([]),
  stdbuf: spec(["-i", "-o", "-e", "--input", "--output", "--error"]),
  ionice: spec(["-c", "-n", "--class", "--classdata"]),
  chrt: spec(["-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline"], 1),
  taskset: spec([], 1),
  timeout: spec(["-s", "--signal", "-k", "--kill-after"], 1),
  time: spec(["-f", "--format", "-o", "--output"]),
  command: spec([]),
  builtin: spec([]),
  exec: spec(["-a"]),
  unbuffer: spec([]),
  caffeinate: spec(["-t", "-w"]),
  chroot: spec(["--userspec", "--groups"], 1, startsShell),
  unshare: spec(["-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd"], 0, startsShell),
  nsenter: spec(["-t", "--target", "-S", "--setuid", "-G", "--setgid"], 0, startsShell),
  firejail: spec([]),
  doas: spec(["-u", "-C"], 0, startsShell),
  runuser: spec(["-u", "-g", "-G", "--user", "--group"], 0, startsShell),
  run0: spec(["-u", "--user", "-g", "--group", "-D", "--chdir"], 0, startsShell),
  pkexec: spec(["--user"], 0, startsShell),
  sudo: spec(
    ["-u", "--user", "-g", "--group", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--chdir"],
    0,
    startsShell,
  ),
  xargs: spec(["-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "-P", "-s"]),
  watch: spec(["-n", "--interval", "-q", "--equexit"]),
  flock: spec(["-w", "--timeout", "-E", "--conflict-exit-code"], 1), // read by readWrapper
  busybox: spec([]),
  toybox: spec([]),
};

/** Splits a wrapper's argv into its options and the command it runs (after positionals). */
function splitWrapper(
  name: string,
  args: readonly Word[],
): { options: Word[]; rest: readonly Word[] } {
  const w = wrappers[name] as WrapperSpec;
  const options: Word[] = [];
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as Word;
    const text = arg.text;
    if (text === "--") {
      i++;
      break;
    }
    if (name === "env" && /^[A-Za-z_][A-Za-z0-9_]*=/.test(text)) {
      options.push(arg);
      i++;
      continue;
    }
    if (!text.startsWith("-") || text === "-" || arg.expansions.length > 0) break;
    options.push(arg);
    if (w.values.has(text)) {
      const value = args[i + 1];
      if (value !== undefined) options.push(value);
      i += 2;
    } else i++;
  }
  return { options, rest: args.slice(Math.min(i + (w.positional ?? 0), args.length)) };
}

function hasFlag(options: readonly Word[], short: string, long?: string): boolean {
  return options.some(
    (o) =>
      (o.text.startsWith("-") && !o.text.startsWith("--") && o.text.slice(1).includes(short)) ||
      (long !== undefined && (o.text === long || o.text.startsWith(`${long}=`))),
  );
}

function readWrapper(name: string, argv: readonly Word[]): Run[] {
  const args = argv.slice(1);
  const via = name;
  if (name === "busybox" || name === "toybox") return command(args, via);
  if (name === "env") {
    const runs: Run[] = [];
    for (let i = 0; i < args.length; i++) {
      const t = (args[i] as Word).text;
      if (t === "-S" || t === "--split-string") {
        return [script(args.slice(i + 1, i + 2), "env -S")];
      }
      if (t.startsWith("--split-string=") || /^-S./.test(t)) {
        const text = t.startsWith("-S") ? t.slice(2) : t.slice(15);
        return [script([{ text, expansions: (args[i] as Word).expansions }], "env -S")];
      }
    }
    const { options, rest } = splitWrapper(name, args);
    for (const option of options) runs.push(...readAssignment(option, "env"));
    return [...runs, ...command(rest, via)];
  }
  if (name === "flock") {
    // `flock [options] file -c cmd`, `flock -c cmd file`, `flock [options] file cmd …`, `flock 9`.
    const values = wrappers.flock?.values ?? new Set();
    let i = 0;
    for (; i < args.length; i++) {
      const t = (args[i] as Word).text;
      if (t === "-c" || t === "--command") return [script(args.slice(i + 1, i + 2), "flock -c")];
      if (t === "--") {
        i++;
        break;
      }
      if (!t.startsWith("-")) break;
      if (values.has(t)) i++;
    }
    const after = args.slice(i + 1);
    if (after[0]?.text === "-c" || after[0]?.text === "--command") {
      return [script(after.slice(1, 2), "flock -c")];
    }
    return command(after, via);
  }
  const { options, rest } = splitWrapper(name, args);
  if (name === "watch") {
    if (hasFlag(options, "x", "--exec")) return command(rest, "watch -x");
    return rest.length === 0 ? [] : [script(rest, "watch")];
  }
  if ((name === "sudo" || name === "doas") && (hasFlag(options, "s") || hasFlag(options, "i"))) {
    return rest.length === 0
      ? [opaque(`${name} -s`, startsShell, false)]
      : [script(rest, `${name} -s`)];
  }
  if (name === "sudo" && (hasFlag(options, "e", "--edit") || hasFlag(options, "l", "--list"))) {
    return [];
  }
  if (name === "command" && (hasFlag(options, "v") || hasFlag(options, "V"))) return [];
  if (name === "xargs") {
    const replace = options.find((o, i) => o.text === "-I" && options[i + 1] !== undefined);
    const token =
      replace === undefined
        ? options.find((o) => /^-(i|I|-replace)/.test(o.text) && o.text.length > 2)
        : undefined;
    const marker =
      replace !== undefined
        ? options[options.indexOf(replace) + 1]?.text
        : token !== undefined
          ? token.text.replace(/^(-i|-I|--replace=?)/, "") || "{}"
          : options.some((o) => o.text === "-i" || o.text === "--replace")
            ? "{}"
            : undefined;
    if (marker !== undefined && rest[0]?.text.includes(marker)) {
      return [opaque("xargs", "the command's name comes from its input", false)];
    }
    return rest.length === 0 ? [] : command(rest, via);
  }
  if (name === "ionice" && hasFlag(options, "p")) return [];
  if ((name === "chrt" || name === "taskset") && hasFlag(options, "p")) return [];
  const w = wrappers[name] as WrapperSpec;
  if (rest.length === 0 && w.bare !== undefined) return [opaque(via, w.bare, false)];
  return command(rest, via);
}

/** A bash-language shell: `-c` takes the first operand after every option as its script. */
function readBashShell(name: string, args: readonly Word[]): Run[] {
  let c: string | undefined;
  let stdin = false;
  let i = 0;
  for (; i < args.length; i++) {
    const text = (args[i] as Word).text;
    if (text === "--" || text === "-") {
      i++;
      break;
    }
    if (text === "--rcfile" || text === "--init-file") {
      i++;
      continue;
    }
    if (text.startsWith("--")) continue;
    if (/^[-+][A-Za-z]+$/.test(text)) {
      const letters = text.slice(1);
      if (text.startsWith("-") && letters.includes("c")) c = text;
      if (letters.includes("s")) stdin = true;
      // Each `o` or `O` in a group takes the next word as its value, in order.
      for (const letter of letters) if (letter === "o" || letter === "O") i++;
      continue;
    }
    break;
  }
  const operand = args.slice(i, i + 1);
  if (c !== undefined) {
    return operand.length === 0
      ? [opaque(`${name} ${c}`, "takes its script from an argument that is not there yet", false)]
      : [script(operand, `${name} ${c}`)];
  }
  if (args.some((a) => /^--(version|help)$/.test(a.text))) return [];
  if (operand.length === 0 || stdin) {
    return [
      opaque(name, "reads its script from standard input, which is not in the command", false),
    ];
  }
  return []; // a script file: its text is not in the command
}

/** A shell whose language is not bash (zsh, fish, csh …): its code cannot be read completely. */
function readOtherShell(name: string, args: readonly Word[]): Run[] {
  const code = args.some((a) => /^-[A-Za-z]*[cC]|^--(command|init-command)/.test(a.text));
  const operand = args.find((a) => !a.text.startsWith("-") && !a.text.startsWith("+"));
  if (code) {
    return [
      opaque(`${name} -c`, `${name}'s language is not bash, so the floor cannot read it`, true),
    ];
  }
  if (operand === undefined) {
    return [
      opaque(name, "reads its script from standard input, which is not in the command", false),
    ];
  }
  return [];
}

/** find's `-exec`, `-execdir`, `-ok`, `-okdir`: each command up to `;` or `+`. */
function readFind(args: readonly Word[]): Run[] {
  const runs: Run[] = [];
  for (let i = 0; i < args.length; i++) {
    const text = (args[i] as Word).text;
    if (!/^-(exec|execdir|ok|okdir)$/.test(text)) continue;
    let end = i + 1;
    while (end < args.length && !/^[;+]$/.test((args[end] as Word).text)) end++;
    const inner = args.slice(i + 1, end);
    if (inner[0]?.text.includes("{}")) {
      runs.push(opaque(`find ${text}`, "the command's name is a found file", false));
    } else runs.push(...command(inner, `find ${text}`));
    i = end;
  }
  return runs;
}

/** su and runuser: `-c CMD` runs CMD through the user's shell; without it, a login shell. */
function readSu(name: string, args: readonly Word[]): Run[] {
  for (let i = 0; i < args.length; i++) {
    const text = (args[i] as Word).text;
    if (/^(-c|--command|--session-command)$/.test(text)) {
      return [script(args.slice(i + 1, i + 2), `${name} -c`)];
    }
    const joined = /^--(command|session-command)=(.*)$/s.exec(text);
    if (joined !== null) {
      return [
        script(
          [{ text: joined[2] as string, expansions: (args[i] as Word).expansions }],
          `${name} -c`,
        ),
      ];
    }
  }
  if (name === "runuser" && args.some((a) => a.text === "-u" || a.text === "--user")) {
    return readWrapper(name, [literal(name), ...args]);
  }
  return [opaque(name, startsShell, false)];
}

/** `script -c CMD` (also `-qc CMD`, `-cCMD`, `--command=CMD`); without it, an interactive shell. */
function readScriptProgram(args: readonly Word[]): Run[] {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as Word;
    if (arg.text === "--command" || /^-[A-Za-z]*c$/.test(arg.text)) {
      return [script(args.slice(i + 1, i + 2), "script -c")];
    }
    const joined = /^(?:--command=|-[a-bd-zA-Z]*c)(.+)$/s.exec(arg.text);
    if (joined !== null) {
      return [script([{ ...arg, text: joined[1] as string }], "script -c")];
    }
  }
  return [opaque("script", startsShell, false)];
}

/** Builtins that run text as code: `eval`, `trap`, `alias`; `enable -f` and `hash -p`. */
function readBuiltin(name: string, args: readonly Word[]): Run[] | undefined {
  switch (name) {
    case "eval":
      return args.length === 0 ? [] : [script(args, "eval")];
    case "trap": {
      const operands = args[0]?.text === "--" ? args.slice(1) : args;
      const first = operands[0];
      if (first === undefined || /^-[lpP]$/.test(first.text) || first.text === "-") return [];
      if (operands.length === 1 && /^[0-9]+$/.test(first.text)) return [];
      return [script([first], "trap")];
    }
    case "alias":
      return args.flatMap((a) => {
        const eq = a.text.indexOf("=");
        return eq <= 0 ? [] : [script([{ ...a, text: a.text.slice(eq + 1) }], "alias")];
      });
    case "enable":
      return args.some((a) => /^-[A-Za-z]*f/.test(a.text))
        ? [opaque("enable -f", "loads a builtin from a shared library", true)]
        : [];
    case "hash":
      return args.some((a) => /^-[A-Za-z]*p/.test(a.text))
        ? [opaque("hash -p", "makes a command name run another file", true)]
        : [];
    case "source":
    case ".":
      return args[0] !== undefined && /^\/(dev\/(stdin|fd\/)|proc\/)/.test(args[0].text)
        ? [opaque(name, "reads its script from standard input or a descriptor", false)]
        : [];
    case "export":
    case "declare":
    case "typeset":
    case "local":
    case "readonly":
      return args.flatMap((a) => (a.text.startsWith("-") ? [] : readAssignment(a, name)));
    default:
      return undefined;
  }
}

/** Everything `argv` runs besides itself (one level; walk.ts recurses). */
export function readRuns(argv: readonly Word[]): Run[] {
  const first = argv[0];
  if (first === undefined) return [];
  const name = programName(first.text);
  const args = argv.slice(1);
  const builtin = readBuiltin(name, args);
  if (builtin !== undefined) return builtin;
  if (Object.hasOwn(wrappers, name)) return readWrapper(name, argv);
  if (bashShells.has(name)) return readBashShell(name, args);
  if (otherShells.has(name)) return readOtherShell(name, args);
  if (name === "su" || name === "runuser") return readSu(name, args);
  if (name === "find") return readFind(args);
  if (name === "script") return readScriptProgram(args);
  if (name === "ssh") return readSsh(args);
  if (name === "git") return readGit(args);
  if (isShellOrInterpreter(name)) return readInterpreter(name, args);
  return readCommandOptions(name, args);
}
