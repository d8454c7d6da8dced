// What one command runs besides itself: the one place that knows where a program takes code from
// its arguments. A shell's `-c` script (every option form, values included), the command a wrapper
// runs (`env`, `nice`, `timeout`, `xargs`, `sudo`, `find -exec` …), the shell text a program runs
// through a shell (`watch`, `flock -c`, `script -c`, `su -c`, `ssh host cmd`, `git -c
// core.pager=…`, `eval`, `trap`), and code the reader cannot read: an interpreter's inline code, a
// shell language that is not bash, a value bash only knows when it runs. The floor, the denylist
// and the chain check all walk this (walk.ts); each program's decision is documented in
// docs/shell.md. Pure.
import { readInterpreter } from "./interpreters.ts";
import { bashShells, isShellOrInterpreter, otherShells, programName } from "./programs.ts";
import type { ExpansionKind } from "./syntax.ts";

/** A word as the reader saw it: its text after quote removal and the expansions in it. */
export type Word = { readonly text: string; readonly expansions: readonly ExpansionKind[] };

export type Run =
  /** An argv it runs (a wrapper's command, `find -exec`'s, `xargs`'). */
  | { readonly kind: "command"; readonly words: readonly Word[]; readonly via: string }
  /** Bash text it runs (a shell's `-c` script, `eval`'s words, a pager setting). */
  | { readonly kind: "script"; readonly text: string; readonly via: string }
  /** Code it runs that the reader cannot read; `inline`: code written in the argv itself. */
  | {
      readonly kind: "opaque";
      readonly reason: string;
      readonly via: string;
      readonly inline: boolean;
    };

export const literal = (text: string): Word => ({ text, expansions: [] });

function script(words: readonly Word[], via: string): Run {
  const built = words.find((w) => w.expansions.length > 0);
  if (built !== undefined) {
    return opaque(
      via,
      `its code is built from an expansion (${short(built.text)}), which is only known when it runs`,
      true,
    );
  }
  return { kind: "script", text: words.map((w) => w.text).join(" "), via };
}

function opaque(via: string, reason: string, inline: boolean): Run {
  return { kind: "opaque", via, reason, inline };
}

function command(words: readonly Word[], via: string): Run[] {
  return words.length === 0 ? [] : [{ kind: "command", words, via }];
}

