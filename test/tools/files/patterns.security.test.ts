// Patterns from the model must never stall the server. Node's glob matcher expands braces and
// backtracks inside one call, so: brace bombs, {x..y} ranges and extglob groups are refused up
// front; any other pattern that is not simple is matched in a worker under the call's deadline.
// The attacks below would hold the main thread for minutes if matched there; the proof that they
// are not is that other work (a timer, a concurrent tool call) completes while they run.
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ToolRuntime } from "../../../src/tools/types.ts";
import {
  callTool,
  createSandbox,
  expectFailure,
  expectSuccess,
  type Sandbox,
  startRuntime,
} from "../support.ts";

let sandbox: Sandbox;
let runtime: ToolRuntime;

// A name of 200 `a`s and a pattern whose regex backtracks through every split of it: matched on
// the main thread, one call of path.matchesGlob takes longer than this suite's timeout.
const longName = "a".repeat(200);
const backtracking = `${"*a".repeat(12)}*b`;

beforeEach(async () => {
  sandbox = await createSandbox();
  // A generous deadline: the assertions never depend on how long it is.
  runtime = await startRuntime(sandbox, { find: { timeMs: 3_000 }, grep: { timeMs: 3_000 } });
  await mkdir(path.join(sandbox.workspace, "src"));
  await writeFile(path.join(sandbox.workspace, longName), `${"a".repeat(64)}\n`);
  await writeFile(path.join(sandbox.workspace, "src", "main.ts"), "export {};\n");
});

afterEach(async () => {
  await runtime.close();
  await sandbox.cleanup();
});

/** Runs `call` and counts event-loop turns (setImmediate) and a concurrent ls while it runs. */
async function whileServing<T>(call: () => Promise<T>) {
  let turns = 0;
  let running = true;
  const spin = () => {
    if (!running) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  let lsDoneFirst = false;
  const pending = call().then((result) => {
    running = false;
    return result;
  });
  const ls = callTool(runtime, "ls", {}).then((result) => {
    lsDoneFirst = running;
    return result;
  });
  const [result, listing] = await Promise.all([pending, ls]);
  expectSuccess(listing);
  return { result, turns, lsDoneFirst };
}

describe("glob complexity refused up front", () => {
  const refused: [string, string, RegExp][] = [
    ["a brace bomb", "{a,b}".repeat(24), /more than 64 alternatives/],
    ["nested braces that multiply", "{{a,b},{c,d}}".repeat(4), /more than 64 alternatives/],
    ["a numeric range", "{1..1000000}.txt", /\{x\.\.y\} range/],
    ["a letter range", "{a..z}", /\{x\.\.y\} range/],
    ["an extglob repetition", "+(a|aa)+(a|aa)+(a|aa)b", /extglob/],
    ["a negated extglob", "!(x)*", /extglob/],
  ];
  it.each(refused)("find refuses %s with a clear error", async (_what, pattern, message) => {
    const error = expectFailure(await callTool(runtime, "find", { pattern }), "invalid-input");
    expect(error).toMatch(message);
  });
  it.each(refused)("grep refuses %s as its glob", async (_what, glob, message) => {
    const error = expectFailure(
      await callTool(runtime, "grep", { pattern: "a", glob }),
      "invalid-input",
    );
    expect(error).toMatch(message);
    expect(error).toContain("glob");
  });

  it("still matches ordinary braces and globstars", async () => {
    const found = expectSuccess(await callTool(runtime, "find", { pattern: "**/*.{ts,js}" }));
    expect(found.matches).toEqual(["src/main.ts"]);
    const grep = expectSuccess(
      await callTool(runtime, "grep", { pattern: "export", glob: "*.{ts,md}" }),
    );
    expect(grep.matches).toEqual([{ path: "src/main.ts", line: 1, text: "export {};" }]);
  });
});

describe("a backtracking glob is matched off the main thread, under the deadline", () => {
  it("find stops at its deadline while the server keeps serving", async () => {
    const { result, turns, lsDoneFirst } = await whileServing(() =>
      callTool(runtime, "find", { pattern: backtracking }),
    );
    const content = expectSuccess(result);
    expect(content.stoppedBy).toBe("deadline");
    expect(content.matches).toEqual([]);
    expect(lsDoneFirst).toBe(true);
    expect(turns).toBeGreaterThan(0);
  });

  it("grep's glob filter stops at its deadline while the server keeps serving", async () => {
    const { result, turns, lsDoneFirst } = await whileServing(() =>
      callTool(runtime, "grep", { pattern: "a", glob: backtracking }),
    );
    const content = expectSuccess(result);
    expect(content.stoppedBy).toBe("deadline");
    expect(content.matches).toEqual([]);
    expect(lsDoneFirst).toBe(true);
    expect(turns).toBeGreaterThan(0);
  });

  it("a complex pattern that is cheap still finds what it should", async () => {
    const found = expectSuccess(await callTool(runtime, "find", { pattern: "*a*a*" }));
    expect(found.matches).toEqual([longName]);
    expect(found.stoppedBy).toBeUndefined();
  });
});

describe("grep's regular expression", () => {
  it("a catastrophic regex stops at the deadline while the server keeps serving", async () => {
    const { result, turns, lsDoneFirst } = await whileServing(() =>
      callTool(runtime, "grep", { pattern: "^(a+)+b$" }),
    );
    const content = expectSuccess(result);
    expect(content.stoppedBy).toBe("deadline");
    expect(lsDoneFirst).toBe(true);
    expect(turns).toBeGreaterThan(0);
  });
});
