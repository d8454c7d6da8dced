// The denylist's rule classes that the reference names beyond privilege, disks, persistence,
// power and reverse shells: deleting outside the workspace, sending files to another host,
// download-then-run in two steps, writes to system files, fork bombs, and an agent granting
// itself authority (peergate's own CLI and admin API). Each rule reads one command's literal
// words (or one parsed script) and returns the reason it refuses, or undefined. Pure.
//
// Paths are judged as written, relative to the workspace the command runs in: a word that is
// absolute, starts with `~`, names `$HOME`, or climbs out with `..` is outside. A word built
// from any other expansion cannot be judged and passes; the sandbox is what stops it.
import { isInterpreterProgram, isShellProgram, programName } from "./programs.ts";
import type { Word } from "./runs.ts";
import type { ShellScan, SimpleCommand } from "./syntax.ts";

const systemRoots =
  /^\/(etc|usr|bin|sbin|lib|lib32|lib64|libx32|boot|dev|proc|sys|var|opt|srv|root|home|run|snap|mnt|media|Users|System|Library|Applications|private|Volumes)(\/|$)/;
const homeWord =
  /^(~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME\}|\$\{HOME[:%#/][^}]*\}|\$USER|\$\{USER\})(\/|$)/;
const harmlessDevices = /^\/dev\/(null|zero|stdout|stderr|stdin|tty|fd\/[0-9]+|urandom|random)$/;

/** `//x/./y/../z` → `/x/z`; a relative path keeps leading `..` segments. */
export function normalizePath(word: string): string {
  const absolute = word.startsWith("/");
  const out: string[] = [];
  for (const segment of word.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length > 0 && out.at(-1) !== "..") out.pop();
      else if (!absolute) out.push("..");
      continue;
    }
    out.push(segment);
  }
  return (absolute ? "/" : "") + out.join("/");
}

/** Where a path word points when it is outside the workspace, or undefined when it is inside. */
export function describeOutside(word: string): string | undefined {
  if (homeWord.test(word)) return "the home directory";
  if (word.startsWith("/")) {
    const path = normalizePath(word);
    if (path === "/" || /^\/\*?$/.test(path)) return "the root directory";
    if (harmlessDevices.test(path)) return undefined;
    if (/^\/(tmp|var\/tmp)(\/.+)$/.test(path)) return undefined; // the sandbox's fresh /tmp
    if (systemRoots.test(path)) {
      return /^\/(home|root|Users)(\/[^/]*)?\/?$/.test(path)
        ? "the home directory"
        : "a system directory";
    }
    return "a path outside the workspace";
  }
  const path = normalizePath(word);
  if (path === ".." || path.startsWith("../")) return "a path outside the workspace";
  return undefined;
}

function operands(args: readonly string[]): string[] {
  const out: string[] = [];
  let options = true;
  for (const arg of args) {
    if (options && arg === "--") {
      options = false;
      continue;
    }
    if (options && arg.startsWith("-") && arg !== "-") continue;
    out.push(arg);
  }
  return out;
}

const deleters = new Set(["rm", "rmdir", "unlink", "shred", "srm", "wipe", "truncate"]);

/** `rm`, `rmdir`, `unlink`, `shred`, `truncate`, `find … -delete` of anything outside the workspace. */
export function checkDeletion(name: string, args: readonly string[]): string | undefined {
  if (deleters.has(name)) {
    const values = name === "truncate" ? truncateOperands(args) : operands(args);
    for (const target of values) {
      const outside = describeOutside(target);
      if (outside !== undefined) {
        return `deletes outside the workspace: ${name} ${target} (${outside})`;
      }
    }
    return undefined;
  }
  if (name === "find") {
    const deletes =
      args.includes("-delete") ||
      args.some(
        (a, i) =>
          (a === "-exec" || a === "-execdir" || a === "-ok" || a === "-okdir") &&
          deleters.has(programName(args[i + 1] ?? "")),
      );
    if (!deletes) return undefined;
    const starts: string[] = [];
    for (const arg of args) {
      if (arg.startsWith("-") || arg === "(" || arg === "!") break;
      starts.push(arg);
    }
    for (const start of starts) {
      const outside = describeOutside(start);
      if (outside !== undefined) return `deletes outside the workspace: find ${start} (${outside})`;
    }
  }
  return undefined;
}

