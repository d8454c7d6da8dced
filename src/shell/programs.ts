// Which programs run code given to them as text, and how to find that text in an argv: the one
// list of shells and interpreters (the denylist, execute_command's proposal, the argv floor, the
// command keys and the policy-file check all read it), and the wrappers that run the rest of
// their argv as a command (`env`, `nice`, `timeout`, `xargs`, `sudo` …). Pure.

/** Programs that read shell text: `-c script`, a script file, or standard input. */
export const shellPrograms: ReadonlySet<string> = new Set([
  "sh",
  "bash",
  "dash",
  "zsh",
  "ksh",
  "mksh",
  "ash",
  "fish",
  "yash",
  "posh",
  "rbash",
  "busybox",
  "toybox",
]);

/** Programs that run code in another language: `-c`, `-e`, `--eval` and the like, or a file. */
const interpreterPattern =
  /^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|irb|node|nodejs|deno|bun|php[0-9.]*|lua[0-9.]*|luajit|tclsh[0-9.]*|wish|osascript|pwsh|powershell|Rscript|julia|guile|racket|sbcl|awk|gawk|mawk|nawk|busybox-awk)$/;

/** The options after which an interpreter's next argument is code. */
const inlineCodeFlags =
  /^(-[A-Za-z]*[ceEr]|--eval|--exec|--command|-Command|-p|--print|eval|-e[a-z]*)$/;

const privilege = new Set(["sudo", "su", "doas", "pkexec", "run0", "sudoedit", "runuser"]);

/** The last path segment: `/usr/bin/bash` → `bash`. */
export function programName(program: string): string {
  const slash = program.lastIndexOf("/");
  return slash === -1 ? program : program.slice(slash + 1);
}

export function isShellProgram(name: string): boolean {
  return shellPrograms.has(programName(name));
}

export function isInterpreterProgram(name: string): boolean {
  return interpreterPattern.test(programName(name));
}

export function isShellOrInterpreter(name: string): boolean {
  return isShellProgram(name) || isInterpreterProgram(name);
}

export function isPrivilegeProgram(name: string): boolean {
  return privilege.has(programName(name));
}

/** Options of each wrapper that take a value (so the value is not taken for the command). */
const wrapperOptionsWithValue: Record<string, ReadonlySet<string>> = {
  env: new Set(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]),
  nice: new Set(["-n", "--adjustment"]),
  timeout: new Set(["-s", "--signal", "-k", "--kill-after"]),
  stdbuf: new Set(["-i", "-o", "-e"]),
  ionice: new Set(["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"]),
  xargs: new Set([
    "-I",
    "-i",
    "-n",
    "-P",
    "-d",
    "-E",
    "-e",
    "-L",
    "-l",
    "-s",
    "-a",
    "--arg-file",
    "--delimiter",
    "--max-args",
    "--max-procs",
    "--replace",
    "--max-lines",
    "--max-chars",
    "--process-slot-var",
  ]),
  exec: new Set(["-a"]),
  flock: new Set(["-w", "--timeout", "-E", "--conflict-exit-code"]),
  watch: new Set(["-n", "--interval", "-d", "--differences", "-q", "--equexit"]),
  chrt: new Set(["-T", "-P", "-D"]),
  taskset: new Set([]),
  setsid: new Set([]),
  nohup: new Set([]),
  time: new Set(["-f", "--format", "-o", "--output"]),
  command: new Set([]),
  builtin: new Set([]),
  unbuffer: new Set([]),
  caffeinate: new Set(["-t", "-w"]),
  chroot: new Set(["--userspec", "--groups"]),
  unshare: new Set([]),
  nsenter: new Set(["-t", "--target"]),
  firejail: new Set([]),
  sudo: new Set(["-u", "--user", "-g", "--group", "-C", "-D", "-h", "-p", "-r", "-t", "-U"]),
  doas: new Set(["-u", "-C"]),
  runuser: new Set(["-u", "-g", "-G", "--user", "--group"]),
  run0: new Set(["-u", "--user", "-g", "--group"]),
};

export function isWrapperProgram(name: string): boolean {
  return Object.hasOwn(wrapperOptionsWithValue, programName(name));
}

/**
 * Skips a wrapper's own options (and env's NAME=VALUE) and returns the command it runs, or
 * undefined when `name` is not a wrapper.
 */
export function unwrapCommand(
  name: string,
  args: readonly string[],
): readonly string[] | undefined {
  const base = programName(name);
  const withValue = wrapperOptionsWithValue[base];
  if (withValue === undefined || !Object.hasOwn(wrapperOptionsWithValue, base)) return undefined;
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    if (arg === "--") {
      i++;
      break;
    }
    if (base === "env" && /^[A-Za-z_][A-Za-z0-9_]*=/.test(arg)) {
      i++;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") {
      i += withValue.has(arg) ? 2 : 1;
      continue;
    }
    break;
  }
  let rest = args.slice(i);
  // Wrappers that take a positional value before the command.
  if (
    (base === "timeout" || base === "chrt" || base === "taskset" || base === "flock") &&
    rest.length > 0
  ) {
    rest = rest.slice(1);
  }
  if (base === "chroot" && rest.length > 0) rest = rest.slice(1);
  return rest;
}

