// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are shell source, not templates
// The floor reads every place a command can carry code, or says it cannot. Each row is a form in
// which the code sat where the floor did not look (so a classifier answering `read-only` let it
// run): behind a shell option that takes a value, attached to its flag, inside a program that
// runs its arguments as a command, in an `eval` or `trap` string, in prompt expansion or in an
// arithmetic context. Each row of the first tables ran unasked before (the floor did not raise it,
// or the denylist let it through); each is now high-risk, and the denylist reads the same places.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkCommandDenylist } from "../../src/shell/denylist.ts";
import { assessArgvRisk, assessShellRisk } from "../../src/shell/risk.ts";

const hazard = "echo $(id)"; // a command substitution: the floor's own rule

describe("the floor reads shell options that take a value", () => {
  it.each([
    [["bash", "--rcfile", "f", "-c", hazard]],
    [["bash", "--init-file", "f", "-c", hazard]],
    [["bash", "--rcfile", "f", "-i", "-c", hazard]],
    [["bash", "-eo", "pipefail", "-c", hazard]],
  ])("%j is high-risk", (argv) => {
    expect(assessArgvRisk(argv, "read-only").risk).toBe("high-risk");
  });
});

describe("the floor finds inline code attached to its flag, and says it cannot read it", () => {
  it.each([
    [["python3", "-cimport os; os.system('id')"]],
    [["python3", "-W", "ignore", "-c", "1"]],
    [["perl", "-eprint 1"]],
    [["perl", "-Esay 1"]],
    [["perl", "-MPOSIX=strftime", "x.pl"]],
    [["ruby", "-e1"]],
    [["lua", "-eos.execute('id')"]],
    [["pwsh", "-EncodedCommand", "ZQBjAGgAbwA="]],
    [["zsh", "-c", "ls"]],
    [["fish", "--command=ls"]],
    [["python3"]],
    [["sh"]],
    [["bash", "-s"]],
  ])("%j is high-risk", (argv) => {
    expect(assessArgvRisk(argv, "read-only").risk).toBe("high-risk");
  });
});

describe("the floor follows programs that run their arguments as a command", () => {
  it.each([
    [["find", ".", "-exec", "sh", "-c", hazard, ";"]],
    [["find", ".", "-execdir", "bash", "-c", hazard, "{}", "+"]],
    [["find", ".", "-ok", "sh", "-c", hazard, ";"]],
    [["find", ".", "-exec", "{}", ";"]],
    [["flock", "lockfile", "-c", hazard]],
    [["script", "-qc", hazard, "/dev/null"]],
    [["script", "--command", hazard]],
    [["watch", "-n", "1", "echo", "$(id)"]],
    [["xargs", "-I", "X", "X"]],
    [["env", "BASH_ENV=/tmp/x", "bash", "-c", "ls"]],
    [["env", "PAGER=sh -c 'id > x'", "git", "log"]],
    [["env", "LD_PRELOAD=./x.so", "ls"]],
    [["sudo", "-s", "echo", "$(id)"]],
    [["su", "-c", hazard, "me"]],
    [["su", "me"]],
    [["ssh", "host", "echo", "$(id)"]],
    [["ssh", "-o", "ProxyCommand=sh -c 'echo $(id)'", "host"]],
    [["git", "-c", "core.pager=sh -c 'id > x'", "log"]],
    [["git", "-c", "alias.x=!id > x", "x"]],
    [["git", "-c", "core.hooksPath=hooks", "commit"]],
    [["git", "rebase", "--exec", "echo $(id)", "main"]],
    [["git", "submodule", "foreach", "echo", "$(id)"]],
    [["git", "config", "core.sshCommand", "sh -c 'id > x'"]],
    [["git", "fetch", "--upload-pack=sh -c 'id>x'", "."]],
    [["tar", "--to-command=sh -c 'id > x'", "-xf", "a.tar"]],
    [["rsync", "-e", "sh -c 'id > x'", "a", "h:b"]],
    [["make", "CC=sh -c id"]],
    [["vim", "-c", "!id", "f"]],
    [["parallel", "echo", ":::", "a"]],
    [["npx", "-c", hazard]],
    [["sed", "1e id", "f"]],
    [["sed", "-n", "s/x/id/ep", "f"]],
    [["sed", "-e", "p", "-e", "$e id", "f"]],
  ])("%j is high-risk", (argv) => {
    expect(assessArgvRisk(argv, "read-only").risk).toBe("high-risk");
  });
});

