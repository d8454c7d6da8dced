// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are shell source, not templates
// Command keys and allowlist coverage, table-driven: every example of the reference texts, then
// hazards, wrappers, word boundaries and look-alikes. A covered command runs without asking, so
// every row that says "no key" is a command no entry may ever approve.
import { describe, expect, it } from "vitest";
import {
  type AllowEntry,
  entryCoversKey,
  explainCoverage,
  parseAllowEntry,
} from "../../src/shell/command-key.ts";
import { argvKey, commandKey } from "../../src/shell/keys.ts";

function entry(text: string): AllowEntry {
  const parsed = parseAllowEntry(text);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.entry;
}

function covered(entries: readonly string[], script: string): boolean {
  return explainCoverage(commandKey(script), entries.map(entry)).covered;
}

describe("commandKey: the reference's examples", () => {
  it.each([
    ["git diff --stat", "git diff"],
    ["ls -la", "ls"],
    ["git -C repo status", "git"],
    ["sudo apt install x", "sudo apt"],
    ["npx jest", "npx jest"],
    ["git status", "git status"],
    ["git status --short", "git status"],
    ["git statusfoo", "git statusfoo"],
    ["git -C status rm -rf .", "git"],
    ["git log", "git log"],
    ["git push", "git push"],
    ["ls", "ls"],
    ["rm -rf /", "rm"],
  ])("%j keys to %j", (script, key) => {
    expect(commandKey(script).key?.text).toBe(key);
  });

  // "With git status and git log approved, all of these still ask", and the ❌ rows.
  it.each([
    "git status && rm -rf x",
    "git status | sh",
    "git status <(rm x)",
    "git status $(rm x)",
    "git status > ~/.bashrc",
    "git status 2>/dev/null",
    "git status `rm x`",
    "git status & rm x",
    "PAGER=x git log",
    "PAGER=x git status",
    "git status && rm -rf /",
  ])("%j has no key", (script) => {
    const result = commandKey(script);
    expect(result.key).toBeUndefined();
    expect(result.reason).toBeTruthy();
    expect(covered(["git status", "git log", "git"], script)).toBe(false);
  });

  it.each([
    [["git status"], "git status", true],
    [["git status"], "git status --short", true],
    [["git status"], "git statusfoo", false],
    [["git status"], "git -C status rm -rf .", false],
    [["git"], "git push", true],
    [["git"], "git status", true],
    [["git status", "git log"], "git log --oneline -n 5", true],
    [["git status", "git log"], "git push", false],
    [["sudo"], "sudo apt install x", true],
    [["apt"], "sudo apt install x", false],
    [["jest"], "npx jest", false],
    [["npx jest"], "npx jest --watch", true],
    [["ls"], "ls -la", true],
  ])("entries %j cover %j: %s", (entries, script, expected) => {
    expect(covered(entries, script)).toBe(expected);
  });
});

describe("commandKey: hazards", () => {
  it.each([
    ["git status; ls", "control operator"],
    ["git status\nls", "control operator"],
    ["git status || true", "control operator"],
    ["git status;", "control operator"],
    ["git status &", "background"],
    ["git status | head", "pipe"],
    ["(git status)", "grouping"],
    ["{ git status; }", "grouping"],
    ["git status # see", "comment"],
    ["if true; then git status; fi", "compound"],
    ["! git status", "compound"],
    ["[[ -f x ]]", "compound"],
    ["for f in a; do git log; done", "compound"],
    ["f() { git status; }", "function"],
    ["cat <<EOF\nx\nEOF", "here-document"],
    ["cat <<< hello", "redirection"],
    ["git status > out", "redirection"],
    ["git status < in", "redirection"],
    ["git status 2>&1", "redirection"],
    ["git status &>/dev/null", "redirection"],
    ["git log $HOME", "parameter expansion"],
    ["git log ${X}", "parameter expansion"],
    ['git log "$X"', "parameter expansion"],
    ["git log $((1+1))", "arithmetic"],
    ["git log {a,b}", "brace expansion"],
    ["$GIT status", "parameter expansion"],
    ["~/bin/git status", "expansion"],
    ["gi* status", "expansion"],
    ["git st*", "expansion"],
    ["X=1 git status", "assignment"],
    ["env X=1 git status", "assignment"],
    ["git status 'unterminated", "unterminated"],
    ['git status "unterminated', "unterminated"],
    ["git status $(", "unterminated"],
    ["", "no command"],
    ["   ", "no command"],
    ["sh -c 'git status; rm -rf x'", "control operator"],
    ["bash -c 'git status' extra", "after a shell's -c script"],
  ])("%j has no key (%s)", (script, reason) => {
    const result = commandKey(script);
    expect(result.key).toBeUndefined();
    expect(result.reason).toContain(reason);
  });

  it("keys a shell's -c script to the script's key", () => {
    expect(commandKey("sh -c 'git status --short'").key?.text).toBe("git status");
    expect(commandKey("bash -lc 'npm test'").key?.text).toBe("npm test");
    expect(commandKey("sh -c \"sh -c 'ls -la'\"").key?.text).toBe("ls");
    expect(covered(["sh"], "sh -c 'rm -rf x'")).toBe(false);
  });

  it("reads quotes the way the shell does", () => {
    expect(commandKey("'git' \"status\"").key?.text).toBe("git status");
    expect(commandKey("g\\it status").key?.text).toBe("git status");
    // One quoted word with a space is one argument, not two: it never matches `git status`.
    expect(commandKey('"git status"').key).toBeUndefined();
    expect(commandKey("git 'status --short'").key).toBeUndefined();
    expect(commandKey("git status '$(not run)'").key?.text).toBe("git status");
  });
});

