// Programs that are not shells or wrappers but take a command in their options or arguments:
// `ssh` (ProxyCommand and the remote command), `git` (settings and options that hold a command,
// subcommands that run one), `tar`, `rsync`, `npx`, `make`, editors, debuggers, `expect`,
// `sqlite3` and `parallel`. Each decision is documented in docs/shell.md. Pure.
import { command, opaque, type Run, script, type Word } from "./run-parts.ts";

/** ssh: `-o ProxyCommand=…`/`LocalCommand` run here; the words after the host run there. */
export function readSsh(args: readonly Word[]): Run[] {
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

export function readGit(args: readonly Word[]): Run[] {
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

/**
 * GNU sed's `e` command and the `e` flag of `s` run shell commands; `--sandbox` refuses them.
 * Conservative: a script where any command could be `e`, or any `s` flags hold an `e`, counts.
 */
function sedRunsCommands(scriptText: string): boolean {
  for (const raw of scriptText.split(/[;\n]/)) {
    const cmd = raw.replace(/^[\s\d$,~!+]*(\/(?:[^/\\]|\\.)*\/[IM]*[\s,!]*)*[\s\d$,~!+]*/, "");
    if (/^e(\s|$)/.test(cmd)) return true;
    const s = /^s(.)/.exec(cmd);
    if (s !== null) {
      const d = (s[1] as string).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      const flags = new RegExp(
        `^s${d}(?:[^\\\\${d}]|\\\\.)*${d}(?:[^\\\\${d}]|\\\\.)*${d}([^;}]*)`,
      ).exec(cmd);
      if (flags === null || /e/.test(flags[1] ?? "")) return true;
    }
  }
  return false;
}

function readSed(args: readonly Word[]): Run[] {
  if (args.some((a) => a.text === "--sandbox")) return [];
  const scripts: Word[] = [];
  let operand = true;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as Word;
    if (arg.text === "-e" || arg.text === "--expression") {
      const next = args[i + 1];
      if (next !== undefined) scripts.push(next);
      operand = false;
      i++;
    } else if (arg.text.startsWith("--expression=")) {
      scripts.push({ ...arg, text: arg.text.slice(13) });
      operand = false;
    } else if (/^-[A-Za-z]*e./.test(arg.text) && !arg.text.startsWith("--")) {
      scripts.push({ ...arg, text: arg.text.slice(arg.text.indexOf("e") + 1) });
      operand = false;
    } else if (arg.text === "-f" || arg.text.startsWith("--file")) return [];
    else if (/^-(l|-line-length)$/.test(arg.text)) i++;
    else if (!arg.text.startsWith("-") && operand) {
      scripts.push(arg);
      operand = false;
    }
  }
  const code = scripts.find((w) => w.expansions.length > 0 || sedRunsCommands(w.text));
  return code === undefined
    ? []
    : [opaque("sed", "a sed script whose e command or s///e flag runs shell commands", true)];
}

/** A few programs whose options take commands, each documented in docs/shell.md. */
export function readCommandOptions(name: string, args: readonly Word[]): Run[] {
  if (name === "sed" || name === "gsed") return readSed(args);
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