describe("the floor reads eval and trap strings, prompt expansion and arithmetic", () => {
  it.each([
    "eval 'ls > x'",
    'eval "$cmd"',
    "trap 'ls > x' EXIT",
    "trap -- 'echo $(id)' INT",
    "echo ${x@P}",
    "echo ${!name}",
    "x='a[$(id)]'; echo $((x))",
    "echo $[x]",
    "((x))",
    "let x=y",
    "[[ $a -eq 1 ]]",
    "[[ -v 'a[$(id)]' ]]",
    "echo ${a[i]}",
    "a[i]=1",
    "echo ${s:i:2}",
    "for ((i=0; i<n; i++)); do :; done",
    "declare -i n=x",
    "printf -v 'a[$(id)]' x",
    "read 'a[$(id)]'",
    "unset 'a[$(id)]'",
    "test -v 'a[$(id)]'",
    "PS4='$(id)'; set -x; ls",
    "export PROMPT_COMMAND='id > x'",
    "alias ls='id > x'",
    "enable -f ./x.so x",
    'sh -c "$x"',
    "sudo $cmd",
    "x=$1; find . -exec $x \\;",
  ])("%j is high-risk", (script) => {
    expect(assessShellRisk(script, "read-only").level).toBe("high-risk");
  });

  it.each([
    "ls -la",
    "echo $((1 + 2))",
    "echo ${a[0]} ${a[@]} ${#a[@]} ${!a[@]}",
    'for f in *.ts; do echo "$f"; done',
    "[[ -n $x && $a == b ]]",
    "trap - EXIT",
    "trap -p",
    "git log --oneline | head",
    "find . -name '*.ts' -exec grep -l TODO {} +",
    "xargs -n1 echo",
    "timeout 5 make test",
    "env LANG=C sort f",
    "python3 tool.py --flag",
    "python3 --version",
    "bash --version",
    "git -c user.name=x commit -m msg",
    "sed -n '1,20p' f",
    "sed -i 's/foo/bar/g' f",
    "sed --sandbox 'e id' f",
  ])("%j keeps its declared level", (script) => {
    expect(assessShellRisk(script, "read-only")).toEqual({ level: "read-only", reasons: [] });
  });
});

describe("the denylist reads the same places", () => {
  it.each([
    [["bash", "--init-file", "f", "-c", "sudo id"]],
    [["bash", "--rcfile", "f", "-c", "sudo id"]],
    [["find", ".", "-exec", "sh", "-c", "sudo id", ";"]],
    [["script", "-qc", "sudo id"]],
    [["sh", "-c", "eval 'sudo id'"]],
    [["sh", "-c", "trap 'sudo id' EXIT"]],
    [["git", "-c", "core.pager=sudo id", "log"]],
    [["ssh", "-o", "ProxyCommand=sudo id", "h"]],
  ])("refuses %j like bash -c 'sudo id'", (argv) => {
    const [program, ...args] = argv as [string, ...string[]];
    const verdict = checkCommandDenylist(program, args);
    expect(verdict.denied).toBe(true);
  });
});