function short(text: string): string {
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

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

/** ssh: `-o ProxyCommand=…`/`LocalCommand` run here; the words after the host run there. */
function readSsh(args: readonly Word[]): Run[] {
  const runs: Run[] = [];
  const values = new Set("bcDEeFIiJLlmOopQRSWwB".split("").map((l) => `-${l}`));
  let i = 0;
  for (; i < args.length; i++) {
    const text = (args[i] as Word).text;
    const option =
      text === "-o"
        ? args[i + 1]
        : /^-o./.test(text)
          ? { ...(args[i] as Word), text: text.slice(2) }
          : undefined;
    if (option !== undefined) {
      const m =
        /^\s*(ProxyCommand|LocalCommand|KnownHostsCommand|RemoteCommand)\s*[= ]\s*(.*)$/is.exec(
          option.text,
        );
      if (m !== null)
        runs.push(
          script([{ text: m[2] as string, expansions: option.expansions }], `ssh -o ${m[1]}`),
        );
    }
    if (text === "--") {
      i++;
      break;
    }
    if (!text.startsWith("-")) break;
    if (values.has(text)) i++;
  }
  const remote = args.slice(i + 1);
  if (remote.length > 0) runs.push(script(remote, "ssh (remote command)"));
  return runs;
}

/** git: settings and options whose value is a command, and subcommands that run one. */
const gitShellKeys =
  /^(core\.(pager|editor|sshcommand|askpass|fsmonitor|gitproxy)|pager\..+|sequence\.editor|credential\.(.+\.)?helper|diff\.external|diff\..+\.(command|textconv)|difftool\..+\.cmd|merge\..+\.driver|mergetool\..+\.cmd|filter\..+\.(clean|smudge|process)|gpg\.(.+\.)?program|interactive\.difffilter|uploadpack\.packobjectshook|sendemail\.(sendmailcmd|smtpserver)|web\.browser|browser\..+\.cmd|man\..+\.cmd|remote\..+\.(uploadpack|receivepack)|alias\..+)$/i;
const gitFileKeys =
  /^(core\.hookspath|include\.path|includeif\..+\.path|protocol\..+\.allow|url\..+\.insteadof)$/i;

function readGitSetting(key: string, value: Word, via: string): Run[] {
  if (gitFileKeys.test(key)) {
    return [opaque(via, `git's ${key} makes git run code from elsewhere`, true)];
  }
  if (!gitShellKeys.test(key)) return [];
  if (/^alias\./i.test(key) && !value.text.startsWith("!")) return [];
  const text = value.text.replace(/^!/, "");
  return [script([{ text, expansions: value.expansions }], `${via} ${key}`)];
}

function readGit(args: readonly Word[]): Run[] {
  const runs: Run[] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as Word;
    const text = arg.text;
    if (text === "-c" && args[i + 1] !== undefined) {
      const setting = args[i + 1] as Word;
      const eq = setting.text.indexOf("=");
      const key = eq === -1 ? setting.text : setting.text.slice(0, eq);
      runs.push(...readGitSetting(key, { ...setting, text: setting.text.slice(eq + 1) }, "git -c"));
      i++;
      continue;
    }
    if (text.startsWith("--config-env=")) {
      const key = text.slice(13).split("=")[0] ?? "";
      if (gitShellKeys.test(key) || gitFileKeys.test(key)) {
        runs.push(opaque("git --config-env", `git's ${key} comes from the environment`, true));
      }
      continue;
    }
    if (text.startsWith("--exec-path=")) {
      runs.push(opaque("git --exec-path", "git runs its commands from another directory", true));
      continue;
    }
    if (text === "-C" || text === "--git-dir" || text === "--work-tree" || text === "--namespace") {
      i++;
      continue;
    }
    if (!text.startsWith("-")) break;
  }
  const sub = args[i]?.text;
  const rest = args.slice(i + 1);
  for (const [j, arg] of rest.entries()) {
    if (arg.text.startsWith("ext::"))
      runs.push(opaque(`git ${sub}`, "an ext:: URL runs a command", true));
    const next = rest.slice(j + 1, j + 2);
    const attached = (prefix: string) => ({ ...arg, text: arg.text.slice(prefix.length) });
    const optionValue = (flags: string[], prefixes: string[]): Word[] | undefined => {
      if (flags.includes(arg.text)) return next;
      const prefix = prefixes.find((p) => arg.text.startsWith(p));
      return prefix === undefined ? undefined : [attached(prefix)];
    };
    const value =
      (sub === "rebase" ? optionValue(["-x", "--exec"], ["--exec="]) : undefined) ??
      optionValue(
        ["-u", "--upload-pack", "--receive-pack", "--exec"],
        ["--upload-pack=", "--receive-pack=", "--exec="],
      ) ??
      (sub === "difftool" ? optionValue(["-x", "--extcmd"], ["--extcmd="]) : undefined) ??
      (sub === "grep" ? optionValue([], ["-O", "--open-files-in-pager="]) : undefined) ??
      (sub === "filter-branch" && /^--[a-z-]+-filter$/.test(arg.text) ? next : undefined);
    if (value !== undefined && value.length > 0) runs.push(script(value, `git ${sub} ${arg.text}`));
  }
  if (sub === "submodule" && rest.some((a) => a.text === "foreach")) {
    const at = rest.findIndex((a) => a.text === "foreach");
    const cmd = rest
      .slice(at + 1)
      .filter((a, k, all) => !(a.text === "--recursive" && k === 0) || all.length === 1);
    if (cmd.length > 0) runs.push(script(cmd, "git submodule foreach"));
  }
  if (sub === "bisect" && rest[0]?.text === "run")
    runs.push(...command(rest.slice(1), "git bisect run"));
  if (sub === "config") {
    const operands = rest.filter((a) => !a.text.startsWith("-"));
    const [first, second, third] = operands;
    const [key, value] = first?.text === "set" ? [second, third] : [first, second];
    if (key !== undefined && value !== undefined)
      runs.push(...readGitSetting(key.text, value, "git config"));
  }
  return runs;
}

