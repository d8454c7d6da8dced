// A deterministic denylist for commands a model asks to run: each rule names one action whose
// damage reaches past the workspace or cannot be undone — privilege escalation, wiping disks,
// deleting outside the workspace (any spelling of a root, home or system path, `find -delete`,
// `unlink`, `shred`, `truncate`), sending files to another host (curl -d @file / -T, scp and rsync
// to a host, a file fed to nc), running a downloaded script unseen (`curl … | sh`, or `curl -o x`
// then `sh x`), writes to system files, persistence (crontab, enabled services, shell startup
// files, authorized_keys), power changes, reverse shells, fork bombs, and an agent granting itself
// authority (peergate's own CLI or admin API). Rules match a program where the shell would run it:
// every command of the parsed tree (pipelines, lists, subshells, substitutions), behind a wrapper
// (env, nice, timeout, xargs …), or inside a shell's `-c` script; not where its name merely
// appears in an argument. The rule classes are pure (deny-rules.ts); the shells,
// interpreters and wrappers are programs.ts's one list.
//
// This is a backstop for a confused model, not a sandbox: variable expansion, ANSI-C quoting,
// encoded payloads and interpreters route around any matcher (test/tools/shell/
// denylist-bypasses.test.ts pins them). The process sandbox is the boundary; approval and the
// caller's ceiling are the controls.
import path from "node:path";
import {
  checkAuthority,
  checkDeletion,
  checkRedirectWrite,
  checkScriptPatterns,
  checkShellDeletion,
  checkSystemWrite,
  checkUpload,
  describeOutside,
  findTempVariables,
  normalizePath,
} from "./deny-rules.ts";
import { isInterpreterProgram, isPrivilegeProgram, isShellOrInterpreter } from "./programs.ts";
import { readRuns, type Word, wrappers } from "./runs.ts";
import { scanShell } from "./scan.ts";
import type { ShellScan, SimpleCommand } from "./syntax.ts";
import { type CodeVisitor, walkLiteralArgv, walkScript } from "./walk.ts";

export type DenylistVerdict =
  | { readonly denied: false }
  | { readonly denied: true; readonly reason: string };

const maxDepth = 8;

const downloaders = new Set([
  "curl",
  "wget",
  "fetch",
  "aria2c",
  "http",
  "https",
  "lwp-download",
  "lwp-request",
  "GET",
]);
const netcats = new Set(["nc", "ncat", "netcat", "nc.traditional", "nc.openbsd", "pwncat"]);
const partitioners = new Set(["fdisk", "sfdisk", "sgdisk", "gdisk", "cfdisk", "parted"]);
const wipers = new Set(["wipefs", "blkdiscard", "mkswap", "mke2fs"]);
const power = new Set(["shutdown", "reboot", "halt", "poweroff"]);
const writers = new Set([
  "tee",
  "cp",
  "mv",
  "ln",
  "install",
  "rsync",
  "truncate",
  "dd",
  "sed",
  "touch",
  "chmod",
  "chown",
]);
const safeDevices = /^\/dev\/(null|zero|stdout|stderr|stdin|tty|fd\/[0-9]+|urandom|random)$/;
const startupFile =
  /(^|\/)(\.bashrc|\.bash_profile|\.bash_login|\.bash_logout|\.profile|\.zshrc|\.zprofile|\.zshenv|\.zlogin|\.kshrc|\.cshrc|\.tcshrc|\.xprofile|\.xinitrc|config\.fish|authorized_keys2?|rc\.local)$|^\/etc\/(profile|bash\.bashrc|zsh\/|profile\.d\/|cron|anacrontab|systemd\/|init\.d\/|sudoers)|\/\.config\/(autostart|systemd)\//;
const networkDevice = /\/dev\/(tcp|udp)\//;

function deny(reason: string): DenylistVerdict {
  return { denied: true, reason };
}

const allowed: DenylistVerdict = { denied: false };