// Forms the floor and the denylist already read before the walk; kept so they stay read.
describe("forms that already held", () => {
  it.each([
    [["bash", "-o", "errexit", "-O", "extglob", "-c", hazard]],
    [["bash", "-ec", hazard]],
    [["bash", "-lc", hazard]],
    [["bash", "-c", "-e", hazard]],
    [["bash", "--norc", "--noprofile", "-c", hazard]],
    [["sh", "+o", "noglob", "-c", hazard]],
    [["busybox", "sh", "-c", "--", hazard]],
    [["python3", "-Ic", "import os"]],
    [["perl", "-lne", "print"]],
    [["ruby", "-rjson", "-e", "1"]],
    [["node", "--eval=1"]],
    [["node", "-pe", "1"]],
    [["node", "--print", "1"]],
    [["php", "-r", "system('id');"]],
    [["awk", 'BEGIN{system("id")}']],
    [["gawk", "--source", "BEGIN{}"]],
    [["osascript", "-e", 'do shell script "id"']],
    [["pwsh", "-Command", "Get-Process"]],
    [["deno", "eval", "1"]],
    [["flock", "-w", "5", "lockfile", "sh", "-c", hazard]],
    [["watch", "-x", "sh", "-c", hazard]],
    [["xargs", "-I{}", "sh", "-c", hazard]],
    [["timeout", "-k", "1", "5", "sh", "-c", hazard]],
    [["nice", "-n", "5", "sh", "-c", hazard]],
    [["env", "-S", hazard]],
    [["env", "--split-string=sh -c 'echo $(id)'"]],
    [["setsid", "-f", "sh", "-c", hazard]],
    [["nohup", "sh", "-c", hazard]],
    [["stdbuf", "-oL", "sh", "-c", hazard]],
    [["ionice", "-c", "3", "sh", "-c", hazard]],
    [["chrt", "-b", "0", "sh", "-c", hazard]],
    [["taskset", "-c", "0", "sh", "-c", hazard]],
    [["sudo", "-u", "me", "sh", "-c", hazard]],
    [["doas", "sh", "-c", hazard]],
    [["runuser", "-u", "me", "--", "sh", "-c", hazard]],
    [["busybox", "sh", "-c", hazard]],
  ])("%j is high-risk", (argv) => {
    expect(assessArgvRisk(argv, "read-only").risk).toBe("high-risk");
  });

  it.each(['eval "echo $(id)"'])("%j is high-risk", (script) => {
    expect(assessShellRisk(script, "read-only").level).toBe("high-risk");
  });

  it.each([
    [["bash", "-o", "errexit", "-c", "sudo id"]],
    [["flock", "f", "-c", "sudo id"]],
    [["env", "-S", "sudo id"]],
    [["watch", "sudo", "id"]],
    [["su", "-c", "id", "root"]],
  ])("the denylist refuses %j", (argv) => {
    const [program, ...args] = argv as [string, ...string[]];
    expect(checkCommandDenylist(program, args).denied).toBe(true);
  });
});

// Property: wrapping a high-risk command in any wrapper or shell form never lowers its risk.
const hazardous = fc.constantFrom<string[]>(
  ["sh", "-c", "ls > out"],
  ["bash", "-c", "echo $(id)"],
  ["python3", "-c", "1"],
  ["perl", "-e", "1"],
  ["sh", "-c", "x=y; echo $((x))"],
  ["sh", "-c", 'eval "$x"'],
  ["find", ".", "-exec", "sh", "-c", "echo `id`", ";"],
);
const quote = (argv: readonly string[]) =>
  argv.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(" ");
const wrap = fc.constantFrom<(argv: string[]) => string[]>(
  (a) => ["env", ...a],
  (a) => ["env", "-i", "A=1", ...a],
  (a) => ["nice", "-n", "5", ...a],
  (a) => ["timeout", "-k", "1", "5", ...a],
  (a) => ["nohup", ...a],
  (a) => ["setsid", ...a],
  (a) => ["stdbuf", "-oL", ...a],
  (a) => ["ionice", "-c", "3", ...a],
  (a) => ["taskset", "-c", "0", ...a],
  (a) => ["chrt", "-o", "0", ...a],
  (a) => ["xargs", "-n", "1", ...a],
  (a) => ["sudo", "-u", "u", ...a],
  (a) => ["doas", ...a],
  (a) => ["command", ...a],
  (a) => ["busybox", ...a],
  (a) => ["find", ".", "-exec", ...a, ";"],
  (a) => ["flock", "lock", ...a],
  (a) => ["watch", "-x", ...a],
  (a) => ["sh", "-c", quote(a)],
  (a) => ["bash", "--rcfile", "f", "-c", quote(a)],
  (a) => ["bash", "-o", "pipefail", "-ec", quote(a)],
  (a) => ["flock", "lock", "-c", quote(a)],
  (a) => ["script", "-qc", quote(a)],
  (a) => ["su", "-c", quote(a)],
  (a) => ["env", "-S", quote(a)],
  (a) => ["sh", "-c", `eval ${quote([quote(a)])}`],
);

describe("wrapping never lowers the floor", () => {
  it("any wrapper or shell form around a high-risk command, a few levels deep, is high-risk", () => {
    fc.assert(
      fc.property(hazardous, fc.array(wrap, { minLength: 1, maxLength: 4 }), (argv, wrappers) => {
        const wrapped = wrappers.reduce((a, w) => w(a), [...argv]);
        expect(assessArgvRisk(wrapped, "read-only").risk).toBe("high-risk");
      }),
      { numRuns: 300 },
    );
  });
});
