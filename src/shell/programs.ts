// The one list of programs that run code given to them as text: shells whose language is bash,
// shells whose language is not, interpreters, and the privilege programs the denylist refuses.
// What each of them runs, and where in its argv, is runs.ts and interpreters.ts. Pure.

/** Shells whose language the bash reader reads: `-c script`, a script file, or standard input. */
export const bashShells: ReadonlySet<string> = new Set([
  "sh",
  "bash",
  "dash",
  "ash",
  "ksh",
  "ksh93",
  "mksh",
  "lksh",
  "oksh",
  "pdksh",
  "yash",
  "posh",
  "rbash",
]);

/** Shells whose language is not bash: their code cannot be read completely. */
export const otherShells: ReadonlySet<string> = new Set([
  "zsh",
  "fish",
  "csh",
  "tcsh",
  "nu",
  "xonsh",
  "elvish",
  "osh",
  "ysh",
  "oil",
  "rc",
  "es",
]);

/** Every shell, and the multi-call programs whose applets include one. */
export const shellPrograms: ReadonlySet<string> = new Set([
  ...bashShells,
  ...otherShells,
  "busybox",
  "toybox",
]);

/** Programs that run code in another language: `-c`, `-e`, `--eval` and the like, or a file. */
const interpreterPattern =
  /^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|jruby|truffleruby|irb|node|nodejs|deno|bun|php[0-9.]*|lua[0-9.]*|luajit|tclsh[0-9.]*|wish|osascript|pwsh|powershell|Rscript|R|julia|guile|racket|sbcl|jshell|dc|awk|gawk|mawk|nawk|busybox-awk)$/;

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