describe("commandKey: wrappers", () => {
  it.each([
    ["sudo apt install x", "sudo apt"],
    ["sudo -u root apt install x", "sudo"],
    ["npx jest --ci", "npx jest"],
    ["npx -y jest", "npx"],
    ["nice git status", "nice git"],
    ["nice -n 5 git status", "nice"],
    ["timeout 10 git status", "timeout 10"],
    ["env git status", "env git"],
    ["env -i git status", "env"],
    ["xargs rm", "xargs rm"],
    ["/usr/bin/git status", "/usr/bin/git status"],
    ["./git status", "./git status"],
  ])("%j keys to %j", (script, key) => {
    expect(commandKey(script).key?.text).toBe(key);
  });

  it("never lets an entry for a program cover it behind a wrapper", () => {
    for (const script of [
      "sudo git status",
      "nice git status",
      "timeout 5 git status",
      "env git status",
      "npx git status",
      "/usr/bin/git status",
    ]) {
      expect(covered(["git", "git status"], script)).toBe(false);
    }
  });
});

describe("commandKey: word boundaries and look-alikes", () => {
  it.each([
    [["git st"], "git status", false],
    [["git"], "gitk", false],
    [["git"], "git", true],
    [["git status"], "git", false],
    [["npm test"], "npm testing", false],
    [["npm test"], "npm test:unit", false],
    [["ls"], "ls.exe", false],
  ])("entries %j cover %j: %s", (entries, script, expected) => {
    expect(covered(entries, script)).toBe(expected);
  });

  it.each([
    "g\u0456t status", // Cyrillic і
    "\uff47\uff49\uff54 status", // full-width git
    "git\u200b status", // zero-width space
    "git\u00a0status", // no-break space
    "git st\u0430tus", // Cyrillic а
    "git\u202estatus", // right-to-left override
    "git status\u0007", // BEL
    "ｇit status",
  ])("%j is never covered by git or git status", (script) => {
    expect(covered(["git", "git status"], script)).toBe(false);
  });
});

describe("argvKey", () => {
  it.each([
    [["git", "status", "--short"], "git status"],
    [["git", "-C", "repo", "status"], "git"],
    [["ls", "-la"], "ls"],
    [["npx", "jest"], "npx jest"],
    [["sh", "-c", "git log -n 3"], "git log"],
    [["bash", "-lc", "git status"], "git status"],
  ])("%j keys to %j", (argv, key) => {
    expect(argvKey(argv).key?.text).toBe(key);
  });

  it.each([
    [["sh", "-c", "git status; rm -rf x"], "control operator"],
    [["bash", "-c", "git status $(id)"], "substitution"],
    [["env", "X=1", "git", "status"], "assignment"],
    [["git", "status --short"], "space"],
    [["g\u0456t", "status"], "ASCII"],
    [["git", "st\u200batus"], "invisible"],
    [[""], "no command"],
  ])("%j has no key (%s)", (argv, reason) => {
    const result = argvKey(argv);
    expect(result.key).toBeUndefined();
    expect(result.reason).toContain(reason);
  });

  it("takes an argument literally: shell syntax in an argv element is just text", () => {
    expect(argvKey(["git", "log", "$(rm -rf x)"]).key?.text).toBe("git log");
  });
});

describe("parseAllowEntry", () => {
  it.each(["git", "git status", "npx jest", "sudo apt", "/usr/bin/git status"])(
    "accepts %j",
    (text) => {
      expect(parseAllowEntry(text)).toEqual({ entry: { words: text.split(" "), text } });
    },
  );

  it.each([
    ["", "single spaces"],
    ["git  status", "single spaces"],
    [" git", "single spaces"],
    ["git status --short", "at most two words"],
    ["git --version", "not a flag"],
    ["git;", "shell syntax"],
    ["git $X", "shell syntax"],
    ["g\u0456t", "printable ASCII"],
  ])("refuses %j (%s)", (text, problem) => {
    const parsed = parseAllowEntry(text);
    expect("problem" in parsed && parsed.problem).toContain(problem);
  });

  it("covers its own key and longer keys, never shorter ones", () => {
    const key = commandKey("git status --short").key;
    if (key === undefined) throw new Error("no key");
    expect(entryCoversKey(entry("git"), key)).toBe(true);
    expect(entryCoversKey(entry("git status"), key)).toBe(true);
    const short = commandKey("git").key;
    if (short === undefined) throw new Error("no key");
    expect(entryCoversKey(entry("git status"), short)).toBe(false);
  });

  it("explains coverage with the entry or the reason", () => {
    expect(explainCoverage(commandKey("git status --short"), [entry("git status")])).toMatchObject({
      covered: true,
      entry: { text: "git status" },
    });
    expect(explainCoverage(commandKey("git push"), [entry("git status")])).toMatchObject({
      covered: false,
      reason: 'no entry covers the key "git push"',
    });
    expect(explainCoverage(commandKey("git status; rm x"), [entry("git")])).toMatchObject({
      covered: false,
      reason: expect.stringContaining("no key: a control operator"),
    });
  });
});