/** A few programs whose options take commands, each documented in docs/shell.md. */
function readCommandOptions(name: string, args: readonly Word[]): Run[] {
  const runs: Run[] = [];
  const shellValue = (flags: readonly string[], prefixes: readonly string[]) => {
    for (const [i, arg] of args.entries()) {
      if (flags.includes(arg.text))
        runs.push(script(args.slice(i + 1, i + 2), `${name} ${arg.text}`));
      const prefix = prefixes.find((p) => arg.text.startsWith(p));
      if (prefix !== undefined) {
        const text = arg.text.slice(prefix.length).replace(/^exec=/, "");
        runs.push(script([{ ...arg, text }], `${name} ${prefix}`));
      }
    }
  };
  if (name === "tar" || name === "gtar" || name === "bsdtar") {
    shellValue(
      [
        "--to-command",
        "-I",
        "--use-compress-program",
        "--rsh-command",
        "-F",
        "--info-script",
        "--new-volume-script",
      ],
      [
        "--to-command=",
        "--use-compress-program=",
        "--rsh-command=",
        "--info-script=",
        "--new-volume-script=",
        "--checkpoint-action=",
      ],
    );
  } else if (name === "rsync") {
    shellValue(["-e", "--rsh", "--rsync-path"], ["--rsh=", "--rsync-path="]);
    for (const [i, arg] of args.entries()) {
      if (/^-[A-Za-z]+e$/.test(arg.text) && arg.text.length > 2) {
        runs.push(script(args.slice(i + 1, i + 2), "rsync -e"));
      }
    }
  } else if (name === "npx" || ((name === "npm" || name === "pnpm") && args[0]?.text === "exec")) {
    shellValue(["-c", "--call"], ["--call="]);
  } else if (name === "make" || name === "gmake") {
    for (const arg of args) {
      if (arg.text === "-E" || arg.text.startsWith("--eval")) {
        runs.push(opaque(`${name} --eval`, "make code, which the floor cannot read", true));
      } else if (/^[A-Za-z_.][A-Za-z0-9_.]*[:+?!]?=/.test(arg.text)) {
        runs.push(
          opaque(
            `${name} ${arg.text.split("=")[0]}=`,
            "a make variable that recipes may run as a command",
            true,
          ),
        );
      }
    }
  } else if (/^(vim?|nvim|ex|view|gvim|vimdiff)$/.test(name)) {
    if (args.some((a) => a.text === "-c" || a.text === "--cmd" || /^\+./.test(a.text))) {
      runs.push(opaque(`${name} -c`, "editor commands, which can run shell commands", true));
    }
  } else if (name === "gdb" || name === "lldb") {
    if (args.some((a) => /^(-ex|-iex|--eval-command|-o|--one-line|-O)/.test(a.text))) {
      runs.push(opaque(`${name} -ex`, "debugger commands, which can run shell commands", true));
    }
  } else if (name === "expect") {
    if (args.some((a) => /^-[A-Za-z]*c/.test(a.text))) {
      runs.push(opaque("expect -c", "Tcl code, which the floor cannot read", true));
    }
  } else if (name === "parallel") {
    runs.push(opaque("parallel", "runs commands built from its input through a shell", false));
  } else if (name === "sqlite3") {
    if (args.some((a) => /^\.|^-cmd$/.test(a.text.trimStart()))) {
      runs.push(opaque("sqlite3", "dot-commands, which can run shell commands", true));
    }
  }
  return runs;
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
