// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are shell source, not templates
// Deleting from the shell, as the reference describes it: rm, unlink, shred, find -delete (and
// find -exec rm, git clean) are refused wherever the shell runs them; only the mktemp clean-up
// passes — a temp path made by mktemp in the same command — and a temp path beside a real one,
// or with `..` in it, still refuses. Each refusal says what to do instead. Every row of the
// refused table ran under `auto` before this rule.
import { describe, expect, it } from "vitest";
import { checkCommandDenylist } from "../../src/shell/denylist.ts";

function verdict(argv: readonly string[]) {
  const [program, ...args] = argv as [string, ...string[]];
  return checkCommandDenylist(program, args);
}

describe("deletion from the shell", () => {
  it.each([
    [["rm", "-rf", "build"]],
    [["rm", "-rf", "./dist/"]],
    [["rm", "a/../b"]],
    [["rm", "/tmp/scratch.txt"]],
    [["rm", "-rf", "node_modules", "coverage"]],
    [["rm", "--", "-weird-name"]],
    [["unlink", "link"]],
    [["shred", "-u", "secret.txt"]],
    [["find", ".", "-delete"]],
    [["find", ".", "-name", "*.tmp", "-delete"]],
    [["find", ".", "-name", "*.o", "-exec", "rm", "{}", ";"]],
    [["find", ".", "-execdir", "rm", "-f", "{}", "+"]],
    [["git", "clean", "-fdx"]],
    [["xargs", "rm"]],
    [["sh", "-c", "rm -rf build"]],
    [["sh", "-c", "d=/; rm -rf $d"]],
    [["bash", "--init-file", "f", "-c", "rm -rf src"]],
    [["sh", "-c", 'tmp="$(mktemp -d)"; rm -rf "$tmp" src']],
    [["sh", "-c", 'tmp=$(mktemp -d); rm -rf "$tmp/../src"']],
    [["sh", "-c", 'tmp=$(mktemp -d); tmp=src; rm -rf "$tmp"']],
    [["sh", "-c", 'tmp=$(mktemp -d); for tmp in src; do :; done; rm -rf "$tmp"']],
    [["sh", "-c", 'tmp=$(mktemp -d); read tmp; rm -rf "$tmp"']],
    [["sh", "-c", 'rm -rf "$tmp"']],
    [["sh", "-c", 'tmp=$(mktemp -d); rm -rf "$tmp$x"']],
    [["sh", "-c", 'tmp=$(echo mktemp); rm -rf "$tmp"']],
    [["sh", "-c", 'tmp=$(mktemp -d); trap "rm -rf src" EXIT']],
    [["sh", "-c", 'tmp=$(mktemp -d); find "$tmp" src -delete']],
    [["env", "rm", "x"]],
    [["timeout", "5", "unlink", "x"]],
    [["sudo", "rm", "x"]],
  ])("refuses %j, saying what to do instead", (argv) => {
    const v = verdict(argv);
    expect(v.denied).toBe(true);
    if (v.denied) expect(v.reason).toMatch(/delet|privilege/);
    if (v.denied && v.reason.startsWith("deletes files")) {
      expect(v.reason).toContain("name them in your answer");
      expect(v.reason).toContain("mktemp");
    }
  });

  it.each([
    [["sh", "-c", 'tmp=$(mktemp -d); echo hi > "$tmp/x"; rm -rf "$tmp"']],
    [["sh", "-c", 'tmp="$(mktemp -d)"; rm -rf -- "$tmp"']],
    [["sh", "-c", "tmp=`mktemp`; rm -f $tmp"]],
    [["sh", "-c", 'tmp=$(mktemp -d); rm -rf "${tmp}"']],
    [["sh", "-c", 'tmp=$(mktemp -d); rm -rf "$tmp"/build']],
    [["bash", "-c", 'tmp=$(mktemp -d); trap \'rm -rf "$tmp"\' EXIT; ls "$tmp"']],
    [["sh", "-c", 'a=$(mktemp); b=$(mktemp -d); rm -rf "$a" "$b"']],
    [["sh", "-c", 'tmp=$(mktemp -d); find "$tmp" -delete']],
    [["rmdir", "empty"]],
    [["git", "clean", "-n"]],
    [["echo", "rm -rf build"]],
    [["git", "commit", "-m", "rm the old build"]],
  ])("lets %j run (the mktemp clean-up, or no deletion)", (argv) => {
    expect(verdict(argv)).toEqual({ denied: false });
  });
});