function baseName(program: string): string {
  return path.posix.basename(program);
}

/** Short flags as a set of letters: `-rf` → r, f. */
function shortFlags(args: readonly string[]): Set<string> {
  const letters = new Set<string>();
  for (const arg of args) {
    if (/^-[A-Za-z]+$/.test(arg)) for (const letter of arg.slice(1)) letters.add(letter);
  }
  return letters;
}

/** The program a stage really runs, after wrappers: `env X=1 nice sh` → sh. */
function innerProgram(words: readonly Word[], depth = 0): string | undefined {
  const first = words[0];
  if (first === undefined || depth > maxDepth) return undefined;
  const name = baseName(first.text);
  if (!Object.hasOwn(wrappers, name)) return name;
  const inner = readRuns(words).find((r) => r.kind === "command");
  if (inner === undefined || inner.kind !== "command") return name;
  return innerProgram(inner.words, depth + 1) ?? name;
}

function runsCode(name: string | undefined): boolean {
  return (
    name !== undefined &&
    (isShellOrInterpreter(name) || name === "eval" || name === "source" || name === ".")
  );
}

function looksLikeReverseShell(code: string): boolean {
  return (
    networkDevice.test(code) ||
    (/socket|fsockopen|TCPSocket|net\.connect|createConnection/i.test(code) &&
      /dup2|pty\.spawn|subprocess|\/bin\/(ba|z|da)?sh|exec\(|spawn\(|popen|proc_open|child_process/i.test(
        code,
      ))
  );
}

/** The rules for one command the shell runs (the walk hands every one of them here). */
function checkArgv(
  words: readonly Word[],
  temp: ReadonlySet<string>,
  via: string,
): DenylistVerdict {
  const argv = words.map((w) => w.text);
  const first = argv[0];
  if (first === undefined) return allowed;
  const name = baseName(first);
  const args = argv.slice(1);

  for (const arg of argv) {
    if (networkDevice.test(arg)) {
      return deny("reverse shell: opens a network connection through /dev/tcp or /dev/udp");
    }
  }
  if (isPrivilegeProgram(name)) {
    return deny(`privilege escalation: ${name} runs commands as another user`);
  }
  if (name.startsWith("mkfs") || wipers.has(name))
    return deny(`disk wiping: ${name} destroys a file system`);
  if (partitioners.has(name) && args.some((a) => a.startsWith("/dev/"))) {
    return deny(`disk wiping: ${name} rewrites a disk's partition table`);
  }
  if (name === "dd") {
    const of = args.find((a) => a.startsWith("of="))?.slice(3);
    if (of?.startsWith("/dev/") && !safeDevices.test(of)) {
      return deny("disk wiping: dd writes to a device");
    }
  }
  if (name === "shred" && args.some((a) => a.startsWith("/dev/") && !safeDevices.test(a))) {
    return deny("disk wiping: shred overwrites a device");
  }
  if (name === "rm") {
    const flags = shortFlags(args);
    const recursive = flags.has("r") || flags.has("R") || args.includes("--recursive");
    const wipes = (a: string) => {
      const outside = describeOutside(a);
      const path = normalizePath(a);
      return (
        outside === "the root directory" ||
        outside === "the home directory" ||
        (outside === "a system directory" && /^\/[^/]+\/?\*?$/.test(path))
      );
    };
    if (args.includes("--no-preserve-root") || (recursive && args.some(wipes))) {
      return deny("disk wiping: rm -r of the root, system or home directory");
    }
  }
  const ruled =
    checkDeletion(name, args) ??
    checkShellDeletion(words, temp, via === "xargs") ??
    checkUpload(name, args) ??
    checkSystemWrite(name, args) ??
    checkAuthority(name, args);
  if (ruled !== undefined) return deny(ruled);
  if (power.has(name)) return deny(`power change: ${name}`);
  if ((name === "init" || name === "telinit") && args.some((a) => a === "0" || a === "6")) {
    return deny(`power change: ${name} ${args.join(" ")}`);
  }
  if (name === "systemctl") {
    const verb = args.find((a) => !a.startsWith("-"));
    if (
      verb !== undefined &&
      ["poweroff", "reboot", "halt", "kexec", "suspend", "hibernate"].includes(verb)
    ) {
      return deny(`power change: systemctl ${verb}`);
    }
    if (
      verb !== undefined &&
      [
        "enable",
        "reenable",
        "link",
        "preset",
        "preset-all",
        "edit",
        "set-default",
        "add-wants",
        "add-requires",
      ].includes(verb)
    ) {
      return deny(`persistence: systemctl ${verb} makes something start on its own`);
    }
  }
  if (name === "launchctl") {
    const verb = args.find((a) => !a.startsWith("-"));
    if (verb !== undefined && ["load", "bootstrap", "enable", "submit"].includes(verb)) {
      return deny(`persistence: launchctl ${verb}`);
    }
  }
  if (
    name === "crontab" &&
    !(
      args.length > 0 &&
      args.every((a) => a === "-l" || a === "-u" || !a.startsWith("-")) &&
      args.includes("-l")
    )
  ) {
    return deny("persistence: crontab installs or edits scheduled jobs");
  }
  if (name === "at" || name === "batch") return deny(`persistence: ${name} schedules a job`);
  if (writers.has(name) && args.some((a) => startupFile.test(a.replace(/^of=/, "")))) {
    return deny(
      "persistence: writes a shell startup file, authorized_keys or system start-up configuration",
    );
  }
  if (netcats.has(name)) {
    const flags = shortFlags(args);
    if (
      flags.has("e") ||
      flags.has("c") ||
      args.some((a) => /^--(exec|sh-exec|lua-exec)/.test(a))
    ) {
      return deny(`reverse shell: ${name} with a program attached to the connection`);
    }
  }
  if (name === "socat" && args.some((a) => /(^|[,!])\s*(exec|system)[:=]/i.test(a))) {
    return deny("reverse shell: socat with a program attached to the connection");
  }

  if (isInterpreterProgram(name) && args.some(looksLikeReverseShell)) {
    return deny(`reverse shell: ${name} code that connects a socket to a shell`);
  }
  return allowed;
}

function wordsOf(command: SimpleCommand): readonly Word[] {
  return command.words;
}

/** Whether a word's substitutions download something (`$(curl …)`, `<(wget …)`). */
function substitutesDownload(text: string): boolean {
  const scan = scanShell(text);
  return scan.commands.some(
    (c) => c.nested !== undefined && downloaders.has(innerProgram(wordsOf(c)) ?? ""),
  );
}

/** The rules for one script as a whole: redirections, pipelines, two-step patterns. */
function checkScript(script: string, scan: ShellScan): DenylistVerdict {
  if (networkDevice.test(script)) {
    return deny("reverse shell: opens a network connection through /dev/tcp or /dev/udp");
  }
  const stagesByPipeline = new Map<number, SimpleCommand[]>();
  let fedToNetwork: string | undefined;
  for (const command of scan.commands) {
    for (const redirect of command.redirects) {
      const target = redirect.target?.text ?? "";
      if ((redirect.op.includes(">") || redirect.op === "<>") && startupFile.test(target)) {
        return deny(
          "persistence: writes a shell startup file, authorized_keys or system start-up configuration",
        );
      }
      if (
        redirect.op.includes(">") &&
        /^\/dev\/(sd|nvme|hd|vd|xvd|mmcblk|disk|mapper\/)/.test(target)
      ) {
        return deny("disk wiping: redirects output onto a disk device");
      }
      const write = checkRedirectWrite(redirect.op, target);
      if (write !== undefined) return deny(write);
      if (
        redirect.op === "<" &&
        netcats.has(innerProgram(wordsOf(command)) ?? "") &&
        target !== "/dev/null"
      ) {
        // Reported after the pipelines, so `nc h 1 < f | sh > f` reads as the reverse shell it is.
        fedToNetwork ??= `sends files to another host: a file fed to ${innerProgram(wordsOf(command))}`;
      }
    }
    const stages = stagesByPipeline.get(command.pipeline) ?? [];
    stages.push(command);
    stagesByPipeline.set(command.pipeline, stages);

    // sh -c "$(curl …)", bash <(curl …), eval "$(wget -O- …)", . <(curl …)
    const program = innerProgram(wordsOf(command));
    if (runsCode(program)) {
      const fed = [
        ...command.words.slice(1),
        ...command.redirects.map((r) => r.target).filter((t) => t !== undefined),
      ];
      if (
        fed.some(
          (w) =>
            (w.expansions.includes("command") || w.expansions.includes("process")) &&
            substitutesDownload(w.text),
        )
      ) {
        return deny(
          "runs a downloaded script unseen (a download fed straight to a shell or interpreter)",
        );
      }
    }
  }
  for (const stages of stagesByPipeline.values()) {
    if (stages.length < 2) continue;
    const programs = stages.sort((a, b) => a.stage - b.stage).map((s) => innerProgram(wordsOf(s)));
    const download = programs.findIndex((p) => p !== undefined && downloaders.has(p));
    const netcat = programs.findIndex(
      (p) => p !== undefined && (netcats.has(p) || p === "telnet" || p === "socat"),
    );
    const shellAt = programs.findLastIndex((p) => runsCode(p));
    if (download !== -1 && shellAt > download) {
      return deny(
        "runs a downloaded script unseen (curl or wget piped into a shell or interpreter)",
      );
    }
    if (netcat !== -1 && shellAt !== -1 && shellAt !== netcat) {
      return deny("reverse shell: a network connection piped to or from a shell");
    }
  }
  for (const stages of stagesByPipeline.values()) {
    const sender = stages.find(
      (s) => s.stage > 0 && netcats.has(innerProgram(wordsOf(s)) ?? "") && s.words.length > 2,
    );
    if (sender !== undefined) {
      return deny(
        `sends files to another host: output piped into ${innerProgram(wordsOf(sender))}`,
      );
    }
  }
  if (fedToNetwork !== undefined) return deny(fedToNetwork);
  const pattern = checkScriptPatterns(scan);
  if (pattern !== undefined) return deny(pattern);
  return allowed;
}

/**
 * Walks everything `walk` reaches (walk.ts: every command, wrapper, `-c` script, `eval` string …)
 * and returns the first refusal. A walk too deep to follow is refused too.
 */
function checkWalk(walk: (visitor: CodeVisitor) => void): DenylistVerdict {
  // A command's own rule names the action more precisely than a pattern across the script does,
  // so the first command refusal wins over the first script refusal.
  let command: DenylistVerdict = allowed;
  let whole: DenylistVerdict = allowed;
  const temp = new Set<string>();
  walk({
    command: (words, via) => {
      if (!command.denied) command = checkArgv(words, temp, via);
    },
    script: (scan, text) => {
      for (const name of findTempVariables(scan, text)) temp.add(name);
      if (!whole.denied) whole = checkScript(text, scan);
    },
    opaque: (run) => {
      if (!command.denied && run.reason === "nests commands too deeply to read") {
        command = deny(`nested too deeply to check: ${run.via} ${run.reason}`);
      }
    },
  });
  return command.denied ? command : whole;
}

/** Checks one structured command (`program` and its argv) against the denylist. */
export function checkCommandDenylist(program: string, args: readonly string[]): DenylistVerdict {
  return checkWalk((visitor) => walkLiteralArgv([program, ...args], scanShell, visitor));
}

/** Checks shell text (and everything it runs) against the denylist. */
export function checkScriptDenylist(script: string): DenylistVerdict {
  return checkWalk((visitor) => walkScript(script, scanShell, visitor));
}