/** Programs that delete what they are given; `rmdir` only removes empty directories. */
const shellDeleters = new Set(["rm", "unlink", "shred", "srm", "wipe"]);

const insteadOfDeleting =
  'deleting from the shell cannot be undone, so it is not run: leave the files and name them in your answer for a person to delete, or work in a directory made by mktemp in the same command (tmp=$(mktemp -d) … rm -rf "$tmp")';

/** `$tmp`, `${tmp}` or `$tmp/below` (no `..`) for a variable set from mktemp in the script. */
function isTempPath(word: Word, temp: ReadonlySet<string>): boolean {
  if (word.expansions.some((e) => e !== "parameter" && e !== "glob")) return false;
  const match = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))(\/.*)?$/s.exec(
    word.text,
  );
  if (match === null) return false;
  const name = match[1] ?? match[2] ?? "";
  const below = match[3] ?? "";
  return temp.has(name) && !below.split("/").includes("..") && !below.includes("$");
}

function deletionOperands(words: readonly Word[]): Word[] {
  const out: Word[] = [];
  let options = true;
  for (const word of words) {
    if (options && word.text === "--") {
      options = false;
      continue;
    }
    if (options && word.text.startsWith("-") && word.text !== "-") continue;
    out.push(word);
  }
  return out;
}

/**
 * Deleting from the shell (the reference's rule): `rm`, `unlink`, `shred`, `find … -delete` and
 * `git clean` are refused unless every path is a temporary one made by mktemp in the same command
 * (`tmp=$(mktemp -d); …; rm -rf "$tmp"`). A real path beside it, or `..` in it, still refuses.
 */
export function checkShellDeletion(
  words: readonly Word[],
  temp: ReadonlySet<string>,
  /** The paths also come from input (`xargs rm`). */
  fromInput = false,
): string | undefined {
  const name = programName(words[0]?.text ?? "");
  const args = words.slice(1);
  if (shellDeleters.has(name)) {
    const targets = deletionOperands(args);
    if (fromInput) return `deletes files: ${name} of paths from its input (${insteadOfDeleting})`;
    const real = targets.find((t) => !isTempPath(t, temp));
    if (targets.length === 0 || real === undefined) return undefined;
    return `deletes files: ${name} ${real.text} (${insteadOfDeleting})`;
  }
  if (name === "find" && args.some((a) => a.text === "-delete")) {
    const starts: Word[] = [];
    for (const arg of args) {
      if (arg.text.startsWith("-") || arg.text === "(" || arg.text === "!") break;
      starts.push(arg);
    }
    const real = starts.find((t) => !isTempPath(t, temp));
    if (starts.length > 0 && real === undefined) return undefined;
    return `deletes files: find ${real?.text ?? "."} -delete (${insteadOfDeleting})`;
  }
  if (name === "git") {
    const sub = args.findIndex((a) => !a.text.startsWith("-"));
    const rest = args.slice(sub + 1).map((a) => a.text);
    const dry = rest.some((a) => a === "--dry-run" || /^-[A-Za-z]*n/.test(a));
    if (args[sub]?.text === "clean" && !dry) {
      return `deletes files: git clean removes untracked files (${insteadOfDeleting})`;
    }
  }
  return undefined;
}

