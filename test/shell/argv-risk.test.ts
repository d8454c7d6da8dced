// The risk floor for an argv: a shell given a script has the floor applied to that script,
// behind any wrapper; an interpreter given inline code is high-risk (the floor cannot read it);
// anything else keeps its declared level. The floor never lowers.
import { describe, expect, it } from "vitest";
import { assessArgvRisk } from "../../src/shell/risk.ts";

describe("assessArgvRisk", () => {
  it.each([
    [["sh", "-c", "ls > out"], "sh -c script: redirection"],
    [["bash", "-lc", "echo $(id)"], "bash -lc script: command substitution"],
    [["/bin/bash", "-e", "-c", "cat < /etc/passwd"], "bash -c script: redirection"],
    [["sh", "-o", "errexit", "-c", "$CMD"], "command word built from an expansion"],
    [["env", "FOO=1", "sh", "-c", "ls > x"], "sh -c script: redirection"],
    [["env", "-i", "bash", "-c", "ls > x"], "bash -c script: redirection"],
    [["env", "-u", "HOME", "bash", "-c", "ls > x"], "bash -c script: redirection"],
    [["env", "-S", "ls > x"], "env -S script: redirection"],
    [["env", "-S", "sh -c 'ls > x'"], "sh -c script: redirection"],
    [["busybox", "sh", "-c", "ls > x"], "sh -c script: redirection"],
    [["sudo", "-u", "x", "bash", "-c", "ls > x"], "bash -c script"],
    [["xargs", "-n", "1", "sh", "-c", "ls > x"], "sh -c script"],
    [["timeout", "5", "bash", "-c", "ls > x"], "bash -c script"],
    [["nice", "-n", "5", "sh", "-c", "ls > x"], "sh -c script"],
    [["sh", "-c", "bash -c 'ls > x'"], "bash -c script: redirection"],
    [["sh", "-c", "echo 'abc"], "unterminated"],
    [["python", "-c", "print(1)"], "python -c: runs inline code"],
    [["python3", "-c", "print(1)"], "python3 -c: runs inline code"],
    [["python3.12", "-c", "print(1)"], "python3.12 -c: runs inline code"],
    [["node", "-e", "1"], "node -e: runs inline code"],
    [["node", "--eval", "1"], "node --eval: runs inline code"],
    [["node", "--eval=1"], "node --eval: runs inline code"],
    [["node", "-p", "1"], "node -p: runs inline code"],
    [["perl", "-e", "1"], "perl -e: runs inline code"],
    [["perl", "-pe", "s/a/b/", "f"], "perl -pe: runs inline code"],
    [["ruby", "-e", "1"], "ruby -e: runs inline code"],
    [["php", "-r", "1;"], "php -r: runs inline code"],
    [["awk", "{print $1}", "f"], "awk (program): runs inline code"],
    [["env", "python3", "-c", "1"], "python3 -c: runs inline code"],
  ])("%j is high-risk (%s)", (argv, reason) => {
    const floor = assessArgvRisk(argv, "read-only");
    expect(floor.risk).toBe("high-risk");
    expect(floor.reasons.join("; ")).toContain(reason);
  });

  it.each([
    [["sh", "-c", "ls -la | wc -l"]],
    [["bash", "-lc", "git status --short"]],
    [["env", "-i", "bash", "-c", "make test 2>&1"]],
    [["bash", "script.sh"]],
    [["python3", "tool.py", "-c", "x"]],
    [["node", "server.js"]],
    [["ls", "-la"]],
    [["git", "commit", "-m", "echo $(id) > x"]],
    [["awk", "-f", "prog.awk", "data"]],
  ])("%j keeps its declared level", (argv) => {
    const floor = assessArgvRisk(argv, "read-only");
    expect(floor).toEqual({ risk: "read-only", reasons: [] });
  });

  it("never lowers a level", () => {
    expect(assessArgvRisk(["sh", "-c", "ls"], "unknown").risk).toBe("unknown");
    expect(assessArgvRisk(["sh", "-c", "ls > x"], "unknown").risk).toBe("unknown");
    expect(assessArgvRisk(["sh", "-c", "ls > x"], "low-risk").risk).toBe("high-risk");
    expect(assessArgvRisk(["python3", "-c", "1"], "high-risk").risk).toBe("high-risk");
  });

  it("treats a script too long to read as high-risk", () => {
    const floor = assessArgvRisk(["sh", "-c", `echo ${"a".repeat(70_000)}`], "read-only");
    expect(floor.risk).toBe("high-risk");
    expect(floor.reasons.join()).toContain("too long");
  });

  it("does not judge code the operator fixed in a declared tool as the model's", () => {
    const node = ["node", "-e", "process.stdout.write(process.argv.slice(1).join(' '))"];
    expect(assessArgvRisk([...node, "a", "b"], "read-only", { fixedArgs: 3 })).toEqual({
      risk: "read-only",
      reasons: [],
    });
    // Without the operator's prefix, the same argv is the model's code.
    expect(assessArgvRisk([...node, "a"], "read-only").risk).toBe("high-risk");
    // A fixed shell script still gets the floor: `$1` as the command runs the model's argument.
    const floor = assessArgvRisk(["sh", "-c", '"$1"', "_", "rm"], "read-only", { fixedArgs: 4 });
    expect(floor.risk).toBe("high-risk");
    expect(floor.reasons.join()).toContain("command word built from an expansion");
    // A fixed prefix that leaves the program to the model does not count as fixed code.
    expect(assessArgvRisk(["env", "python3", "-c", "1"], "read-only", { fixedArgs: 1 }).risk).toBe(
      "high-risk",
    );
  });
});