export type InlineScript = {
  /** The program that runs the text, after wrappers: `bash`, `python3`. */
  readonly program: string;
  readonly kind: "shell" | "interpreter";
  /** The option that introduced it (`-c`, `-lc`, `-e`, `--eval`, `-S`). */
  readonly flag: string;
  readonly script: string;
};

const maxWrapperDepth = 8;

/**
 * Text an argv hands to a shell or interpreter to run: `sh -c s`, `bash -lc s`, `env … sh -c s`,
 * `env -i bash -c s`, `busybox sh -c s`, `env -S "s"`, `python -c s`, `node -e s`, `perl -e s`,
 * `ruby -e s`, `awk 'program'` — behind any number of wrappers. Undefined when there is none.
 */
export function findInlineScript(argv: readonly string[], depth = 0): InlineScript | undefined {
  const first = argv[0];
  if (first === undefined || depth > maxWrapperDepth) return undefined;
  const name = programName(first);
  const args = argv.slice(1);
  if (name === "env") {
    const split = args.findIndex(
      (a) => a === "-S" || a === "--split-string" || a.startsWith("--split-string="),
    );
    const text = args[split]?.startsWith("--split-string=")
      ? args[split]?.slice("--split-string=".length)
      : args[split + 1];
    if (split !== -1 && text !== undefined) {
      return { program: "env", kind: "shell", flag: "-S", script: text };
    }
  }
  if (name === "busybox" || name === "toybox") {
    const applet = args[0];
    if (applet === undefined) return undefined;
    return findInlineScript(args, depth + 1);
  }
  const inner = unwrapCommand(name, args);
  if (inner !== undefined) return inner.length > 0 ? findInlineScript(inner, depth + 1) : undefined;
  if (shellPrograms.has(name)) {
    const script = findShellScript(args);
    return script === undefined ? undefined : { program: name, kind: "shell", ...script };
  }
  if (interpreterPattern.test(name)) {
    if (/awk$/.test(name)) {
      const program = findAwkProgram(args);
      return program === undefined
        ? undefined
        : { program: name, kind: "interpreter", flag: "(program)", script: program };
    }
    for (let i = 0; i < args.length; i++) {
      const arg = args[i] as string;
      if (arg === "--") break;
      if (inlineCodeFlags.test(arg) && args[i + 1] !== undefined) {
        return { program: name, kind: "interpreter", flag: arg, script: args[i + 1] as string };
      }
      const joined = /^(--eval|--exec)=(.*)$/s.exec(arg);
      if (joined !== null) {
        return {
          program: name,
          kind: "interpreter",
          flag: joined[1] as string,
          script: joined[2] as string,
        };
      }
      if (!arg.startsWith("-")) break; // a script file: its text is not in the argv
    }
  }
  return undefined;
}

/** The `-c` script of a shell invocation (`bash -lc 'x'`, `sh -e -c x`, `sh -o errexit -c x`). */
function findShellScript(args: readonly string[]): { flag: string; script: string } | undefined {
  let flag: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") continue;
    if (/^[-+][A-Za-z]+$/.test(arg)) {
      if (arg.startsWith("-") && arg.includes("c")) flag = arg;
      if (arg === "-o" || arg === "+o" || arg === "-O" || arg === "+O") i++;
      continue;
    }
    if (arg.startsWith("--")) continue;
    return flag === undefined ? undefined : { flag, script: arg };
  }
  return undefined;
}

/** awk's program: the first operand, unless `-f file` gives it. */
function findAwkProgram(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "-f" || arg.startsWith("--file")) return undefined;
    if (arg === "-v" || arg === "-F") {
      i++;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") continue;
    return arg;
  }
  return undefined;
}

/**
 * Why an argv whose later arguments someone else appends could run code of their choosing: a
 * wrapper with no program after it (`env`, `xargs`, `sudo`), or a shell or interpreter whose
 * code (`-c script`, `-e code`, a script file) is not already in the argv. Undefined when the
 * code is fixed: appended arguments can then only be the code's own arguments.
 */
export function describeCodeRunner(argv: readonly string[], depth = 0): string | undefined {
  const first = argv[0];
  if (first === undefined || depth > maxWrapperDepth) return undefined;
  const name = programName(first);
  const args = argv.slice(1);
  if (name === "busybox" || name === "toybox") {
    return args[0] === undefined
      ? `${name} runs whichever program its first argument names`
      : describeCodeRunner(args, depth + 1);
  }
  if (findInlineScript(argv) !== undefined) return undefined;
  const inner = unwrapCommand(name, args);
  if (inner !== undefined) {
    return inner.length === 0
      ? `${name} runs whichever program its arguments name`
      : describeCodeRunner(inner, depth + 1);
  }
  if (!isShellOrInterpreter(name)) return undefined;
  const scriptFile = args.find((a) => !a.startsWith("-") && !a.startsWith("+"));
  if (scriptFile !== undefined && !/awk$/.test(name)) return undefined;
  return isShellProgram(name)
    ? `${name} is a shell and runs any script its arguments give it (-c …)`
    : `${name} is an interpreter and runs any code its arguments give it (-c, -e …)`;
}