const mktempAssignment =
  /^([A-Za-z_][A-Za-z0-9_]*)=(?:"(?:\$\(\s*mktemp\b[^()`]*\)|`\s*mktemp\b[^`]*`)"|\$\(\s*mktemp\b[^()`]*\)|`\s*mktemp\b[^`]*`)$/;

/**
 * The variables a script sets from mktemp and sets no other way: assigned only as
 * `NAME=$(mktemp …)` (or in backquotes, quoted or not), never by `for`, `read`, `printf -v`, a
 * `${NAME:=…}` default, a reference or another assignment.
 */
export function findTempVariables(scan: ShellScan, text: string): string[] {
  const candidates = new Map<string, number>();
  for (const command of scan.commands) {
    const declaring = ["local", "declare", "typeset", "export", "readonly"].includes(
      command.words[0]?.text ?? "",
    );
    const words = [...command.assignments, ...(declaring ? command.words.slice(1) : [])];
    for (const word of words) {
      const match = mktempAssignment.exec(word.text);
      if (match !== null)
        candidates.set(match[1] as string, (candidates.get(match[1] as string) ?? 0) + 1);
    }
  }
  const out: string[] = [];
  for (const [name, count] of candidates) {
    const assigned =
      text.match(new RegExp(`(^|[^A-Za-z0-9_$])${name}(\\[[^\\]]*\\])?\\+?=`, "g"))?.length ?? 0;
    const otherwise = new RegExp(
      `\\bfor\\s+${name}\\b|\\b(read|mapfile|readarray|getopts)\\b[^;&|\\n]*\\b${name}\\b|-v\\s*${name}\\b|-n\\s+${name}\\b|\\$\\{${name}:?[=]|\\bunset\\b[^;&|\\n]*\\b${name}\\b`,
    ).test(text);
    if (assigned === count && !otherwise) out.push(name);
  }
  return out;
}

function truncateOperands(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "-s" || arg === "-r" || arg === "--size" || arg === "--reference") i++;
    else if (!arg.startsWith("-")) out.push(arg);
  }
  return out;
}

const remoteTarget = /^([A-Za-z0-9._%+-]+@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):/;

function isRemote(word: string): boolean {
  return (
    /^[a-z][a-z0-9+.-]*:\/\//i.test(word) || (remoteTarget.test(word) && !word.startsWith("/"))
  );
}

/** Uploads: curl's file bodies and uploads, wget's post files, scp/rsync/sftp to a host. */
export function checkUpload(name: string, args: readonly string[]): string | undefined {
  if (name === "curl") {
    for (let i = 0; i < args.length; i++) {
      const arg = args[i] as string;
      const value = args[i + 1] ?? "";
      if (
        /^(-T|--upload-file)$/.test(arg) ||
        /^-T./.test(arg) ||
        arg.startsWith("--upload-file=")
      ) {
        return "sends files to another host: curl uploads a file (-T / --upload-file)";
      }
      const posts =
        (/^(-d|--data|--data-binary|--data-ascii|--json)$/.test(arg) && value.startsWith("@")) ||
        (arg === "--data-urlencode" && /^[^=]*@/.test(value));
      if (posts) return "sends files to another host: curl posts a file's contents (@file)";
      if (/^-d@|^--data(-binary|-urlencode|-ascii)?=@/.test(arg)) {
        return "sends files to another host: curl posts a file's contents (@file)";
      }
      if ((arg === "-F" || arg === "--form") && /=[@<]/.test(value)) {
        return "sends files to another host: curl posts a file in a form (-F name=@file)";
      }
      if (/^-F.*=[@<]/.test(arg) || /^--form=.*=[@<]/.test(arg)) {
        return "sends files to another host: curl posts a file in a form (-F name=@file)";
      }
    }
  }
  if (name === "wget" && args.some((a) => /^--(post|body)-file(=|$)/.test(a))) {
    return "sends files to another host: wget posts a file (--post-file / --body-file)";
  }
  if (name === "scp" || name === "rsync" || name === "sftp") {
    const values = operands(args);
    const destination = values.at(-1);
    if (name === "sftp" && values.length > 0) return "sends files to another host: sftp";
    if (values.length >= 2 && destination !== undefined && isRemote(destination)) {
      return `sends files to another host: ${name} to ${destination}`;
    }
  }
  if (name === "socat" && args.some((a) => /^(FILE|OPEN|GOPEN|CREATE):/i.test(a))) {
    if (args.some((a) => /^(TCP|TCP4|TCP6|UDP|UDP4|UDP6|SSL|OPENSSL)[-:]/i.test(a))) {
      return "sends files to another host: socat between a file and a socket";
    }
  }
  return undefined;
}

const systemWriters = new Set([
  "tee",
  "truncate",
  "touch",
  "chmod",
  "chown",
  "chgrp",
  "chattr",
  "setfacl",
  "mkdir",
]);
const copiers = new Set(["cp", "mv", "ln", "install", "rsync"]);

function isSystemFile(word: string): boolean {
  if (!word.startsWith("/")) return false;
  const path = normalizePath(word);
  if (harmlessDevices.test(path)) return false;
  return /^\/(etc|usr|bin|sbin|lib|lib32|lib64|libx32|boot|sys|proc|var\/(spool|lib|log)|System|Library)(\/|$)/.test(
    path,
  );
}

/** Writes to system files: through a writing program, a copy's destination, `dd of=`, `sed -i`. */
export function checkSystemWrite(name: string, args: readonly string[]): string | undefined {
  let targets: string[] = [];
  if (systemWriters.has(name)) targets = operands(args);
  else if (copiers.has(name)) {
    const values = operands(args);
    const t = args.findIndex((a) => a === "-t" || a === "--target-directory");
    targets = t !== -1 && args[t + 1] !== undefined ? [args[t + 1] as string] : values.slice(-1);
  } else if (name === "dd") {
    targets = args.filter((a) => a.startsWith("of=")).map((a) => a.slice(3));
  } else if (name === "sed" || name === "perl") {
    if (args.some((a) => /^-[A-Za-z]*i/.test(a) || a.startsWith("--in-place"))) {
      targets = operands(args);
    }
  }
  const target = targets.find(isSystemFile);
  return target === undefined ? undefined : `writes a system file: ${name} ${target}`;
}

/** A redirection that writes a system file (`> /etc/hosts`). */
export function checkRedirectWrite(op: string, target: string): string | undefined {
  if (!(op.includes(">") || op === "<>")) return undefined;
  return isSystemFile(target) ? `writes a system file: redirects into ${target}` : undefined;
}

const packageRunners = new Set(["npx", "pnpx", "bunx", "dlx"]);
const networkClients = new Set([
  "curl",
  "wget",
  "http",
  "https",
  "xh",
  "httpie",
  "fetch",
  "aria2c",
  "lwp-request",
  "GET",
  "POST",
  "nc",
  "ncat",
  "netcat",
  "socat",
  "openssl",
  "websocat",
  "grpcurl",
]);

function isPeergateEntry(word: string): boolean {
  const path = normalizePath(word);
  return (
    programName(path) === "peergate" ||
    /(^|\/)src\/main\.ts$/.test(path) ||
    // The executable npx and `npm start` run: src/main.ts behind Node's compile cache.
    /(^|\/)bin\/peergate(\.[cm]?js)?$/.test(path) ||
    /(^|\/)peergate\/src\/[^/]+\.[cm]?[jt]s$/.test(path)
  );
}

/** An agent granting itself authority: peergate's own CLI, or a call to its admin API. */
export function checkAuthority(name: string, args: readonly string[]): string | undefined {
  // Run as a program itself: `peergate`, or the executable by its file name (`./bin/peergate.mjs`).
  if (/^peergate(\.[cm]?js)?$/.test(name))
    return "grants itself authority: runs peergate's own CLI";
  if (packageRunners.has(name) && operands(args).some(isPeergateEntry)) {
    return `grants itself authority: runs peergate's own CLI through ${name}`;
  }
  if ((name === "npm" || name === "pnpm" || name === "yarn" || name === "bun") && args.length > 0) {
    const values = operands(args);
    if (
      (values[0] === "exec" || values[0] === "x" || values[0] === "dlx") &&
      values.slice(1).some(isPeergateEntry)
    ) {
      return `grants itself authority: runs peergate's own CLI through ${name} ${values[0]}`;
    }
    if ((values[0] === "run" || values[0] === "run-script") && values[1] === "peergate") {
      return `grants itself authority: runs peergate's own CLI through ${name} run`;
    }
  }
  if (/^(node|nodejs|tsx|ts-node|bun|deno)$/.test(name) && operands(args).some(isPeergateEntry)) {
    return "grants itself authority: runs peergate's own entry point (bin/peergate.mjs, src/main.ts)";
  }
  if (
    (networkClients.has(name) || isInterpreterProgram(name) || isShellProgram(name)) &&
    args.some((a) => a.includes("/admin/v1"))
  ) {
    return "grants itself authority: calls peergate's admin API (/admin/v1)";
  }
  return undefined;
}

const downloaders = new Set(["curl", "wget", "fetch", "aria2c", "http", "https", "xh"]);

/** The file a download writes, when the command names it (`-o f`, `-O f`, `wget URL`). */
function downloadedFile(command: SimpleCommand): string | undefined {
  const words = command.words.map((w) => w.text);
  const name = programName(words[0] ?? "");
  if (!downloaders.has(name)) return undefined;
  const args = words.slice(1);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "-o" || arg === "--output" || (name === "wget" && arg === "-O")) return args[i + 1];
    if (arg.startsWith("--output=") || arg.startsWith("--output-document=")) {
      return arg.slice(arg.indexOf("=") + 1);
    }
    if (name === "wget" && arg === "--output-document") return args[i + 1];
    if (name === "curl" && (arg === "-O" || arg === "--remote-name")) {
      const url = args.find((a) => /^[a-z]+:\/\//i.test(a));
      return url === undefined ? undefined : urlBasename(url);
    }
  }
  const out = command.redirects.find((r) => r.op === ">" || r.op === ">>" || r.op === ">|");
  if (out?.target !== undefined) return out.target.text;
  if (name === "wget") {
    const url = args.find((a) => /^[a-z]+:\/\//i.test(a));
    return url === undefined ? undefined : urlBasename(url);
  }
  return undefined;
}

function urlBasename(url: string): string | undefined {
  const path = url.replace(/^[a-z]+:\/\/[^/]*/i, "").replace(/[?#].*$/, "");
  const base = path.split("/").at(-1);
  return base === undefined || base === "" ? "index.html" : base;
}

/** What a command runs as a script or program, as file names (`sh x`, `. x`, `./x`, `python x`). */
function executedFiles(command: SimpleCommand): string[] {
  const words = command.words.map((w) => w.text);
  const first = words[0];
  if (first === undefined) return [];
  const name = programName(first);
  if (name === "." || name === "source" || isShellProgram(name) || isInterpreterProgram(name)) {
    const script = operands(words.slice(1))[0];
    return script === undefined ? [] : [script];
  }
  if (name === "chmod") return [];
  return first.includes("/") ? [first] : [];
}

function sameFile(a: string, b: string): boolean {
  return normalizePath(a) === normalizePath(b);
}

/** Download-then-run and fork bombs across the commands of one script. */
export function checkScriptPatterns(scan: ShellScan): string | undefined {
  const downloaded: string[] = [];
  for (const command of scan.commands) {
    if (command.keyword !== undefined) continue;
    for (const file of executedFiles(command)) {
      if (downloaded.some((d) => sameFile(d, file))) {
        return `runs a downloaded script unseen (downloads ${file}, then runs it)`;
      }
    }
    const file = downloadedFile(command);
    if (file !== undefined) downloaded.push(file);
  }
  const selfCalls = new Map<string, number>();
  for (const command of scan.commands) {
    const program = command.words[0]?.text;
    if (command.function !== undefined && program === command.function) {
      selfCalls.set(program, (selfCalls.get(program) ?? 0) + 1);
    }
  }
  for (const [name, count] of selfCalls) {
    if (count >= 2 || scan.structure.has("background")) {
      return `fork bomb: the function ${name} starts copies of itself`;
    }
  }
  return undefined;
}
